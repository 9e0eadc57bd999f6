#include "cli/common.h"
#include "engine/spec.h"

#include "base/env.h"
#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"
#include "comm/comm.h"
#include "kernels/kernel_table.h"
#include "engine/executor.h"
#include "model/place.h"
#include "model/shard.h"
#include "text/chat.h"
#include "text/reasoning.h"
#include "text/toolcall.h"
#include "text/prompt.h"

#include "config/quant_config.h"

#include <omp.h>
#include <signal.h>
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

int hy_cli_check_quantization(const char *q, const char *model_dir)
{
    if (!q)
        return 0;
    if (strcmp(q, "ascend") && strcmp(q, "fp8") && strcmp(q, "compressed-tensors"))
        return hy_err_set("--quantization \"%s\": expected ascend, fp8 or compressed-tensors (hyinfer reads the "
                          "method from the checkpoint; the flag confirms it)",
                          q);
    struct hy_quant_config qc;
    if (hy_quant_config_load(model_dir, &qc)) {
        hy_quant_config_free(&qc);
        return -1;
    }
    const char *have = hy_quant_method_name(qc.method);
    const int ok = strcmp(have, q) == 0;
    hy_quant_config_free(&qc);
    if (!ok)
        return hy_err_set("--quantization %s: %s holds %s%s", q, model_dir,
                          strcmp(have, "none") ? have : "an unquantized checkpoint",
                          !strcmp(q, "ascend") ? " (no quant_model_description.json)" : "");
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

int hy_cli_encode_prompt(const struct hy_tokenizer *tok, const struct hy_chat *chat, const char *text,
                         const char *reasoning_effort, const json_t *tools, int32_t **ids, size_t *n,
                         int *start_in_reasoning)
{
    *ids = NULL;
    *n = 0;
    if (start_in_reasoning)
        *start_in_reasoning = 0;
    if (!chat)
        return hy_prompt_encode(tok, text, strlen(text), 1, ids, n);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", text);
    if (!msgs)
        return hy_err_set("prompt is not valid UTF-8 text");
    json_t *kw = json_pack("{s:b}", "add_generation_prompt", 1);
    if (kw && reasoning_effort)
        json_object_set_new(kw, "reasoning_effort", json_string(reasoning_effort));
    char *rendered = kw ? hy_chat_apply(chat, msgs, tools, kw) : NULL;
    json_decref(kw);
    json_decref(msgs);
    if (!rendered)
        return -1;
    if (start_in_reasoning) {
        struct hy_tool_markers mk;
        hy_tool_markers_from_vocab(tok, &mk); /* the think spelling even without tool tokens */
        *start_in_reasoning = hy_reasoning_prompt_open_markers(rendered, strlen(rendered), mk.text[HY_TM_THINK_OPEN],
                                                               mk.text[HY_TM_THINK_CLOSE]);
    }
    int rc = hy_tokenizer_encode(tok, rendered, strlen(rendered), 1, ids, n);
    free(rendered);
    return rc;
}

int hy_cli_load_chat(const char *model_dir, const char *chat_template, struct hy_chat *chat)
{
    if (hy_chat_load(chat, model_dir, chat_template))
        return -1;
    if (!hy_chat_available(chat)) {
        hy_chat_free(chat);
        return hy_err_set("%s: the model has no chat template (no chat_template.jinja, no chat_template in "
                          "tokenizer_config.json): pass --chat-template FILE",
                          model_dir);
    }
    return 0;
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

int hy_cli_spec_resolve(const struct hy_cli_spec *s, struct hy_spec_config *out)
{
    if (s->json && hy_spec_config_parse_json(out, s->json))
        return hy_err_prefix("--speculative-config");
    const char *keys[] = {"method", "num_speculative_tokens", "draft_p_min", "gate", "mtp_zero_pos0"};
    const char *vals[] = {s->method, s->k, s->p_min, s->gate, s->zero0};
    for (int i = 0; i < 5; i++)
        if (vals[i] && hy_spec_config_set(out, keys[i], vals[i]))
            return hy_err_prefix("--speculative-config.%s", keys[i]);
    return hy_spec_config_validate(out);
}

void hy_cli_print_spec(FILE *f, const char *prefix, int32_t k, const struct hy_spec_stats *st)
{
    if (k <= 0)
        return;
    const double nd = st->num_drafts ? (double)st->num_drafts : 1.0;
    fprintf(f,
            "%sspec decode: k %d, drafts %llu, draft tokens %llu, accepted %llu (%.1f%%), mean acceptance length %.2f, "
            "per-position acceptance [",
            prefix, k, (unsigned long long)st->num_drafts, (unsigned long long)st->num_draft_tokens,
            (unsigned long long)st->num_accepted_tokens,
            st->num_draft_tokens ? 100.0 * (double)st->num_accepted_tokens / (double)st->num_draft_tokens : 0.0,
            1.0 + (double)st->num_accepted_tokens / nd);
    for (int32_t i = 0; i < k && i < HY_SPEC_MAX_TOKENS; i++)
        fprintf(f, "%s%.3f", i ? ", " : "", (double)st->num_accepted_tokens_per_pos[i] / nd);
    fprintf(f, "], gate: windows on %llu / off %llu (%.1f vs %.1f tok/s), early off %llu, MTP off %llu, drafting %s\n",
            (unsigned long long)st->gate_windows_on, (unsigned long long)st->gate_windows_off, st->rate_on,
            st->rate_off, (unsigned long long)st->gate_early_off, (unsigned long long)st->gate_hard_off,
            st->drafting ? "on" : "off");
}
