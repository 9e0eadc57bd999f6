/* scratch.c - per-thread kernel scratch (scratch.h): grown on demand, released at thread exit. */
#include "kernels/scratch.h"

#include <pthread.h>
#include <stdlib.h>

/* The scratch buffers one thread has used, in chunks; freed by the key's destructor when the thread
 * exits (an engine or HTTP thread that ran kernels), so no buffer outlives its thread. */
struct enrolled {
    struct hy_scratch *s[16];
    int n;
    struct enrolled *next;
};

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void release(void *v)
{
    for (struct enrolled *e = v, *next; e; e = next) {
        for (int i = 0; i < e->n; i++) {
            free(e->s[i]->p);
            e->s[i]->p = NULL;
            e->s[i]->cap = 0;
            e->s[i]->enrolled = 0;
        }
        next = e->next;
        free(e);
    }
}

static void make_key(void)
{
    key_ok = pthread_key_create(&key, release) == 0;
}

/* Records s for the calling thread's exit; 0, or -1 on out of memory (s then stays unallocated). */
static int enroll(struct hy_scratch *s)
{
    pthread_once(&key_once, make_key);
    if (!key_ok)
        return -1;
    struct enrolled *e = pthread_getspecific(key);
    if (!e || e->n == (int)(sizeof(e->s) / sizeof(e->s[0]))) {
        struct enrolled *fresh = calloc(1, sizeof(*fresh));
        if (!fresh || pthread_setspecific(key, fresh) != 0) {
            free(fresh);
            return -1;
        }
        fresh->next = e;
        e = fresh;
    }
    e->s[e->n++] = s;
    s->enrolled = 1;
    return 0;
}

void *hy_scratch_get(struct hy_scratch *s, size_t n)
{
    if (n <= s->cap)
        return s->p;
    if (!s->enrolled && enroll(s))
        return NULL;
    free(s->p);
    n = (n + 4095) & ~(size_t)4095;
    s->p = aligned_alloc(64, n);
    s->cap = s->p ? n : 0;
    return s->p;
}
