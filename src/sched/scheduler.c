/* scheduler.c - one-rule step planning, admission with prefix lookup, preemption by recompute. */
#include "sched/scheduler.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

static int32_t cdiv(int32_t a, int32_t b)
{
    return (a + b - 1) / b;
}

int hy_scheduler_init(struct hy_scheduler *s, const struct hy_sched_config *cfg, struct hy_block_pool *pool,
                      int32_t max_blocks_per_req)
{
    memset(s, 0, sizeof(*s));
    if (cfg->max_num_seqs < 1 || cfg->max_num_batched_tokens < 1 || cfg->max_waiting < 0 || max_blocks_per_req < 1)
        return hy_err_set("scheduler: bad config max_num_seqs=%d max_num_batched_tokens=%d", cfg->max_num_seqs,
                          cfg->max_num_batched_tokens);
    s->cfg = *cfg;
    s->pool = pool;
    s->running = calloc((size_t)cfg->max_num_seqs, sizeof(*s->running));
    s->waiting = calloc((size_t)cfg->max_waiting + (size_t)cfg->max_num_seqs, sizeof(*s->waiting));
    s->plan.entries = calloc((size_t)cfg->max_num_seqs, sizeof(*s->plan.entries));
    s->hit_ids = malloc((size_t)max_blocks_per_req * sizeof(int32_t));
    s->hit_cap = max_blocks_per_req;
    s->dp_load = calloc(cfg->dp_groups > 1 ? (size_t)cfg->dp_groups : 1, sizeof(int32_t));
    if (!s->running || !s->waiting || !s->plan.entries || !s->hit_ids || !s->dp_load) {
        hy_scheduler_free(s);
        return hy_err_set("scheduler: out of memory");
    }
    return 0;
}

void hy_scheduler_free(struct hy_scheduler *s)
{
    free(s->running);
    free(s->waiting);
    free(s->plan.entries);
    free(s->hit_ids);
    free(s->dp_load);
    memset(s, 0, sizeof(*s));
}

int hy_scheduler_add(struct hy_scheduler *s, struct hy_request *r)
{
    if (s->n_waiting >= s->cfg.max_waiting)
        return -1;
    r->status = HY_REQ_WAITING;
    r->plan_idx = -1;
    s->waiting[s->n_waiting++] = r;
    return 0;
}

/* Frees a request's blocks, last block first so that its tail is evicted before its prefix. */
static void release_blocks(struct hy_scheduler *s, struct hy_request *r)
{
    for (int32_t i = r->n_blocks - 1; i >= 0; i--)
        hy_block_pool_release(s->pool, &r->blocks[i], 1);
    r->n_blocks = 0;
    r->n_cached_blocks = 0;
    r->canon_prev = -1;
}

static void remove_at(struct hy_request **a, int32_t *n, int32_t i)
{
    memmove(a + i, a + i + 1, (size_t)(*n - i - 1) * sizeof(*a));
    (*n)--;
}

/* Drops a request's entry from the plan (keeping the order) and returns its tokens. */
static int32_t unplan(struct hy_sched_plan *p, struct hy_request *r)
{
    int32_t i = r->plan_idx;
    if (i < 0)
        return 0;
    int32_t n = p->entries[i].n_tokens;
    memmove(p->entries + i, p->entries + i + 1, (size_t)(p->n - i - 1) * sizeof(*p->entries));
    p->n--;
    p->n_tokens -= n;
    for (int32_t j = i; j < p->n; j++)
        p->entries[j].req->plan_idx = j;
    r->plan_idx = -1;
    return n;
}

/* Preempts the newest running request; returns the tokens it gives back to the budget. */
static int32_t preempt_newest(struct hy_scheduler *s)
{
    struct hy_request *v = s->running[--s->n_running];
    int32_t back = unplan(&s->plan, v);
    release_blocks(s, v);
    v->n_computed = 0;
    v->n_drafts = 0;
    v->status = HY_REQ_WAITING;
    v->n_preemptions++;
    s->stats.num_preemptions++;
    memmove(s->waiting + 1, s->waiting, (size_t)s->n_waiting * sizeof(*s->waiting));
    s->waiting[0] = v;
    s->n_waiting++;
    return back;
}

static void plan_add(struct hy_scheduler *s, struct hy_request *r, int32_t n)
{
    struct hy_sched_entry *e = &s->plan.entries[s->plan.n];
    e->req = r;
    e->start = r->n_computed;
    e->n_tokens = n;
    e->wants_logits = r->n_computed + n == r->n_tokens + r->n_drafts;
    e->n_drafts = e->wants_logits ? r->n_drafts : 0;
    e->n_rejected = 0;
    r->plan_idx = s->plan.n++;
    s->plan.n_tokens += n;
    if (e->start < r->n_prompt)
        s->stats.prompt_chunks++;
}

/* Token slots r needs when computing up to position upto - 1: plus the lookahead for the next
 * drafts, within the most tokens r can have. */
static int32_t slots_needed(const struct hy_scheduler *s, const struct hy_request *r, int32_t upto)
{
    int32_t want = upto + s->cfg.num_lookahead_tokens;
    if (want > r->cap)
        want = r->cap;
    return want > upto ? want : upto;
}

/* Allocates the blocks r needs to hold n_computed + n tokens (and the lookahead). 0, or -1 when
 * too few are free. */
static int grow_blocks(struct hy_scheduler *s, struct hy_request *r, int32_t n)
{
    int32_t need = cdiv(slots_needed(s, r, r->n_computed + n), s->pool->block_size) - r->n_blocks;
    if (need <= 0)
        return 0;
    if (s->cfg.dp_groups > 1 && r->n_blocks == 0) { /* a new sequence: the least busy attention-DP group */
        int32_t *load = s->dp_load, g = 0;
        const int32_t G = s->cfg.dp_groups;
        memset(load, 0, (size_t)G * sizeof(int32_t));
        for (int32_t i = 0; i < s->n_running; i++)
            if (s->running[i] != r && s->running[i]->n_blocks > 0)
                load[s->running[i]->blocks[0] % G]++;
        for (int32_t i = 1; i < G; i++)
            if (load[i] < load[g])
                g = i;
        if (hy_block_pool_alloc_class(s->pool, need, r->blocks, G, g))
            return -1;
    } else if (hy_block_pool_alloc(s->pool, need, r->blocks + r->n_blocks)) {
        return -1;
    }
    r->n_blocks += need;
    return 0;
}

/* Schedules running request r for up to *budget tokens, preempting newer requests while blocks
 * run out. Returns 1 if r itself was preempted. */
static int schedule_running(struct hy_scheduler *s, struct hy_request *r, int32_t *budget, int *preempted)
{
    int32_t n = r->n_tokens + r->n_drafts - r->n_computed;
    if (n > *budget && r->n_drafts > 0) { /* drop the drafts that do not fit */
        int32_t drop = n - *budget < r->n_drafts ? n - *budget : r->n_drafts;
        r->n_drafts -= drop;
        n -= drop;
    }
    if (n > *budget)
        n = *budget;
    if (n <= 0)
        return 0;
    while (grow_blocks(s, r, n)) {
        int self = s->running[s->n_running - 1] == r;
        *budget += preempt_newest(s);
        *preempted = 1;
        if (self)
            return 1;
    }
    plan_add(s, r, n);
    *budget -= n;
    return 0;
}

/* Looks up the longest cached prefix of r's full blocks, leaving at least its last token to
 * compute. Fills s->hit_ids; returns the number of hit blocks. */
static int32_t lookup_prefix(struct hy_scheduler *s, struct hy_request *r)
{
    const int32_t bs = s->pool->block_size;
    int32_t max_blocks = (r->n_tokens - 1) / bs;
    if (max_blocks > s->hit_cap)
        max_blocks = s->hit_cap;
    hy_request_hash_blocks(r, max_blocks, bs);
    int32_t k = 0;
    for (; k < max_blocks; k++) {
        int32_t parent = k ? s->hit_ids[k - 1] : -1;
        int32_t id = hy_block_pool_lookup(s->pool, r->hashes[k], parent, r->tokens + (size_t)k * bs);
        if (id < 0)
            break;
        s->hit_ids[k] = id;
    }
    if (s->cfg.drop_last_hit_block && k > 0)
        k--; /* recompute it: its last MTP row saw the token after the block, which only a hit on the
                next block guarantees to be ours */
    return k;
}

/* Admits the front waiting request if its blocks fit. Returns 1 if admitted. */
static int admit_front(struct hy_scheduler *s, int32_t *budget)
{
    struct hy_request *r = s->waiting[0];
    const int32_t bs = s->pool->block_size;
    int32_t hits = s->cfg.enable_prefix_caching ? lookup_prefix(s, r) : 0;
    int32_t n = r->n_tokens - hits * bs;
    if (n > *budget)
        n = *budget;
    int32_t need = cdiv(slots_needed(s, r, hits * bs + n), bs) - hits;
    int32_t hits_free = 0; /* hit blocks now in the free queue: touching takes them out */
    for (int32_t k = 0; k < hits; k++)
        hits_free += s->pool->blocks[s->hit_ids[k]].ref_cnt == 0;
    if (need > s->pool->n_free - hits_free)
        return 0;
    for (int32_t k = 0; k < hits; k++) {
        hy_block_pool_touch(s->pool, s->hit_ids[k]);
        r->blocks[k] = s->hit_ids[k];
    }
    r->n_blocks = r->n_cached_blocks = hits;
    r->canon_prev = hits ? s->hit_ids[hits - 1] : -1;
    r->canon_gen = hits ? s->pool->blocks[r->canon_prev].gen : 0;
    r->n_computed = hits * bs;
    if (grow_blocks(s, r, n))
        return 0; /* cannot happen: checked above */
    remove_at(s->waiting, &s->n_waiting, 0);
    r->status = HY_REQ_RUNNING;
    s->running[s->n_running++] = r;
    if (s->cfg.enable_prefix_caching) {
        s->stats.prefix_queries += (uint64_t)r->n_tokens;
        s->stats.prefix_hits += (uint64_t)hits * (uint64_t)bs;
    }
    plan_add(s, r, n);
    *budget -= n;
    return 1;
}

const struct hy_sched_plan *hy_scheduler_schedule(struct hy_scheduler *s)
{
    struct hy_sched_plan *p = &s->plan;
    int32_t budget = s->cfg.max_num_batched_tokens;
    int preempted = 0;
    p->n = p->n_tokens = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < s->n_running; i++) {
            struct hy_request *r = s->running[i];
            int decode = r->n_tokens - r->n_computed == 1;
            if (decode != (pass == 0) || r->plan_idx >= 0)
                continue;
            if (schedule_running(s, r, &budget, &preempted))
                break; /* r was the newest; nothing after it */
        }
    while (!preempted && s->n_waiting > 0 && s->n_running < s->cfg.max_num_seqs && budget > 0)
        if (!admit_front(s, &budget))
            break;
    if (p->n > 0) {
        s->stats.num_steps++;
        if (p->n > s->stats.max_batch_seqs)
            s->stats.max_batch_seqs = p->n;
    }
    return p;
}

void hy_scheduler_reject(struct hy_scheduler *s, int32_t i, int32_t n_rejected)
{
    struct hy_sched_entry *e = &s->plan.entries[i];
    e->n_rejected = n_rejected < 0 ? 0 : n_rejected > e->n_drafts ? e->n_drafts : n_rejected;
}

void hy_scheduler_update(struct hy_scheduler *s, const struct hy_sched_plan *plan)
{
    const int32_t bs = s->pool->block_size;
    for (int32_t i = 0; i < plan->n; i++) {
        struct hy_request *r = plan->entries[i].req;
        r->n_computed += plan->entries[i].n_tokens - plan->entries[i].n_rejected;
        r->n_drafts = 0;
        r->plan_idx = -1;
        if (!s->cfg.enable_prefix_caching)
            continue;
        int32_t full = r->n_computed / bs;
        hy_request_hash_blocks(r, full, bs);
        for (int32_t k = r->n_cached_blocks; k < full && r->canon_prev != -2; k++) {
            int32_t c = hy_block_pool_cache(s->pool, r->blocks[k], r->hashes[k], r->canon_prev, r->canon_gen,
                                            r->tokens + (size_t)k * bs);
            r->canon_prev = c >= 0 ? c : -2;
            r->canon_gen = c >= 0 ? s->pool->blocks[c].gen : 0;
        }
        if (full > r->n_cached_blocks)
            r->n_cached_blocks = full;
    }
}

void hy_scheduler_finish(struct hy_scheduler *s, struct hy_request *r)
{
    for (int32_t i = 0; i < s->n_running; i++)
        if (s->running[i] == r)
            remove_at(s->running, &s->n_running, i);
    for (int32_t i = 0; i < s->n_waiting; i++)
        if (s->waiting[i] == r)
            remove_at(s->waiting, &s->n_waiting, i);
    if (r->plan_idx >= 0)
        unplan(&s->plan, r);
    release_blocks(s, r);
    r->status = HY_REQ_FINISHED;
}
