/* request.c - request storage and its chained block hashes. */
#include "sched/request.h"

#include "base/err.h"
#include "cache/block_pool.h"
#include "sample/sampler.h"

#include <stdlib.h>
#include <string.h>

struct hy_request *hy_request_create(uint64_t id, const int32_t *ids, int32_t n_prompt, int32_t cap, int32_t block_size)
{
    struct hy_request *r = calloc(1, sizeof(*r));
    if (!r)
        goto oom;
    r->id = id;
    r->cap = cap;
    r->blocks_cap = (cap + block_size - 1) / block_size;
    r->tokens = malloc((size_t)cap * sizeof(int32_t));
    r->blocks = malloc((size_t)r->blocks_cap * sizeof(int32_t));
    r->hashes = malloc((size_t)r->blocks_cap * sizeof(uint64_t));
    if (!r->tokens || !r->blocks || !r->hashes)
        goto oom;
    memcpy(r->tokens, ids, (size_t)n_prompt * sizeof(int32_t));
    r->n_prompt = r->n_tokens = n_prompt;
    r->plan_idx = -1;
    r->canon_prev = -1;
    r->logprobs = -1;
    return r;
oom:
    hy_request_free(r);
    hy_err_set("request: out of memory (%d tokens)", cap);
    return NULL;
}

void hy_request_free(struct hy_request *r)
{
    if (!r)
        return;
    free(r->tokens);
    free(r->blocks);
    free(r->hashes);
    free(r->stop_ids);
    free(r->rules);
    hy_sampler_free(r->sampler);
    free(r);
}

int hy_request_append(struct hy_request *r, int32_t token)
{
    if (r->n_tokens >= r->cap)
        return -1;
    r->tokens[r->n_tokens++] = token;
    return 0;
}

void hy_request_hash_blocks(struct hy_request *r, int32_t n_full, int32_t block_size)
{
    for (int32_t k = r->n_hashes; k < n_full; k++) {
        uint64_t parent = k ? r->hashes[k - 1] : 0;
        r->hashes[k] = hy_block_hash(parent, r->tokens + (size_t)k * block_size, block_size);
    }
    if (n_full > r->n_hashes)
        r->n_hashes = n_full;
}
