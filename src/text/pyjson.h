/* pyjson.h - Python-compatible text forms of JSON values, for byte-exact chat-template output.
 *
 * A jansson value here stands for what Python's json.loads makes of the same JSON text:
 * null → None, true/false → bool, integer → int, real → float, string → str, array → list,
 * object → dict (insertion order kept, as jansson ≥ 2.8 and Python dicts both do).
 *
 *   hy_pyjson_dumps  = json.dumps(v, ensure_ascii=False)  (", " / ": " separators, float repr)
 *   hy_pyjson_str    = str(v)  (what jinja2 prints for {{ v }}: repr of containers, 'True', 'None')
 *
 * Output goes to a growable byte buffer (struct hy_pyjson_buf).
 */
#ifndef HY_TEXT_PYJSON_H
#define HY_TEXT_PYJSON_H

#include <stddef.h>
#include <jansson.h>

/* Growable byte buffer; data is NUL-terminated whenever len > 0 or after hy_pyjson_buf_take.
 * `failed` is set once an allocation fails; later appends are then no-ops. */
struct hy_pyjson_buf {
    char *data;
    size_t len; /* bytes used, excluding the trailing NUL */
    size_t cap; /* bytes allocated */
    int failed;
};

/* Zeroes the buffer (no allocation). */
void hy_pyjson_buf_init(struct hy_pyjson_buf *b);

/* Appends n bytes of s. Returns 0, or -1 (and sets b->failed) when out of memory. */
int hy_pyjson_buf_append(struct hy_pyjson_buf *b, const char *s, size_t n);

/* Appends the NUL-terminated string s. Returns 0 or -1 as above. */
int hy_pyjson_buf_puts(struct hy_pyjson_buf *b, const char *s);

/* Hands the malloc'd NUL-terminated contents to the caller (never NULL unless out of memory or
 * b->failed) and resets b to empty. Caller frees the result. */
char *hy_pyjson_buf_take(struct hy_pyjson_buf *b);

/* Frees the contents and resets b to empty. */
void hy_pyjson_buf_free(struct hy_pyjson_buf *b);

/* Python's repr(float) of x into out (at least 32 bytes): shortest round-trip digits, fixed
 * notation when the decimal exponent is in [-4, 16), else "d.ddde+XX"; always has a '.' or 'e'
 * ("1.0", "1e+16", "1e-05", "-0.0"); "nan", "inf", "-inf". Returns the length written. */
int hy_pyjson_float_repr(double x, char *out);

/* Appends json.dumps(v, ensure_ascii=False) of v (NULL is written as null). Strings escape
 * '"', '\\', \n \r \t \b \f and other bytes < 0x20 as \u00XX; everything else is kept as UTF-8.
 * Returns 0, or -1 when out of memory. */
int hy_pyjson_dumps(struct hy_pyjson_buf *b, const json_t *v);

/* Appends Python's str(v): a str as-is, None/True/False, int, float repr, and list/dict as their
 * repr ("{'k': [1, 'a', None]}", strings quoted and escaped like Python, non-printable code
 * points as \xNN / \uNNNN / \UNNNNNNNN). NULL is written as "None". Returns 0 or -1 (no memory). */
int hy_pyjson_str(struct hy_pyjson_buf *b, const json_t *v);

/* Appends repr(s) of the UTF-8 string s[0..n) (quotes and escapes as Python chooses them).
 * Returns 0 or -1 (no memory). */
int hy_pyjson_repr_string(struct hy_pyjson_buf *b, const char *s, size_t n);

/* Appends json.dumps(s, ensure_ascii=False) of the UTF-8 string s[0..n). Returns 0 or -1. */
int hy_pyjson_dumps_string(struct hy_pyjson_buf *b, const char *s, size_t n);

/* Python's type name of the value: "NoneType" (also for NULL), "bool", "int", "float", "str",
 * "list", "dict". */
const char *hy_pyjson_type_name(const json_t *v);

/* Python truthiness: None/False/0/0.0/""/[]/{} (and NULL) are false, everything else true. */
int hy_pyjson_truthy(const json_t *v);

#endif
