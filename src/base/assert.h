/* assert.h - invariants that must never fail, checked in release builds too (as ggml's GGML_ASSERT).
 *
 * HY_ASSERT(cond) is for the program's own invariants (a step plan's header size, a slot index in
 * range, a rank role), never for outside input: bad files, flags and requests get an error return
 * (base/err.h). A failed assertion prints "hyinfer: assertion failed: <cond> (<file>:<line>)" to
 * stderr and aborts the process (a core dump where enabled). NDEBUG does not turn it off.
 */
#ifndef HY_BASE_ASSERT_H
#define HY_BASE_ASSERT_H

#define HY_ASSERT(cond) ((cond) ? (void)0 : hy_assert_fail(#cond, __FILE__, __LINE__))

/* Reports the failed expression at file:line and calls abort(). Never returns. */
_Noreturn void hy_assert_fail(const char *expr, const char *file, int line);

#endif
