/* cmd_logits.c - `hyinfer logits`: next-token logits (and MTP-head logits) as JSON, for golden
 * comparisons with other implementations. */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"

#include "base/err.h"
#include "engine/executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_rows(const char *key, const float *rows, int32_t n, int32_t V)
{
    printf(", \"%s\": [", key);
    for (int32_t r = 0; r < n; r++) {
        fputs(r ? ",\n[" : "\n[", stdout);
        for (int32_t v = 0; v < V; v++)
            printf(v ? ",%.9g" : "%.9g", rows[(size_t)r * V + v]);
        putchar(']');
    }
    printf("]");
}

/* Runs the prompt in one batch, then (with mtp) the MTP rows p = 0..n-2: token s[p+1], main
 * final-normed hidden h_p, position p, in the MTP layer's own KV cache (DESIGN §5). */
static int compute(struct hy_model *m, const int32_t *ids, int32_t n, int all, int mtp, enum hy_dtype kv_dtype,
                   float **logits, float **mtp_logits)
{
    const int32_t V = m->cfg.vocab_size, H = m->cfg.hidden_size, bs = 16;
    int32_t nb = (n + bs - 1) / bs;
    struct hy_executor ex;
    hy_executor_init(&ex, m);
    struct hy_kv_cache kv;
    if (hy_executor_kv_cache_init(&ex, &kv, bs, nb, kv_dtype))
        return -1;
    int rc = -1;
    int32_t *pos = malloc((size_t)n * sizeof(int32_t)), *seq = calloc((size_t)n, sizeof(int32_t));
    int32_t *table = malloc((size_t)nb * sizeof(int32_t)), *rows = malloc((size_t)n * sizeof(int32_t));
    int64_t *slots = malloc((size_t)n * sizeof(int64_t));
    float *hidden = malloc((size_t)n * H * sizeof(float));
    *logits = malloc((size_t)(all ? n : 1) * V * sizeof(float));
    *mtp_logits = NULL;
    if (!pos || !seq || !table || !rows || !slots || !hidden || !*logits) {
        hy_err_set("out of memory");
        goto out;
    }
    for (int32_t i = 0; i < nb; i++)
        table[i] = i;
    for (int32_t i = 0; i < n; i++) {
        pos[i] = i;
        slots[i] = i;
        rows[i] = i;
    }
    const int32_t *tables[1] = {table};
    struct hy_batch b = {n, ids, pos, slots, seq, tables, all ? n : 1, all ? rows : rows + n - 1, 0};
    if (hy_executor_forward(&ex, &kv, &b, *logits, hidden))
        goto out;
    if (mtp && n >= 2) {
        *mtp_logits = malloc((size_t)(n - 1) * V * sizeof(float));
        if (!*mtp_logits) {
            hy_err_set("out of memory");
            goto out;
        }
        struct hy_batch mb = {n - 1, ids + 1, pos, slots, seq, tables, n - 1, rows, 0};
        if (hy_executor_forward_mtp(&ex, &kv, &mb, hidden, *mtp_logits, NULL))
            goto out;
    }
    rc = 0;
out:
    free(pos);
    free(seq);
    free(table);
    free(rows);
    free(slots);
    free(hidden);
    hy_executor_kv_cache_free(&ex, &kv);
    return rc;
}

int hy_cmd_logits(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = NULL, *prompt_ids = NULL, *dtype = NULL, *kvd = NULL, *quantization = NULL,
               *chat_template = NULL;
    struct hy_chat chat_tpl = {0};
    int all = 0, mtp = 0, json = 0, threads = 0, help = 0, chat = 0;
    struct hy_cli_par par = {0};
    const struct hy_arg args[] = {
        HY_CLI_PAR_ARGS(par),
        {"--model", "-m", HY_ARG_STR, &model_dir, NULL, "model directory (Hugging Face layout)"},
        {"--prompt", "-p", HY_ARG_STR, &prompt, NULL, "prompt text (tokenizer's BOS added)"},
        {"--prompt-ids", NULL, HY_ARG_STR, &prompt_ids, NULL, "comma-separated token ids, fed as given"},
        {"--chat", NULL, HY_ARG_FLAG, &chat, NULL, "render -p as a user turn through the chat template"},
        {"--chat-template", NULL, HY_ARG_STR, &chat_template, NULL,
         "chat template file or text for --chat (default: the checkpoint's)"},
        {"--all-positions", NULL, HY_ARG_FLAG, &all, NULL, "logits of every position, not just the last"},
        {"--mtp", NULL, HY_ARG_FLAG, &mtp, NULL, "also the MTP head's logits for rows p = 0..n-2"},
        {"--dtype", NULL, HY_ARG_STR, &dtype, NULL, "float32 | bfloat16 | auto (compute mode)"},
        {"--quantization", "-q", HY_ARG_STR, &quantization, NULL,
         "ascend | fp8 | compressed-tensors: confirms the checkpoint's method (detected from its files)"},
        {"--kv-cache-dtype", NULL, HY_ARG_STR, &kvd, NULL, "auto (compute dtype) | bf16 | fp8 (fp8_e4m3) | fp32"},
        {"--threads", "-t", HY_ARG_INT, &threads, NULL, "worker threads"},
        {"--json", NULL, HY_ARG_FLAG, &json, NULL, "print JSON (the only output format)"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    const char *usage = "hyinfer logits -m DIR (-p TEXT | --prompt-ids 1,2,3) [--all-positions] [--mtp] "
                        "[--dtype float32] [--kv-cache-dtype fp8] --json";
    int np;
    if (hy_args_parse(argc, argv, 2, args, na, NULL, 0, &np)) {
        fprintf(stderr, "hyinfer logits: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(usage, args, na);
        return 0;
    }
    if (!model_dir || (!prompt == !prompt_ids)) {
        fprintf(stderr, "hyinfer logits: need -m DIR and exactly one of -p / --prompt-ids\n");
        hy_args_usage(usage, args, na);
        return 2;
    }
    if (hy_cli_set_threads(&threads)) {
        fprintf(stderr, "hyinfer logits: %s\n", hy_err_msg());
        return 2;
    }
    enum hy_compute_dtype cd;
    enum hy_dtype kv_dtype;
    struct hy_model *m = NULL;
    struct hy_tokenizer *tok = NULL;
    int32_t *ids = NULL, n = 0;
    float *logits = NULL, *mtp_logits = NULL;
    int rc = 2; /* a bad flag value or input file (the model's included); 1 once the forward pass runs */
    if ((hy_kv_dtype_parse(kvd, &kv_dtype) && hy_err_prefix("--kv-cache-dtype")) ||
        hy_cli_check_quantization(quantization, model_dir) || hy_cli_parse_dtype(dtype, model_dir, &cd) ||
        hy_cli_load(model_dir, cd, &par, argc, argv, &m))
        goto fail;
    if (mtp && !m->has_mtp) {
        hy_err_set("%s: --mtp: the model has no MTP layer", model_dir);
        goto fail;
    }
    if (prompt_ids) {
        if (hy_args_parse_ids(prompt_ids, &ids, &n))
            goto fail;
    } else {
        size_t nn;
        if (hy_tokenizer_load_dir(model_dir, &tok) || (chat && hy_cli_load_chat(model_dir, chat_template, &chat_tpl)) ||
            hy_cli_encode_prompt(tok, chat ? &chat_tpl : NULL, prompt, NULL, NULL, &ids, &nn, NULL))
            goto fail;
        n = (int32_t)nn;
        if (n == 0) {
            hy_err_set("the prompt encodes to no tokens");
            goto fail;
        }
    }
    for (int32_t i = 0; i < n; i++)
        if (ids[i] >= m->cfg.vocab_size) {
            hy_err_set("prompt token id %d is outside the model's vocabulary [0, %d)", ids[i], m->cfg.vocab_size);
            goto fail;
        }
    if (n > m->cfg.max_position_embeddings) {
        hy_err_set("Input length %d exceeds the model's maximum context length %d", n, m->cfg.max_position_embeddings);
        goto fail;
    }
    rc = 1;
    if (compute(m, ids, n, all, mtp, kv_dtype, &logits, &mtp_logits))
        goto fail;
    printf("{\"prompt_ids\": [");
    for (int32_t i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", ids[i]);
    printf("]");
    print_rows("logits", logits, all ? n : 1, m->cfg.vocab_size);
    if (mtp)
        print_rows("mtp_logits", mtp_logits, n - 1, m->cfg.vocab_size);
    printf("}\n");
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "hyinfer logits: %s\n", hy_err_msg());
out:
    free(ids);
    free(logits);
    free(mtp_logits);
    hy_chat_free(&chat_tpl);
    hy_tokenizer_free(tok);
    hy_cli_free_model(m);
    return rc;
}
