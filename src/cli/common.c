#include "cli/common.h"

#include "base/env.h"
#include "base/err.h"
#include "text/chat_template.h"
#include "text/prompt.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hy_cli_parse_dtype(const char *s, const char *model_dir, enum hy_compute_dtype *out)
{
    if (s && (!strcmp(s, "float32") || !strcmp(s, "fp32") || !strcmp(s, "f32") || !strcmp(s, "float"))) {
        *out = HY_COMPUTE_F32;
        return 0;
    }
    if (s && (!strcmp(s, "bfloat16") || !strcmp(s, "bf16"))) {
        *out = HY_COMPUTE_BF16;
        return 0;
    }
    if (s && strcmp(s, "auto") != 0)
        return hy_err_set("--dtype \"%s\": expected float32 (f32), bfloat16 (bf16) or auto", s);
    struct hy_checkpoint ck;
    if (hy_checkpoint_open(model_dir, &ck))
        return -1;
    const struct hy_st_tensor *e = hy_checkpoint_find(&ck, "model.embed_tokens.weight");
    *out = e && e->dtype == HY_DTYPE_F32 ? HY_COMPUTE_F32 : HY_COMPUTE_BF16;
    hy_checkpoint_close(&ck);
    return 0;
}

int hy_cli_set_threads(int *threads)
{
    if (*threads < 0 || *threads > HY_CLI_MAX_THREADS)
        return hy_err_set("--threads %d: must be in [1, %d] (0 or absent = OpenMP's default)", *threads,
                          HY_CLI_MAX_THREADS);
    if (*threads == 0) {
        struct hy_env_params ep;
        if (hy_env_params_read(&ep))
            return -1;             /* names the variable */
        *threads = ep.num_threads; /* HYINFER_NUM_THREADS, 0 = unset */
    }
    if (*threads > 0)
        omp_set_num_threads(*threads);
    return 0;
}

int hy_cli_encode_prompt(const struct hy_tokenizer *tok, const char *text, int chat, const char *reasoning_effort,
                         int32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (chat) {
        json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", text);
        if (!msgs)
            return hy_err_set("prompt is not valid UTF-8 text");
        struct hy_chat_template_opts o;
        hy_chat_template_opts_init(&o);
        o.reasoning_effort = reasoning_effort;
        char *rendered = hy_chat_template_render(msgs, NULL, &o);
        json_decref(msgs);
        if (!rendered)
            return -1;
        int rc = hy_tokenizer_encode(tok, rendered, strlen(rendered), 1, ids, n);
        free(rendered);
        return rc;
    }
    return hy_prompt_encode(tok, text, strlen(text), 1, ids, n);
}

const char *hy_cli_fmt_bytes(double bytes, char *buf, size_t len)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
    return buf;
}
