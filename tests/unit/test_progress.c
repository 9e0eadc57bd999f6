/* test_progress.c - the terminal progress line: inactive off a terminal, the drawn line's format,
 * throttling, the final line, phases drawn at once, clearing for an ordinary line, and concurrent adds. */
#include "base/progress.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* The stream's whole content so far (malloc'd). */
static char *contents(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *s = calloc((size_t)n + 1, 1);
    rewind(f);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    fseek(f, 0, SEEK_END);
    return s;
}

static void test_inactive_off_terminal(void **state)
{
    (void)state;
    /* stderr of the test runner is a log file, not a terminal: nothing is drawn or kept */
    if (isatty(fileno(stderr)))
        skip();
    struct hy_progress p;
    hy_progress_begin(&p, "load", 100, HY_PROGRESS_BYTES);
    assert_int_equal(p.active, 0);
    hy_progress_add(&p, 50);
    hy_progress_end(&p);
    assert_int_equal(p.drawn, 0);
}

static void test_bytes_line_and_final(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    struct hy_progress p;
    hy_progress_begin_to(&p, f, "load", 4000000000LL, HY_PROGRESS_BYTES);
    hy_progress_add(&p, 1000000000LL); /* within 0.25 s of the start: not drawn yet */
    char *s = contents(f);
    assert_string_equal(s, "");
    free(s);
    usleep(300000);
    hy_progress_add(&p, 1000000000LL);
    s = contents(f);
    assert_non_null(strstr(s, "\rload: 2.00 / 4.00 GB (50%), "));
    assert_non_null(strstr(s, " GB/s\033[K"));
    assert_null(strchr(s, '\n'));
    free(s);
    hy_progress_add(&p, 500000000LL); /* too soon after the last draw */
    s = contents(f);
    assert_null(strstr(s, "2.50"));
    free(s);
    hy_progress_end(&p);
    s = contents(f);
    assert_non_null(strstr(s, "\rload: 2.50 GB in "));
    assert_int_equal(s[strlen(s) - 1], '\n');
    free(s);
    fclose(f);
}

static void test_items_and_no_final_when_never_drawn(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    struct hy_progress p;
    hy_progress_begin_to(&p, f, "quantize", 8, HY_PROGRESS_ITEMS);
    hy_progress_set(&p, 1);
    hy_progress_end(&p); /* finished before the first redraw: nothing was printed, nothing to end */
    char *s = contents(f);
    assert_string_equal(s, "");
    free(s);
    hy_progress_begin_to(&p, f, "quantize", 8, HY_PROGRESS_ITEMS);
    hy_progress_label(&p, "model.layers.2.mlp.experts.gate_up_proj, a name longer than the label's 63 bytes");
    assert_int_equal(strlen(p.label), 63);
    usleep(300000);
    hy_progress_set(&p, 3);
    s = contents(f);
    assert_non_null(strstr(s, "\rquantize: 3/8 (38%), "));
    assert_non_null(strstr(s, "/s - model.layers.2.mlp.experts.gate_up_proj"));
    free(s);
    hy_progress_end(&p);
    fclose(f);
}

static void test_phases_and_clear(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    struct hy_progress p;
    hy_progress_begin_to(&p, f, "bench", 4, HY_PROGRESS_ITEMS);
    hy_progress_phase(&p, 0, "prefill 512 tokens"); /* drawn at once, however soon */
    char *s = contents(f);
    assert_non_null(strstr(s, "\rbench: 0/4 (0%), "));
    assert_non_null(strstr(s, " - prefill 512 tokens\033[K"));
    free(s);
    hy_progress_clear(&p); /* an ordinary line may follow */
    fputs("result line\n", f);
    s = contents(f);
    assert_non_null(strstr(s, "\r\033[Kresult line\n"));
    free(s);
    hy_progress_phase(&p, 1, "decode batch 16");
    hy_progress_end(&p); /* drawn: ends with a final line */
    s = contents(f);
    assert_non_null(strstr(s, " - decode batch 16\033[K"));
    assert_non_null(strstr(s, "\rbench: 1 in "));
    free(s);
    fclose(f);
}

static void test_concurrent_adds(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    struct hy_progress p;
    hy_progress_begin_to(&p, f, "copy", 0, HY_PROGRESS_BYTES);
#pragma omp parallel for
    for (int i = 0; i < 100000; i++)
        hy_progress_add(&p, 3);
    assert_int_equal(p.done, 300000);
    hy_progress_end(&p);
    fclose(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inactive_off_terminal),
        cmocka_unit_test(test_bytes_line_and_final),
        cmocka_unit_test(test_items_and_no_final_when_never_drawn),
        cmocka_unit_test(test_phases_and_clear),
        cmocka_unit_test(test_concurrent_adds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
