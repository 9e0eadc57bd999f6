/* exchange.c - collectives of the multi-rank forward pass (exchange.h). */
#include "model/exchange.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

#define MAX_RANKS HY_SHARD_MAX_RANKS

static int counts_ok(int n)
{
    return n <= MAX_RANKS ? 0 : hy_err_set("dist: more than %d ranks in one group", MAX_RANKS);
}

int hy_exchange_gather_cols(struct hy_model_dist *d, struct hy_comm *c, const float *local, int64_t T, int64_t total,
                            float *out)
{
    const int n = hy_comm_size(c);
    size_t counts[MAX_RANKS];
    if (counts_ok(n))
        return -1;
    int64_t lo, w;
    for (int r = 0; r < n; r++) {
        hy_shard_part(total, n, r, &lo, &w);
        counts[r] = (size_t)(T * w) * sizeof(float);
    }
    float *stage = hy_shard_buf(d, HY_SLOT_STAGE, (size_t)(T * total));
    if (!stage || hy_comm_allgatherv(c, local, stage, counts))
        return -1;
    const float *src = stage;
    for (int r = 0; r < n; r++) {
        hy_shard_part(total, n, r, &lo, &w);
        for (int64_t t = 0; t < T; t++)
            memcpy(out + t * total + lo, src + t * w, (size_t)w * sizeof(float));
        src += T * w;
    }
    return 0;
}

int hy_exchange_sum_rows(struct hy_model_dist *d, struct hy_comm *c, const float *partial, int64_t T, int64_t N,
                         float *out)
{
    const int n = hy_comm_size(c), me = hy_comm_rank(c);
    size_t sc[MAX_RANKS], rc[MAX_RANKS], gc[MAX_RANKS];
    if (counts_ok(n))
        return -1;
    int64_t lo, w, my_lo, my_w;
    hy_shard_part(T, n, me, &my_lo, &my_w);
    for (int r = 0; r < n; r++) {
        hy_shard_part(T, n, r, &lo, &w);
        sc[r] = (size_t)(w * N) * sizeof(float);
        rc[r] = (size_t)(my_w * N) * sizeof(float);
        gc[r] = sc[r];
    }
    float *recv = hy_shard_buf(d, HY_SLOT_RECV, (size_t)(n * my_w * N)),
          *mine = hy_shard_buf(d, HY_SLOT_MINE, (size_t)(my_w * N));
    if (!recv || !mine || hy_comm_alltoallv(c, partial, sc, recv, rc))
        return -1;
    memcpy(mine, recv, (size_t)(my_w * N) * sizeof(float));
    for (int r = 1; r < n; r++) {
        const float *p = recv + (int64_t)r * my_w * N;
        for (int64_t i = 0; i < my_w * N; i++)
            mine[i] += p[i];
    }
    return hy_comm_allgatherv(c, mine, out, gc);
}

int hy_exchange_gather_vocab_rows(struct hy_model_dist *d, struct hy_comm *c, const int32_t *ids, int64_t T, int64_t V,
                                  int64_t H, const float *mine, float *out)
{
    const int n = hy_comm_size(c);
    size_t counts[MAX_RANKS];
    int64_t lo[MAX_RANKS + 1], w;
    if (counts_ok(n))
        return -1;
    for (int r = 0; r < n; r++)
        hy_shard_part(V, n, r, &lo[r], &w);
    lo[n] = V;
    memset(counts, 0, sizeof(size_t) * (size_t)n);
    int32_t *owner = (int32_t *)hy_shard_buf(d, HY_SLOT_ROWS, (size_t)T);
    float *stage = hy_shard_buf(d, HY_SLOT_STAGE, (size_t)(T * H));
    if (!owner || !stage)
        return -1;
    for (int64_t t = 0; t < T; t++) {
        int r = 0;
        while (ids[t] >= lo[r + 1])
            r++;
        owner[t] = r;
        counts[r] += (size_t)H * sizeof(float);
    }
    if (hy_comm_allgatherv(c, mine, stage, counts))
        return -1;
    int64_t off[MAX_RANKS];
    int64_t acc = 0;
    for (int r = 0; r < n; r++) {
        off[r] = acc;
        acc += (int64_t)(counts[r] / sizeof(float));
    }
    for (int64_t t = 0; t < T; t++) {
        memcpy(out + t * H, stage + off[owner[t]], (size_t)H * sizeof(float));
        off[owner[t]] += H;
    }
    return 0;
}

void hy_exchange_token_groups(const struct hy_model_dist *d, int64_t T, const int32_t *seq_ids,
                              const int32_t *const *block_tables, int32_t *grp)
{
    for (int64_t t = 0; t < T; t++)
        grp[t] = d->dp_size > 1 ? block_tables[seq_ids[t]][0] % d->dp_size : 0;
}

int hy_exchange_dp_rows(struct hy_model_dist *d, const int32_t *grp, int64_t T, int64_t N, const float *rows,
                        float *out)
{
    const int n = d->dp_size;
    size_t counts[MAX_RANKS];
    int64_t off[MAX_RANKS];
    if (counts_ok(n))
        return -1;
    memset(counts, 0, sizeof(size_t) * (size_t)n);
    for (int64_t t = 0; t < T; t++)
        counts[grp[t]] += (size_t)N * sizeof(float);
    float *stage = hy_shard_buf(d, HY_SLOT_RECV, (size_t)(T * N));
    if (!stage || hy_comm_allgatherv(d->dp, rows, stage, counts))
        return -1;
    int64_t acc = 0;
    for (int g = 0; g < n; g++) {
        off[g] = acc;
        acc += (int64_t)(counts[g] / sizeof(float));
    }
    for (int64_t t = 0; t < T; t++) {
        memcpy(out + t * N, stage + off[grp[t]], (size_t)N * sizeof(float));
        off[grp[t]] += N;
    }
    return 0;
}
