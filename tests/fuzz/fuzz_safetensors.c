/* fuzz_safetensors.c - libFuzzer target for hy_st_parse (issue #2 item 11).
 *
 * Feeds the input bytes as a whole safetensors file. A rejected input must leave an error message
 * and nothing allocated; an accepted one must describe only bytes inside the input: every tensor's
 * bytes are read (ASan catches anything outside the exact-size input copy), sizes agree with shape x
 * dtype, float data is aligned, and no two non-empty tensors share a byte. Built by `make fuzz`
 * (clang -fsanitize=fuzzer,address,undefined); seeds in tests/fuzz/corpus/safetensors/. */
#include "base/err.h"
#include "model/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what, const struct hy_st_tensor *t)
{
    if (!ok) {
        fprintf(stderr, "fuzz_safetensors: accepted tensor \"%s\" violates: %s\n", t ? t->name : "?", what);
        abort();
    }
}

static int cmp_ptr(const void *a, const void *b)
{
    const struct hy_st_tensor *const *x = a, *const *y = b;
    const char *p = (*x)->data, *q = (*y)->data;
    return p < q ? -1 : p > q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hy_st_file f;
    hy_err_clear();
    if (hy_st_parse(data, size, "fuzz.safetensors", &f)) {
        check(hy_err_msg()[0] != '\0', "rejected without a message", NULL);
        check(f.tensors == NULL && f.n_tensors == 0, "rejected but tensors left allocated", NULL);
        return 0;
    }
    const uint8_t *end = data + size;
    volatile uint64_t sum = 0;
    const struct hy_st_tensor **order = malloc((f.n_tensors ? f.n_tensors : 1) * sizeof(*order));
    if (!order)
        abort();
    for (size_t i = 0; i < f.n_tensors; i++) {
        const struct hy_st_tensor *t = &f.tensors[i];
        const uint8_t *p = t->data;
        check(t->name != NULL, "no name", t);
        check(t->ndim >= 0 && t->ndim <= HY_ST_MAX_DIMS, "ndim", t);
        check(p >= data + 8 && p <= end && t->nbytes <= (size_t)(end - p), "data outside the input", t);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            check(t->shape[d] >= 0, "negative dimension", t);
            numel *= (uint64_t)t->shape[d];
        }
        size_t esz = hy_dtype_size(t->dtype);
        if (esz) {
            check(numel * esz == t->nbytes, "nbytes != numel * dtype size", t);
            if (hy_dtype_is_kernel_float(t->dtype))
                check((uintptr_t)p % esz == 0, "misaligned float data", t);
        }
        for (size_t k = 0; k < t->nbytes; k++) /* ASan: every byte must be inside the input */
            sum += p[k];
        order[i] = t;
    }
    qsort(order, f.n_tensors, sizeof(*order), cmp_ptr);
    const uint8_t *reach = NULL;
    for (size_t i = 0; i < f.n_tensors; i++) {
        const uint8_t *p = order[i]->data;
        if (!order[i]->nbytes)
            continue;
        check(!reach || p >= reach, "overlapping tensors", order[i]);
        if (!reach || p + order[i]->nbytes > reach)
            reach = p + order[i]->nbytes;
    }
    free(order);
    hy_st_file_free(&f);
    (void)sum;
    return 0;
}
