/* sampler.c - next-token selection: penalties, temperature, top-k, top-p, min-p, seeded draw.
 *
 * The RNG is xoshiro256** seeded through splitmix64 from the request's 64-bit seed, so a seed
 * fully determines the draws. Candidate handling avoids full sorts over the vocabulary: top-k is
 * a partial selection (quickselect); top-p buckets the weights by float exponent (one pass),
 * finds the bucket where the cumulative mass crosses top_p and sorts only that bucket; min-p is
 * a threshold filter.
 */
#include "sample/sampler.h"

#include "base/err.h"
#include "base/fileio.h"
#include "config/run_config.h"

#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* vLLM's _SAMPLING_EPS: temperatures below this are treated as greedy. */
#define HY_TEMPERATURE_EPS 1e-5f

struct cand {
    float v; /* logit, then unnormalized probability */
    int32_t id;
};

struct hy_sampler {
    struct hy_sampling_params p;
    int32_t vocab;
    uint64_t seed;
    uint64_t rng[4];   /* xoshiro256** state */
    uint8_t *seen;     /* [vocab/8] bitmap: in prompt or output (repetition penalty only) */
    int32_t *seen_ids; /* [vocab] distinct ids with their bit set, in first-seen order */
    size_t n_seen;
    uint32_t *out_count; /* [vocab] output occurrences (presence/frequency only) */
    int32_t *out_ids;    /* [vocab] distinct output ids */
    size_t n_out;
    struct cand *scratch; /* [vocab], allocated at the first non-greedy draw */
};

/* ------------------------------------------------------------------------------------------ */
/* RNG                                                                                          */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t st[4])
{
    uint64_t out = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return out;
}

/* Uniform double in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t st[4])
{
    return (double)(rng_next(st) >> 11) * 0x1.0p-53;
}

static _Atomic int g_default_set;
static _Atomic uint64_t g_default_seed, g_default_next;

void hy_sampler_set_default_seed(uint64_t seed)
{
    g_default_seed = seed;
    g_default_next = 0;
    g_default_set = 1;
}

static uint64_t fresh_seed(void)
{
    if (g_default_set) { /* --seed N: the i-th unseeded sampler gets the i-th draw of a generator seeded N */
        uint64_t x = g_default_seed + 0x9E3779B97F4A7C15ULL * (g_default_next++ + 1);
        return splitmix64(&x);
    }
    uint64_t s = 0;
    if (getrandom(&s, sizeof(s), GRND_NONBLOCK) == (ssize_t)sizeof(s))
        return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    static _Thread_local uint64_t counter;
    return ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^ (++counter << 40) ^ (uint64_t)(uintptr_t)&s;
}

/* ------------------------------------------------------------------------------------------ */
/* Parameters                                                                                   */

void hy_sampling_params_init(struct hy_sampling_params *p)
{
    memset(p, 0, sizeof(*p));
    p->temperature = 0.0f;
    p->top_p = 1.0f;
    p->top_k = 0;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->max_new_tokens = 128;
}

int hy_sampling_params_validate(const struct hy_sampling_params *p)
{
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
        return hy_err_set("sampling: temperature=%g: must be a finite number >= 0 (0 = greedy)",
                          (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return hy_err_set("sampling: top_p=%g: must be in (0, 1] (1 = off)", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return hy_err_set("sampling: min_p=%g: must be in [0, 1] (0 = off)", (double)p->min_p);
    if (!(p->repetition_penalty > 0.0f) || !isfinite(p->repetition_penalty))
        return hy_err_set("sampling: repetition_penalty=%g: must be a finite number > 0 (1 = off)",
                          (double)p->repetition_penalty);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return hy_err_set("sampling: presence_penalty=%g: must be in [-2, 2] (0 = off)", (double)p->presence_penalty);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return hy_err_set("sampling: frequency_penalty=%g: must be in [-2, 2] (0 = off)", (double)p->frequency_penalty);
    if (p->max_new_tokens < 0)
        return hy_err_set("sampling: max_new_tokens=%d: must be >= 0", (int)p->max_new_tokens);
    return 0;
}

/* Reads an optional number; 1 = set, 0 = absent/null, -1 = wrong type (error set). */
static int gen_number(const char *path, json_t *root, const char *key, double *out)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return hy_err_set("%s: \"%s\": expected a number", path, key);
    *out = json_number_value(v);
    return 1;
}

int hy_sampling_params_from_generation_config(const char *model_dir, struct hy_sampling_params *p)
{
    char *path = hy_path_join(model_dir, "generation_config.json");
    if (!path)
        return hy_err_set("%s: out of memory", model_dir);
    if (!hy_file_exists(path)) {
        free(path);
        return 0;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    int rc = -1;
    if (!root) {
        hy_err_set("%s:%d: invalid JSON: %s", path, jerr.line, jerr.text);
        goto out;
    }
    if (!json_is_object(root)) {
        hy_err_set("%s: expected a JSON object", path);
        goto out;
    }
    struct hy_sampling_params q = *p;
    double d;
    int r;
    if ((r = gen_number(path, root, "temperature", &d)) < 0)
        goto out;
    if (r)
        q.temperature = (float)d;
    if ((r = gen_number(path, root, "top_p", &d)) < 0)
        goto out;
    if (r)
        q.top_p = (float)d;
    if ((r = gen_number(path, root, "min_p", &d)) < 0)
        goto out;
    if (r)
        q.min_p = (float)d;
    if ((r = gen_number(path, root, "repetition_penalty", &d)) < 0)
        goto out;
    if (r)
        q.repetition_penalty = (float)d;
    json_t *tk = json_object_get(root, "top_k");
    if (tk && !json_is_null(tk)) {
        if (!json_is_integer(tk)) {
            hy_err_set("%s: \"top_k\": expected an integer", path);
            goto out;
        }
        json_int_t k = json_integer_value(tk);
        q.top_k = k <= 0 ? 0 : (k > INT32_MAX ? INT32_MAX : (int32_t)k);
    }
    json_t *ds = json_object_get(root, "do_sample");
    if (ds && !json_is_null(ds)) {
        if (!json_is_boolean(ds)) {
            hy_err_set("%s: \"do_sample\": expected true or false", path);
            goto out;
        }
        if (json_is_false(ds))
            q.temperature = 0.0f;
    }
    if (hy_sampling_params_validate(&q) != 0) {
        hy_err_prefix("%s", path);
        goto out;
    }
    *p = q;
    rc = 0;
out:
    json_decref(root);
    free(path);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Sampler state                                                                                */

struct hy_sampler *hy_sampler_create(const struct hy_sampling_params *p, int32_t vocab_size)
{
    if (hy_sampling_params_validate(p) != 0)
        return NULL;
    if (vocab_size <= 0) {
        hy_err_set("sampler: vocab_size=%d: must be > 0", (int)vocab_size);
        return NULL;
    }
    struct hy_sampler *s = calloc(1, sizeof(*s));
    if (!s) {
        hy_err_set("sampler: out of memory");
        return NULL;
    }
    s->p = *p;
    s->vocab = vocab_size;
    size_t v = (size_t)vocab_size;
    if (p->repetition_penalty != 1.0f) {
        s->seen = calloc((v + 7) / 8, 1);
        s->seen_ids = malloc(v * sizeof(int32_t));
        if (!s->seen || !s->seen_ids)
            goto oom;
    }
    if (p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
        s->out_count = calloc(v, sizeof(uint32_t));
        s->out_ids = malloc(v * sizeof(int32_t));
        if (!s->out_count || !s->out_ids)
            goto oom;
    }
    s->seed = p->has_seed ? p->seed : fresh_seed();
    uint64_t x = s->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    return s;
oom:
    hy_sampler_free(s);
    hy_err_set("sampler: out of memory (vocab %d)", (int)vocab_size);
    return NULL;
}

void hy_sampler_free(struct hy_sampler *s)
{
    if (!s)
        return;
    free(s->seen);
    free(s->seen_ids);
    free(s->out_count);
    free(s->out_ids);
    free(s->scratch);
    free(s);
}

uint64_t hy_sampler_seed(const struct hy_sampler *s)
{
    return s->seed;
}

static void note_token(struct hy_sampler *s, int32_t id, int is_output)
{
    if (id < 0 || id >= s->vocab)
        return;
    if (s->seen && !(s->seen[id >> 3] & (1u << (id & 7)))) {
        s->seen[id >> 3] |= (uint8_t)(1u << (id & 7));
        s->seen_ids[s->n_seen++] = id;
    }
    if (is_output && s->out_count && s->out_count[id]++ == 0)
        s->out_ids[s->n_out++] = id;
}

void hy_sampler_accept_prompt(struct hy_sampler *s, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        note_token(s, ids[i], 0);
}

void hy_sampler_apply_penalties(const struct hy_sampler *s, float *logits)
{
    if (s->seen) {
        float rp = s->p.repetition_penalty;
        for (size_t i = 0; i < s->n_seen; i++) {
            float l = logits[s->seen_ids[i]];
            logits[s->seen_ids[i]] = l > 0.0f ? l / rp : l * rp;
        }
    }
    if (s->out_count) {
        for (size_t i = 0; i < s->n_out; i++) {
            int32_t id = s->out_ids[i];
            logits[id] -= s->p.presence_penalty + s->p.frequency_penalty * (float)s->out_count[id];
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Selection                                                                                    */

int32_t hy_argmax_f32(const float *logits, int32_t n)
{
    int32_t best = -1;
    float bv = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        float v = logits[i];
        if (v != v)
            continue;
        if (best < 0 || v > bv) {
            best = i;
            bv = v;
        }
    }
    return best < 0 ? 0 : best;
}

/* a ranks before b: larger value, then lower id. A strict total order (ids are distinct). */
static int cand_before(const struct cand *a, const struct cand *b)
{
    return a->v > b->v || (a->v == b->v && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    return cand_before(a, b) ? -1 : (cand_before(b, a) ? 1 : 0);
}

static void cand_swap(struct cand *a, struct cand *b)
{
    struct cand t = *a;
    *a = *b;
    *b = t;
}

/* Partial selection: afterwards c[0..k) hold the k best of c[0..n) (in no particular order).
 * Quickselect with a median-of-three pivot; O(n) on average. Requires 0 < k < n. */
static void select_top(struct cand *c, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        /* order c[lo], c[mid], c[hi-1]; the median ends at mid, then moves to hi-1 as pivot */
        if (cand_before(&c[mid], &c[lo]))
            cand_swap(&c[mid], &c[lo]);
        if (cand_before(&c[hi - 1], &c[lo]))
            cand_swap(&c[hi - 1], &c[lo]);
        if (cand_before(&c[hi - 1], &c[mid]))
            cand_swap(&c[hi - 1], &c[mid]);
        cand_swap(&c[mid], &c[hi - 1]);
        struct cand piv = c[hi - 1];
        size_t store = lo;
        for (size_t j = lo; j < hi - 1; j++)
            if (cand_before(&c[j], &piv))
                cand_swap(&c[store++], &c[j]);
        cand_swap(&c[store], &c[hi - 1]);
        /* now c[lo..store) beat the pivot at c[store], c[store+1..hi) do not */
        if (k <= store)
            hi = store;
        else if (k == store + 1)
            return;
        else
            lo = store + 1;
        if (lo >= k || hi <= k)
            return;
    }
}

/* Bucket of a weight in (0, 1]: the float's exponent and 3 mantissa bits (for positive floats
 * the bit pattern is monotone in the value), so each bucket spans a factor of 2^(1/8). */
#define HY_NBUCKET 1024
static unsigned weight_bucket(float w)
{
    uint32_t bits;
    memcpy(&bits, &w, sizeof(bits));
    unsigned b = bits >> 20;
    return b < HY_NBUCKET ? b : HY_NBUCKET - 1;
}

/* Top-p: reorders c[0..n) (weights) so that c[0..keep) is the nucleus, the smallest set of the
 * highest weights (ties: lower id first) whose sum reaches `target`, and returns keep (>= 1).
 * Small n is sorted outright. Otherwise one pass sums the mass per bucket, which finds the
 * bucket where the cumulative mass crosses target; only that bucket's members get sorted. */
static size_t nucleus(struct cand *c, size_t n, double target)
{
    if (n <= 256) {
        qsort(c, n, sizeof(*c), cand_cmp);
        double cum = 0.0;
        for (size_t j = 0; j < n; j++) {
            cum += c[j].v;
            if (cum >= target)
                return j + 1;
        }
        return n;
    }
    double mass[HY_NBUCKET] = {0};
    for (size_t j = 0; j < n; j++)
        mass[weight_bucket(c[j].v)] += c[j].v;
    double before = 0.0;
    int star = -1;
    for (int b = HY_NBUCKET - 1; b >= 0; b--) {
        if (before + mass[b] >= target) {
            star = b;
            break;
        }
        before += mass[b];
    }
    if (star < 0)
        return n; /* rounding: the whole mass is just short of target */
    /* c[0..a): buckets above star (all in); c[a..m): bucket star; the rest out */
    size_t a = 0;
    for (size_t j = 0; j < n; j++)
        if ((int)weight_bucket(c[j].v) > star)
            cand_swap(&c[a++], &c[j]);
    size_t m = a;
    for (size_t j = a; j < n; j++)
        if ((int)weight_bucket(c[j].v) == star)
            cand_swap(&c[m++], &c[j]);
    qsort(c + a, m - a, sizeof(*c), cand_cmp);
    double cum = before;
    for (size_t j = a; j < m; j++) {
        cum += c[j].v;
        if (cum >= target)
            return j + 1;
    }
    return m;
}

static int32_t draw(struct hy_sampler *s, float *logits)
{
    const int32_t V = s->vocab;
    const struct hy_sampling_params *p = &s->p;

    int32_t best = 0;
    float lmax = -INFINITY;
    for (int32_t i = 0; i < V; i++) {
        if (logits[i] != logits[i])
            logits[i] = -INFINITY;
        if (logits[i] > lmax) {
            lmax = logits[i];
            best = i;
        }
    }
    if (!isfinite(lmax))
        return best; /* +inf wins outright; all -inf / NaN: nothing to draw from */
    if (!s->scratch) {
        s->scratch = malloc((size_t)V * sizeof(struct cand));
        if (!s->scratch)
            return best; /* out of memory: degrade to greedy rather than fail the request */
    }
    struct cand *c = s->scratch;
    for (int32_t i = 0; i < V; i++) {
        c[i].v = logits[i];
        c[i].id = i;
    }

    size_t n = (size_t)V;
    int limited = p->top_k > 0 && (size_t)p->top_k < n;
    if (limited) {
        select_top(c, n, (size_t)p->top_k);
        n = (size_t)p->top_k;
    }
    /* Unnormalized probabilities; the maximum maps to exactly 1. */
    const float inv_t = 1.0f / p->temperature;
    double z = 0.0;
    for (size_t j = 0; j < n; j++) {
        c[j].v = expf((c[j].v - lmax) * inv_t);
        z += c[j].v;
    }

    size_t keep = n;
    if (p->top_p < 1.0f)
        keep = nucleus(c, n, (double)p->top_p * z);
    if (p->min_p > 0.0f) {
        const float thr = p->min_p; /* min_p * (max probability == 1) */
        size_t j = 0;
        for (size_t i = 0; i < keep; i++)
            if (c[i].v >= thr)
                c[j++] = c[i];
        keep = j;
        if (keep == 0)
            return best; /* cannot happen (the maximum has weight 1 >= min_p); be safe */
    }

    double total = 0.0;
    for (size_t j = 0; j < keep; j++)
        total += c[j].v;
    const double target = rng_uniform(s->rng) * total;
    double acc = 0.0;
    for (size_t j = 0; j < keep; j++) {
        acc += c[j].v;
        if (acc > target)
            return c[j].id;
    }
    for (size_t j = keep; j-- > 0;) /* rounding left target at the very end */
        if (c[j].v > 0.0f)
            return c[j].id;
    return best;
}

int32_t hy_sampler_sample(struct hy_sampler *s, float *logits)
{
    hy_sampler_apply_penalties(s, logits);
    int32_t id;
    if (s->p.temperature < HY_TEMPERATURE_EPS || s->p.top_k == 1)
        id = hy_argmax_f32(logits, s->vocab);
    else
        id = draw(s, logits);
    note_token(s, id, 1);
    return id;
}

int hy_sampling_params_from_run_config(const struct hy_run_config *cfg, struct hy_sampling_params *p)
{
    if (cfg->temperature >= 0.0f)
        p->temperature = cfg->temperature;
    if (cfg->top_p >= 0.0f)
        p->top_p = cfg->top_p;
    if (cfg->top_k >= 0)
        p->top_k = cfg->top_k;
    if (cfg->min_p >= 0.0f)
        p->min_p = cfg->min_p;
    if (cfg->repetition_penalty > 0.0f)
        p->repetition_penalty = cfg->repetition_penalty;
    if (cfg->seed >= 0) {
        p->seed = (uint64_t)cfg->seed;
        p->has_seed = 1;
    }
    p->max_new_tokens = cfg->max_new_tokens;
    if (hy_sampling_params_validate(p) != 0)
        return hy_err_prefix("%s", cfg->config_path ? cfg->config_path : "run config");
    return 0;
}
