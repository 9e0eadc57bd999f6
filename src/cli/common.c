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

int hy_cli_check_reasoning_effort(const char *effort, int chat)
{
    if (!effort)
        return 0;
    if (strcmp(effort, "no_think") && strcmp(effort, "low") && strcmp(effort, "high"))
        return hy_err_set("--reasoning-effort '%s': choose no_think, low or high", effort);
    if (!chat)
        return hy_err_set("--reasoning-effort %s needs --chat (it selects the chat template's mode)", effort);
    return 0;
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
        return -1; /* the message names --speculative-config */
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

/* ---- vLLM's flags: one table for serve, run and generate (docs/cli.md prints it) ---- */

/* clang-format off */
static const struct hy_arg_compat vllm_flags[] = {
    {"--model", "-m", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "MODEL_DIR, a local Hugging Face directory (also the first argument)"},
    {"--runner", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto,generate", "hyinfer runs generative models only"},
    {"--convert", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto,none", "generative models only, nothing to convert"},
    {"--task", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto,generate", "generation is the only task (deprecated in vLLM)"},
    {"--tokenizer", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "the tokenizer is read from MODEL_DIR (tokenizer.json); copy it there"},
    {"--tokenizer-mode", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto,hf,slow", "one tokenizer implementation reads tokenizer.json"},
    {"--trust-remote-code", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "nothing remote is ever run: the model's Python code is not used"},
    {"--dtype", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "compute mode float32, bfloat16 or auto"},
    {"--seed", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "requests without their own seed draw from a generator seeded with N: the same start and request order reproduce"},
    {"--hf-config-path", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "config.json is read from MODEL_DIR"},
    {"--allowed-local-media-path", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--allowed-media-domains", NULL, HY_COMPAT_MANY, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--revision", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "MODEL_DIR is a local directory; nothing is downloaded"},
    {"--code-revision", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "no model code is downloaded or run"},
    {"--tokenizer-revision", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "MODEL_DIR is a local directory; nothing is downloaded"},
    {"--rope-scaling", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "RoPE settings come from config.json; edit it there"},
    {"--rope-theta", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "RoPE settings come from config.json; edit it there"},
    {"--max-model-len", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "prompt + output tokens per request"},
    {"--quantization", "-q", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "confirms the checkpoint's method (ascend, fp8, compressed-tensors)"},
    {"--enforce-eager", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there are no CUDA graphs on a CPU: every step runs eagerly"},
    {"--max-logprobs", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "the limit is 20 (OpenAI's top_logprobs maximum)"},
    {"--logprobs-mode", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "raw_logprobs", "logprobs are computed from the raw logits"},
    {"--disable-sliding-window", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "Hy3 and Hy4 have no sliding-window layers"},
    {"--disable-cascade-attn", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there is no cascade attention kernel"},
    {"--skip-tokenizer-init", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "the server needs the tokenizer (text in, text out)"},
    {"--enable-prompt-embeds", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "prompt embeddings as input are not implemented"},
    {"--served-model-name", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "the model name in the API (one name)"},
    {"--config-format", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto,hf", "config.json is read in Hugging Face format"},
    {"--hf-token", NULL, HY_COMPAT_OPT, HY_COMPAT_NOOP, NULL, "nothing is downloaded from the Hub"},
    {"--hf-overrides", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "config.json is read as written; edit it in MODEL_DIR"},
    {"--pooler-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "pooling (embedding) models are not supported"},
    {"--override-pooler-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "pooling (embedding) models are not supported"},
    {"--logits-processor-pattern", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "custom logits processors are Python classes"},
    {"--generation-config", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto", "sampling defaults come from MODEL_DIR's generation_config.json"},
    {"--override-generation-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "set sampling per request, or edit generation_config.json"},
    {"--enable-sleep-mode", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "sleep mode frees GPU memory; there is none"},
    {"--model-impl", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto", "one implementation: hyinfer's own"},
    {"--override-attention-dtype", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "attention runs in the compute dtype (--dtype)"},
    {"--logits-processors", NULL, HY_COMPAT_MANY, HY_COMPAT_REFUSED, NULL, "custom logits processors are Python classes"},
    {"--io-processor-plugin", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "IO processor plugins are Python"},
    {"--load-format", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto,safetensors", "weights are always read from safetensors files"},
    {"--download-dir", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "nothing is downloaded"},
    {"--safetensors-load-strategy", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "safetensors files are always read from the local disk"},
    {"--model-loader-extra-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "the loader has no extra options"},
    {"--ignore-patterns", NULL, HY_COMPAT_MANY, HY_COMPAT_NOOP, NULL, "nothing is downloaded"},
    {"--use-tqdm-on-load", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "load progress is printed when stderr is a terminal"},
    {"--pt-load-map-location", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "cpu", "weights are always loaded into host memory"},
    {"--reasoning-parser", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "hy_v3 or hy_v4 (hunyuan): <think> text becomes reasoning_content"},
    {"--guided-decoding-backend", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "structured outputs (guided decoding) are not implemented"},
    {"--guided-decoding-disable-fallback", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "structured outputs (guided decoding) are not implemented"},
    {"--guided-decoding-disable-any-whitespace", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "structured outputs (guided decoding) are not implemented"},
    {"--guided-decoding-disable-additional-properties", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "structured outputs (guided decoding) are not implemented"},
    {"--structured-outputs-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "structured outputs (guided decoding) are not implemented"},
    {"--distributed-executor-backend", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "mp,uni", "ranks are MPI processes"},
    {"--pipeline-parallel-size", "-pp", HY_COMPAT_ONE, HY_COMPAT_NOOP, "1", "there is no pipeline parallelism: use -tp and -dp"},
    {"--tensor-parallel-size", "-tp", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "ranks splitting attention heads, dense MLP and vocabulary"},
    {"--decode-context-parallel-size", "-dcp", HY_COMPAT_ONE, HY_COMPAT_NOOP, "1", "there is no decode context parallelism"},
    {"--data-parallel-size", "-dp", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "attention data-parallel groups"},
    {"--data-parallel-rank", "-dpn", HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "one API server per job: external data-parallel load balancing is not supported"},
    {"--data-parallel-start-rank", "-dpr", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "this node's first rank (multi-node; docs/distributed.md)"},
    {"--data-parallel-size-local", "-dpl", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "data-parallel ranks on this node"},
    {"--data-parallel-address", "-dpa", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "the head node's address (multi-node)"},
    {"--data-parallel-rpc-port", "-dpp", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "the head node's port for joining nodes (multi-node)"},
    {"--data-parallel-backend", "-dpb", HY_COMPAT_ONE, HY_COMPAT_NOOP, "mp", "ranks are MPI processes"},
    {"--data-parallel-hybrid-lb", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "one API server per job: hybrid load balancing is not supported"},
    {"--enable-expert-parallel", NULL, HY_COMPAT_SWITCH, HY_COMPAT_IMPL, NULL, "routed experts spread over all ranks"},
    {"--all2all-backend", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "the MoE exchange: auto, allgather_reducescatter or alltoall"},
    {"--enable-dbo", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "dual-batch overlap is a GPU stream feature"},
    {"--dbo-decode-token-threshold", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "dual-batch overlap is a GPU stream feature"},
    {"--dbo-prefill-token-threshold", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "dual-batch overlap is a GPU stream feature"},
    {"--disable-nccl-for-dp-synchronization", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there is no NCCL: ranks synchronise through MPI"},
    {"--enable-eplb", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "expert load balancing (redundant experts) is not implemented"},
    {"--eplb-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "expert load balancing (redundant experts) is not implemented"},
    {"--expert-placement-strategy", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "linear", "experts are placed in contiguous blocks per rank"},
    {"--num-redundant-experts", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "expert load balancing (redundant experts) is not implemented"},
    {"--eplb-window-size", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "expert load balancing (redundant experts) is not implemented"},
    {"--eplb-step-interval", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "expert load balancing (redundant experts) is not implemented"},
    {"--eplb-log-balancedness", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "expert load balancing (redundant experts) is not implemented"},
    {"--max-parallel-loading-workers", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "each rank reads its own shard"},
    {"--ray-workers-use-nsight", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there is no Ray and no Nsight"},
    {"--disable-custom-all-reduce", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "all-reduce is MPI's (or the fixed-order one)"},
    {"--worker-cls", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "worker classes are Python"},
    {"--worker-extension-cls", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "worker classes are Python"},
    {"--enable-multimodal-encoder-data-parallel", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--block-size", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "tokens per KV block"},
    {"--gpu-memory-utilization", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "fraction of the machine's memory (or cgroup limit) for weights plus KV cache"},
    {"--kv-cache-memory-bytes", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "KV cache budget in bytes (wins over --gpu-memory-utilization)"},
    {"--swap-space", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "there is no GPU: the KV cache already lives in host memory"},
    {"--kv-cache-dtype", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "auto, bf16, fp8 (fp8_e4m3) or fp32"},
    {"--num-gpu-blocks-override", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "size the KV cache with --kv-cache-memory-bytes"},
    {"--enable-prefix-caching", NULL, HY_COMPAT_SWITCH, HY_COMPAT_IMPL, NULL, "reuse cached prompt blocks (default on; --no-enable-prefix-caching turns it off)"},
    {"--prefix-caching-hash-algo", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "cached blocks are matched by their token ids"},
    {"--cpu-offload-gb", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "weights already live in host memory"},
    {"--calculate-kv-scales", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "fp8 KV scales follow hyinfer's own rule (docs/kv-cache-fp8.md)"},
    {"--kv-sharing-fast-prefill", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "Hy3 and Hy4 share no KV cache between layers"},
    {"--mamba-cache-dtype", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "Hy3 and Hy4 have no Mamba layers"},
    {"--mamba-ssm-cache-dtype", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "Hy3 and Hy4 have no Mamba layers"},
    {"--mamba-block-size", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "Hy3 and Hy4 have no Mamba layers"},
    {"--limit-mm-per-prompt", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--enable-mm-embeds", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--media-io-kwargs", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--mm-processor-kwargs", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--mm-processor-cache-gb", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--disable-mm-preprocessor-cache", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--mm-processor-cache-type", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--mm-shm-cache-max-object-size-mb", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--mm-encoder-tp-mode", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--mm-encoder-attn-backend", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--interleave-mm-strings", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--skip-mm-profiling", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--video-pruning-rate", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "multimodal input is not supported (text-only models)"},
    {"--enable-lora", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--max-loras", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--max-lora-rank", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--lora-extra-vocab-size", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--lora-dtype", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--max-cpu-loras", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--fully-sharded-loras", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--default-mm-loras", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--lora-modules", NULL, HY_COMPAT_MANY, HY_COMPAT_REFUSED, NULL, "LoRA adapters are not supported"},
    {"--show-hidden-metrics-for-version", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "no metrics are hidden"},
    {"--otlp-traces-endpoint", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "OpenTelemetry tracing is not implemented"},
    {"--collect-detailed-traces", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "OpenTelemetry tracing is not implemented"},
    {"--max-num-batched-tokens", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "tokens per engine step; longer prompts are chunked"},
    {"--max-num-seqs", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "running requests at once"},
    {"--max-num-partial-prefills", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "the scheduler chunks one prompt at a time within --max-num-batched-tokens"},
    {"--max-long-partial-prefills", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "the scheduler chunks one prompt at a time within --max-num-batched-tokens"},
    {"--long-prefill-token-threshold", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "the scheduler chunks one prompt at a time within --max-num-batched-tokens"},
    {"--num-lookahead-slots", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "speculative slots are sized from --speculative-config"},
    {"--scheduling-policy", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "fcfs", "requests are scheduled first come, first served"},
    {"--enable-chunked-prefill", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "prompts longer than --max-num-batched-tokens are always chunked"},
    {"--disable-chunked-mm-input", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "multimodal input is not supported, so there is nothing to chunk"},
    {"--scheduler-cls", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "scheduler classes are Python"},
    {"--disable-hybrid-kv-cache-manager", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there is one KV cache manager"},
    {"--async-scheduling", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "the engine thread already runs apart from the HTTP loop"},
    {"--max-seq-len-to-capture", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "there are no CUDA graphs on a CPU"},
    {"--num-scheduler-steps", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "every engine step is scheduled on its own"},
    {"--multi-step-stream-outputs", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "every token is streamed as it is made"},
    {"--preemption-mode", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "the scheduler's own rule (no swap space to preempt into)"},
    {"--quantization-param-path", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "fp8 KV scales are not read from a file"},
    {"--cudagraph-capture-sizes", NULL, HY_COMPAT_MANY, HY_COMPAT_NOOP, NULL, "there are no CUDA graphs on a CPU"},
    {"--cuda-graph-sizes", NULL, HY_COMPAT_MANY, HY_COMPAT_NOOP, NULL, "there are no CUDA graphs on a CPU"},
    {"--max-cudagraph-capture-size", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "there are no CUDA graphs on a CPU"},
    {"--speculative-config", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "MTP speculative decoding: {\"method\":\"mtp\",\"num_speculative_tokens\":k}"},
    {"--kv-transfer-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "disaggregated prefill / decode (KV transfer) is not implemented"},
    {"--kv-events-config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "KV cache events are not published"},
    {"--compilation-config", "-O", HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "parsed; every key maps to what a CPU does (see below)"},
    {"--additional-config", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "parsed; the Ascend keys map to what a CPU does (see below)"},
    {"--disable-log-stats", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "no periodic stats lines are logged; /metrics has them"},
    {"--aggregate-engine-logging", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "no periodic stats lines are logged; /metrics has them"},
    {"--enable-log-requests", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "requests are not logged one by one"},
    {"--disable-log-requests", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "requests are not logged one by one"},
    {"--host", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "address to bind"},
    {"--port", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "port to bind"},
    {"--uds", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "the server listens on TCP only"},
    {"--uvicorn-log-level", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "there is no uvicorn: the server logs warnings and errors only"},
    {"--disable-uvicorn-access-log", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there is no access log"},
    {"--allow-credentials", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "no CORS headers are sent; put a proxy in front for browsers"},
    {"--allowed-origins", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "no CORS headers are sent; put a proxy in front for browsers"},
    {"--allowed-methods", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "no CORS headers are sent; put a proxy in front for browsers"},
    {"--allowed-headers", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "no CORS headers are sent; put a proxy in front for browsers"},
    {"--api-key", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "require Authorization: Bearer KEY on /v1 routes (one key)"},
    {"--chat-template", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "chat template file or text"},
    {"--chat-template-content-format", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "auto,string", "message content reaches the template as a string"},
    {"--trust-request-chat-template", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "a chat template sent with a request is not used"},
    {"--response-role", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, "assistant", "the reply role is always assistant"},
    {"--ssl-keyfile", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "TLS is not implemented: put a TLS proxy in front"},
    {"--ssl-certfile", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "TLS is not implemented: put a TLS proxy in front"},
    {"--ssl-ca-certs", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "TLS is not implemented: put a TLS proxy in front"},
    {"--enable-ssl-refresh", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "TLS is not implemented: put a TLS proxy in front"},
    {"--ssl-cert-reqs", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "TLS is not implemented: put a TLS proxy in front"},
    {"--root-path", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "routes are served at / (a proxy may add a prefix)"},
    {"--middleware", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "ASGI middleware is Python"},
    {"--return-tokens-as-token-ids", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "logprob tokens are returned as text"},
    {"--disable-frontend-multiprocessing", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "the HTTP loop and the engine are threads of one process"},
    {"--enable-request-id-headers", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "no X-Request-Id header is added"},
    {"--enable-auto-tool-choice", NULL, HY_COMPAT_SWITCH, HY_COMPAT_IMPL, NULL, "accepted: tool calls are always parsed (tool_choice auto is the default with tools)"},
    {"--exclude-tools-when-tool-choice-none", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "tools are rendered into the prompt as the request gives them"},
    {"--tool-call-parser", NULL, HY_COMPAT_ONE, HY_COMPAT_IMPL, NULL, "hy_v3 (hunyuan) or hy_v4"},
    {"--tool-parser-plugin", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "tool parser plugins are Python"},
    {"--tool-server", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "built-in tool servers (MCP) are not implemented"},
    {"--log-config-file", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "logs are plain stderr lines"},
    {"--max-log-len", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "prompts are not logged"},
    {"--disable-fastapi-docs", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there are no /docs pages"},
    {"--enable-prompt-tokens-details", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "usage has no prompt_tokens_details"},
    {"--enable-server-load-tracking", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "server load is on /metrics"},
    {"--enable-force-include-usage", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "usage is sent as each request asks (stream_options.include_usage)"},
    {"--enable-tokenizer-info-endpoint", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "there is no /get_tokenizer_info endpoint"},
    {"--enable-log-outputs", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "outputs are not logged"},
    {"--h11-max-incomplete-event-size", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "request size is bounded by --max-body-bytes"},
    {"--h11-max-header-count", NULL, HY_COMPAT_ONE, HY_COMPAT_NOOP, NULL, "header size is bounded by the server's fixed header limit"},
    {"--log-error-stack", NULL, HY_COMPAT_SWITCH, HY_COMPAT_NOOP, NULL, "there are no Python stacks"},
    {"--tokens-only", NULL, HY_COMPAT_SWITCH, HY_COMPAT_REFUSED, NULL, "the tokens-only endpoint is not implemented"},
    {"--headless", NULL, HY_COMPAT_SWITCH, HY_COMPAT_IMPL, NULL, "this node runs ranks only, no HTTP (multi-node)"},
    {"--api-server-count", "-asc", HY_COMPAT_ONE, HY_COMPAT_NOOP, "1", "one HTTP server per job"},
    {"--config", NULL, HY_COMPAT_ONE, HY_COMPAT_REFUSED, NULL, "write the flags on the command line (hyinfer run --yaml reads the cann-recipes schema)"},
};
/* clang-format on */

const struct hy_arg_compat *hy_cli_vllm_flags(int *n)
{
    *n = (int)(sizeof(vllm_flags) / sizeof(vllm_flags[0]));
    return vllm_flags;
}

struct json_key {
    const char *key; /* "enable_mlapo", or "ascend_compilation_config.enable_npugraph_ex" for a nested one */
    const char *cpu; /* what it maps to on a CPU */
};

/* clang-format off */
static const struct json_key compilation_keys[] = {
    {"level", "no graph compilation on a CPU: the decode step is one fixed C path at every level"},
    {"mode", "no graph compilation on a CPU: the decode step is one fixed C path in every mode"},
    {"cudagraph_mode", "decode already runs without per-step allocation or launch overhead (no CUDA graphs)"},
    {"use_cudagraph", "decode already runs without per-step allocation or launch overhead (no CUDA graphs)"},
    {"full_cuda_graph", "decode already runs without per-step allocation or launch overhead (no CUDA graphs)"},
    {"cudagraph_capture_sizes", "no graphs are captured: every batch size runs the same kernels"},
    {"max_cudagraph_capture_size", "no graphs are captured: every batch size runs the same kernels"},
    {"cudagraph_num_of_warmups", "no graphs are captured, so there is nothing to warm up"},
    {"cudagraph_copy_inputs", "no graphs are captured, so inputs are not copied"},
    {"compile_sizes", "nothing is compiled per size: kernels are chosen at start from the CPU's ISA"},
    {"backend", "there is no torch.compile backend: kernels are C (hyinfer info prints the ISA level)"},
    {"use_inductor", "there is no Inductor: kernels are C"},
    {"inductor_compile_config", "there is no Inductor: kernels are C"},
    {"inductor_passes", "there is no Inductor: kernels are C"},
    {"pass_config", "fusions are written into the C kernels (e.g. norm + quantize) and always on"},
    {"custom_ops", "every op is hyinfer's own C kernel"},
    {"splitting_ops", "there is no graph to split"},
    {"use_inductor_graph_partition", "there is no graph to partition"},
    {"cache_dir", "nothing is compiled, so nothing is cached"},
    {"local_cache_dir", "nothing is compiled, so nothing is cached"},
    {"debug_dump_path", "nothing is compiled, so nothing is dumped"},
    {"compile_mm_encoder", "there is no multimodal encoder"},
    {"cudagraph_specialize_lora", "there are no graphs and no LoRA"},
    {"dynamic_shapes_config", "shapes are always dynamic: no compilation"},
};
static const struct json_key additional_keys[] = {
    {"enable_mlapo", "Ascend's fused MLA preprocessing: the CPU attention path already fuses the norm, projections and RoPE per token"},
    {"enable_fused_mc2", "Ascend's fused MoE dispatch / combine: the CPU MoE exchange is --all2all-backend"},
    {"ascend_compilation_config", "Ascend graph options (see its keys)"},
    {"ascend_compilation_config.enable_npugraph_ex", "Ascend NPU graph capture: decode already runs without per-step allocation"},
    {"torchair_graph_config", "Ascend TorchAir graphs: decode already runs without per-step allocation"},
    {"ascend_scheduler_config", "Ascend's scheduler: hyinfer's scheduler chunks prompts within --max-num-batched-tokens"},
    {"enable_shared_expert_dp", "the shared expert follows the dense layout (--tensor-parallel-size)"},
    {"multistream_overlap_shared_expert", "one CPU stream: the shared expert overlaps the MoE exchange where docs/distributed.md says"},
    {"lmhead_tensor_parallel_size", "the LM head is split like the vocabulary (-tp; run --yaml: lmhead_tp_size)"},
    {"oproj_tensor_parallel_size", "o_proj follows the attention layout (run --yaml: o_proj_tp_size)"},
    {"enable_prefetch", "weights are read in place from memory; no NPU prefetch"},
    {"enable_weight_nz_layout", "the NZ weight layout is an Ascend format; weights keep the checkpoint's layout"},
    {"refresh", "nothing to refresh"},
};
/* clang-format on */

static const struct json_key *find_json_key(const struct json_key *t, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].key, k))
            return &t[i];
    return NULL;
}

/* Walks object o (key prefix pre: "" or "a."), printing one notice per known key and adding the
 * unknown ones to unk. */
static void walk_json_keys(const char *flag, const json_t *o, const char *pre, const struct json_key *t, size_t n,
                           char *unk, size_t cap)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        char full[160];
        snprintf(full, sizeof(full), "%s%s", pre, k);
        const struct json_key *jk = find_json_key(t, n, full);
        if (!jk) {
            size_t l = strlen(unk);
            snprintf(unk + l, cap - l, "%s%s", l ? ", " : "", full);
            continue;
        }
        if (json_is_object(v) && !*pre) {
            char sub[160];
            snprintf(sub, sizeof(sub), "%s.", full);
            walk_json_keys(flag, v, sub, t, n, unk, cap);
            continue;
        }
        if (!hy_args_notices_muted())
            fprintf(stderr, "notice: %s %s is accepted and has no effect on a CPU: %s\n", flag, full, jk->cpu);
    }
}

int hy_cli_check_json_config(const char *flag, const char *json)
{
    if (!json)
        return 0;
    const int compilation = !strcmp(flag, "--compilation-config");
    const struct json_key *t = compilation ? compilation_keys : additional_keys;
    const size_t n = compilation ? sizeof(compilation_keys) / sizeof(compilation_keys[0])
                                 : sizeof(additional_keys) / sizeof(additional_keys[0]);
    json_error_t je;
    json_t *root = json_loads(json, JSON_DECODE_ANY, &je);
    if (!root)
        return hy_err_set("%s '%s' is not valid JSON: %s (column %d)", flag, json, je.text, je.column);
    if (compilation && json_is_integer(root)) { /* -O3: the level */
        if (!hy_args_notices_muted())
            fprintf(stderr, "notice: %s %s is accepted and has no effect on a CPU: %s\n", flag, json, t[0].cpu);
        json_decref(root);
        return 0;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return hy_err_set("%s '%s' must be a JSON object%s", flag, json, compilation ? " (or a level, e.g. 3)" : "");
    }
    char unk[1024] = "";
    walk_json_keys(flag, root, "", t, n, unk, sizeof(unk));
    if (*unk && !hy_args_notices_muted())
        fprintf(stderr, "warning: %s: unknown keys, ignored: %s\n", flag, unk);
    json_decref(root);
    return 0;
}

static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++)
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s, f);
}

void hy_cli_print_vllm_table(FILE *f)
{
    int n, count[3] = {0};
    const struct hy_arg_compat *t = hy_cli_vllm_flags(&n);
    for (int i = 0; i < n; i++)
        count[t[i].kind]++;
    fprintf(f, "%d flags: %d implemented, %d accepted as no-ops (a notice at start-up), %d refused (exit 2).\n\n", n,
            count[HY_COMPAT_IMPL], count[HY_COMPAT_NOOP], count[HY_COMPAT_REFUSED]);
    fprintf(f, "| vLLM flag | hyinfer | meaning on a CPU, or why not |\n| --- | --- | --- |\n");
    static const char *const kind[] = {"implemented", "no-op", "refused"};
    for (int i = 0; i < n; i++) {
        fprintf(f, "| `%s`%s%s%s | %s", t[i].name, t[i].alias ? " `" : "", t[i].alias ? t[i].alias : "",
                t[i].alias ? "`" : "", kind[t[i].kind]);
        if (t[i].ok_values)
            fprintf(f, " (only `%s`)", t[i].ok_values);
        fputs(" | ", f);
        md_cell(f, t[i].reason);
        fputs(" |\n", f);
    }
    const struct json_key *tabs[] = {compilation_keys, additional_keys};
    const size_t ns[] = {sizeof(compilation_keys) / sizeof(compilation_keys[0]),
                         sizeof(additional_keys) / sizeof(additional_keys[0])};
    const char *names[] = {"--compilation-config", "--additional-config"};
    for (int j = 0; j < 2; j++) {
        fprintf(f, "\n| `%s` key | on a CPU |\n| --- | --- |\n", names[j]);
        for (size_t i = 0; i < ns[j]; i++) {
            fprintf(f, "| `%s` | ", tabs[j][i].key);
            md_cell(f, tabs[j][i].cpu);
            fputs(" |\n", f);
        }
    }
}
