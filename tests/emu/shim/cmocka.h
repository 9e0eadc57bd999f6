/* cmocka.h (shim) - the subset of cmocka's API the kernel unit tests use, for static builds that run
 * inside the Bochs emulator (tests/emu/run_avx512_tests.sh; Debian ships no static libcmocka). Same
 * semantics where used: a failed assertion prints file:line and ends the current test, the group
 * runner prints a summary and returns the number of failed tests. Not a general cmocka. */
#ifndef HY_TESTS_CMOCKA_SHIM_H
#define HY_TESTS_CMOCKA_SHIM_H

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*CMUnitTestFunction)(void **state);
typedef int (*CMFixtureFunction)(void **state);
struct CMUnitTest {
    const char *name;
    CMUnitTestFunction test_func;
};

static jmp_buf cm_shim_jmp;
static int cm_shim_skipped;

#define cmocka_unit_test(f)                                                                                            \
    {                                                                                                                  \
#f, f                                                                                                          \
    }
#define print_error(...) fprintf(stderr, __VA_ARGS__)
#define print_message(...) fprintf(stderr, __VA_ARGS__)
#define fail() cm_shim_fail(__FILE__, __LINE__, "fail()")
#define skip() (cm_shim_skipped = 1, longjmp(cm_shim_jmp, 2))
#define assert_true(c) ((c) ? (void)0 : cm_shim_fail(__FILE__, __LINE__, #c))
#define assert_false(c) assert_true(!(c))
#define assert_non_null(p) assert_true((p) != NULL)
#define assert_null(p) assert_true((p) == NULL)
#define assert_int_equal(a, b)                                                                                         \
    do {                                                                                                               \
        const intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                                                         \
        if (a_ != b_) {                                                                                                \
            fprintf(stderr, "%jd != %jd\n", a_, b_);                                                                   \
            cm_shim_fail(__FILE__, __LINE__, #a " == " #b);                                                            \
        }                                                                                                              \
    } while (0)
#define assert_int_not_equal(a, b) assert_true((intmax_t)(a) != (intmax_t)(b))
#define assert_string_equal(a, b) assert_true(strcmp((a), (b)) == 0)
#define assert_memory_equal(a, b, n) assert_true(memcmp((a), (b), (n)) == 0)

static inline void cm_shim_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, what);
    longjmp(cm_shim_jmp, 1);
}

static inline int cm_shim_run(const struct CMUnitTest *t, size_t n, CMFixtureFunction setup, CMFixtureFunction teardown)
{
    void *state = NULL;
    if (setup && setup(&state) != 0) {
        fprintf(stderr, "[  ERROR   ] group setup failed\n");
        return 1;
    }
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "[ RUN      ] %s\n", t[i].name);
        cm_shim_skipped = 0;
        const int r = setjmp(cm_shim_jmp);
        if (r == 0) {
            t[i].test_func(&state);
            fprintf(stderr, "[       OK ] %s\n", t[i].name);
        } else if (r == 2) {
            fprintf(stderr, "[  SKIPPED ] %s\n", t[i].name);
        } else {
            fprintf(stderr, "[  FAILED  ] %s\n", t[i].name);
            failed++;
        }
    }
    if (teardown)
        teardown(&state);
    fprintf(stderr, "[==========] %zu test(s) run, %d failed.\n", n, failed);
    return failed;
}

#define cmocka_run_group_tests(tests, setup, teardown)                                                                 \
    cm_shim_run((tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))

#endif
