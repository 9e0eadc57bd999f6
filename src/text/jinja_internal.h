/* jinja_internal.h - the pieces of the Jinja interpreter (jinja.h) shared by its files.
 *
 * Calls go one way: jinja_eval.c (render) -> jinja_builtin.c (filters, tests, methods) ->
 * jinja_value.c (values, arena, Python str/repr/==/<) ; jinja_parse.c (parse) -> jinja_lex.c ->
 * jinja_value.c. Errors during a render or a parse longjmp to the entry point (struct jarena.jb)
 * after hy_err_set(); everything allocated meanwhile lives in the arena, so nothing leaks.
 */
#ifndef HY_TEXT_JINJA_INTERNAL_H
#define HY_TEXT_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------ arena */

struct jchunk;
struct jarena {
    struct jchunk *head;
    size_t total, limit; /* bytes allocated; limit 0 = none */
    jmp_buf *jb;         /* where an error jumps (must be set before any allocation) */
    void *tmp;           /* a malloc'd scratch pointer freed by jarena_free (see jinja_value.c) */
};

/* Allocates n zeroed bytes; over the limit: hy_err_set + longjmp. */
void *jarena_alloc(struct jarena *a, size_t n);
/* Grows the block p (old size n, 0 for NULL) to m bytes, in place when p is the newest block. */
void *jarena_grow(struct jarena *a, void *p, size_t n, size_t m);
char *jarena_strndup(struct jarena *a, const char *s, size_t n);
/* Frees every chunk and a->tmp. */
void jarena_free(struct jarena *a);
/* hy_err_set(fmt...) then longjmp(*a->jb). */
_Noreturn void jfail(struct jarena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* -------------------------------------------------------------------------------------- values */

enum jv_kind {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_TUPLE,
    JV_DICT,
    JV_NS,     /* namespace(): mutable attribute dict */
    JV_MACRO,  /* a macro (or caller) bound to its defining scope */
    JV_LOOP,   /* the loop object */
    JV_METHOD, /* bound method: self.name */
    JV_FUNC,   /* global function (range, namespace, dict, raise_exception, strftime_now, cycler...) */
    JV_CYCLER, /* cycler() / joiner() object */
};

struct jv;
struct jkv {
    struct jv *k, *v;
};

struct jloop {
    struct jv **items;
    size_t n, i;
    int depth;
    struct jv *last_changed; /* loop.changed(): the arguments of the last call (a tuple) or NULL */
};

struct jnode;
struct jscope;

struct jv {
    unsigned char kind;
    unsigned char markup;    /* JV_STR: a Markup (escape / safe); JV_LIST: a generator (map, select...) */
    unsigned char undef_err; /* JV_UNDEF: using it beyond printing / testing raises msg */
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *s;
            size_t n;
        } str;
        struct {
            struct jv **items;
            size_t n, cap;
        } list; /* JV_LIST, JV_TUPLE */
        struct {
            struct jkv *items;
            size_t n, cap;
        } dict; /* JV_DICT, JV_NS */
        struct {
            const struct jnode *def; /* NODE_MACRO (or NODE_CALLBLOCK for caller) */
            struct jscope *scope;
            struct jv *caller; /* the caller macro a call block passes; NULL = none */
        } macro;
        struct jloop *loop;
        struct {
            struct jv *self;
            const char *name;
        } method;
        int func;
        struct {
            struct jv **items; /* cycler items; joiner: items[0] = separator */
            size_t n, pos;
            int joiner;
        } cyc;
        const char *undef; /* the UndefinedError message */
    } u;
};

struct jv *jv_undef(struct jarena *a, const char *msg);
struct jv *jv_none(void);
struct jv *jv_bool(int b);
struct jv *jv_int(struct jarena *a, int64_t i);
struct jv *jv_float(struct jarena *a, double f);
struct jv *jv_str(struct jarena *a, const char *s, size_t n); /* copies */
struct jv *jv_str_nocopy(struct jarena *a, const char *s, size_t n);
struct jv *jv_strz(struct jarena *a, const char *s);
struct jv *jv_list(struct jarena *a, size_t cap);
struct jv *jv_tuple(struct jarena *a, size_t n); /* n items, all NULL until filled */
struct jv *jv_dict(struct jarena *a, size_t cap);
void jv_list_push(struct jarena *a, struct jv *l, struct jv *x);
/* Sets d[k] = v (replacing an equal key in place, Python dict order). */
void jv_dict_set(struct jarena *a, struct jv *d, struct jv *k, struct jv *v);
/* d[k] for an equal key, or NULL. */
struct jv *jv_dict_get(const struct jv *d, const struct jv *k);
struct jv *jv_dict_getz(const struct jv *d, const char *k, size_t n);

/* JSON (jansson) -> value, deep; depth-limited. */
struct jv *jv_from_json(struct jarena *a, const void *json, int depth);

int jv_truthy(const struct jv *v);
/* Python's type name ("str", "int", "NoneType", "list", "dict", "tuple", "Undefined" ...). */
const char *jv_type_name(const struct jv *v);
/* jinja2's object_type_repr: "None", "str object", "jinja2.utils.Namespace object"... */
const char *jv_object_type_repr(const struct jv *v);
/* Python ==; raises nothing. */
int jv_eq(const struct jv *x, const struct jv *y);
/* Python <, >, <=, >= (op '<' '>' 'l' 'g'); raises TypeError text on unorderable types. */
int jv_cmp(struct jarena *a, const struct jv *x, const struct jv *y, int op);
/* total order for sort: -1/0/1 (TypeError on unorderable types); casefold strings when fold. */
int jv_order(struct jarena *a, const struct jv *x, const struct jv *y, int fold);

/* Growable arena byte buffer. */
struct jbuf {
    char *p;
    size_t n, cap, limit; /* limit 0 = none: error "output exceeds N bytes" */
};
void jbuf_put(struct jarena *a, struct jbuf *b, const char *s, size_t n);
void jbuf_puts(struct jarena *a, struct jbuf *b, const char *s);

/* Appends Python str(v) (repr when repr != 0): undefined "" (raising when it carries an error and
 * repr is set), Markup as its text, containers as their repr. Unprintable objects (methods,
 * generators) raise "unsupported: ...". */
void jv_write(struct jarena *a, struct jbuf *b, const struct jv *v, int repr, int depth);
/* str(v) as a new string value. */
struct jv *jv_to_str(struct jarena *a, const struct jv *v);
/* json.dumps(v, ensure_ascii, indent (<0 none; or indent_str), separators (NULL = default), sort_keys) */
struct jdumps {
    int ensure_ascii, sort_keys;
    const char *indent; /* NULL = no indent */
    const char *item_sep, *key_sep;
};
void jv_dumps(struct jarena *a, struct jbuf *b, const struct jv *v, const struct jdumps *o, int level);

/* UTF-8 helpers: code point count, byte offset of code point i (clamped to n). */
size_t ju_len(const char *s, size_t n);
size_t ju_off(const char *s, size_t n, size_t i);
/* encodes code point cp (<= 0x10ffff) as UTF-8 into o[0..4), returns bytes */
size_t ju_enc(uint32_t cp, char *o);
/* decodes one code point at s (valid UTF-8), returns bytes */
size_t ju_dec(const char *s, size_t n, uint32_t *cp);
int ju_isspace(uint32_t cp);
/* Python str.rstrip()/lstrip() of whitespace: new length / bytes to skip. */
size_t ju_rstrip_ws(const char *s, size_t n);
size_t ju_lstrip_ws(const char *s, size_t n);

/* ------------------------------------------------------------------------------------ lexer */

enum jtok_kind {
    TK_EOF,
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP
};

struct jtok {
    int kind, line;
    const char *s; /* TK_TEXT / TK_NAME / TK_STRING (decoded) / TK_OP text */
    size_t n;
    int64_t i;
    double f;
};

/* Tokenizes src (newlines normalized, one trailing newline dropped, whitespace control applied).
 * Errors longjmp through a. */
struct jtok *jlex(struct jarena *a, const char *src, size_t len, size_t *n_out);

/* ------------------------------------------------------------------------------------ AST */

enum jnode_kind {
    /* statements */
    NODE_TEXT,
    NODE_OUTPUT,
    NODE_IF,          /* a = cond, body = kids[0..n), else_ = else */
    NODE_FOR,         /* target = target, a = iter, b = filter cond, body / else_ */
    NODE_SET,         /* target, a = value */
    NODE_SETBLOCK,    /* target, body, filters in b (a NODE_FILTER chain on NODE_NAME "") */
    NODE_MACRO,       /* name, params (NODE_NAME) with defaults, body */
    NODE_CALLBLOCK,   /* a = call expr, params/defaults for caller, body */
    NODE_FILTERBLOCK, /* b = filter chain applied to the body's output, body */
    NODE_BREAK,
    NODE_CONTINUE,
    NODE_WITH, /* params = names, defaults = values, body */
    /* expressions */
    NODE_CONST,
    NODE_NAME,
    NODE_GETATTR, /* a . name */
    NODE_GETITEM, /* a [ b ] */
    NODE_SLICE,   /* a [ args[0] : args[1] : args[2] ] (NULL = omitted) */
    NODE_CALL,    /* a ( args, kwargs ) */
    NODE_FILTER,  /* name, a = input (NULL inside filter blocks), args, kwargs */
    NODE_TEST,    /* name, a = input, args; op = negated */
    NODE_BINOP,   /* op, a, b */
    NODE_UNARY,   /* op '-' '+' '!' (not), a */
    NODE_AND,
    NODE_OR,
    NODE_COMPARE, /* a, then args[i] compared with cmp_ops[i] */
    NODE_COND,    /* b if a else c (c NULL = undefined) */
    NODE_LIST,
    NODE_TUPLE,
    NODE_DICT, /* args = k0 v0 k1 v1 ... */
};

/* binary operators */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT };
/* comparisons */
enum { CMP_EQ = 1, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

struct jnode {
    int kind, line, op;
    const char *name; /* NUL-terminated */
    struct jnode *a, *b, *c;
    struct jnode *target;
    struct jnode **args; /* also statement bodies: see body */
    size_t n_args;
    const char **kwnames;
    struct jnode **kwargs;
    size_t n_kwargs;
    struct jnode **body, **else_;
    size_t n_body, n_else;
    struct jnode **params, **defaults; /* macro params; defaults[i] NULL = required */
    size_t n_params;
    int *cmp_ops;
    int recursive, uses_caller;
    struct jv *value; /* NODE_CONST (immutable) */
    const char *text; /* NODE_TEXT */
    size_t text_len;
};

struct hy_jinja {
    struct jarena arena;
    struct jnode **body;
    size_t n_body;
};

/* -------------------------------------------------------------------------------- builtins */

/* Known filter / test names (parse-time check). */
int jb_has_filter(const char *name);
int jb_has_test(const char *name);
/* Global functions: id or -1. */
enum { JF_RANGE, JF_NAMESPACE, JF_DICT, JF_RAISE, JF_STRFTIME, JF_CYCLER, JF_JOINER };
int jb_global(const char *name);

struct jbctx {
    struct jarena *a;
    time_t now;
    uint64_t *steps, max_steps;
};

/* Applies filter `name` to x with positional args and keyword args; errors longjmp. */
struct jv *jb_filter(struct jbctx *c, const char *name, struct jv *x, struct jv **args, size_t n, const char **kwn,
                     struct jv **kwv, size_t nk, int line);
/* Runs test `name`; returns 0/1. */
int jb_test(struct jbctx *c, const char *name, struct jv *x, struct jv **args, size_t n);
/* Calls a bound method / global function (not macros). */
struct jv *jb_call(struct jbctx *c, struct jv *fn, struct jv **args, size_t n, const char **kwn, struct jv **kwv,
                   size_t nk);
/* obj.name through the immutable sandbox: dict key, method, namespace attribute, loop attribute;
 * an undefined with jinja2's message when missing. */
struct jv *jb_getattr(struct jbctx *c, struct jv *obj, const char *name, size_t n);
/* obj[key] (attribute fallback for str keys). */
struct jv *jb_getitem(struct jbctx *c, struct jv *obj, struct jv *key);
struct jv *jb_slice(struct jbctx *c, struct jv *obj, struct jv *lo, struct jv *hi, struct jv *step);
/* (jinja_value.c) Iterates x into an item array (str -> chars, dict -> keys, undefined -> empty). */
struct jv **jb_iter(struct jbctx *c, struct jv *x, size_t *n);
/* Python binary operator / `in`. */
struct jv *jb_binop(struct jbctx *c, int op, struct jv *x, struct jv *y);
int jb_contains(struct jbctx *c, struct jv *container, struct jv *item);
/* raises UndefinedError when x is an undefined carrying one */
void jb_check_undef(struct jbctx *c, const struct jv *x);
/* helpers jinja_filter.c shares (errors longjmp) */
int jb_is_int(const struct jv *v); /* int or bool */
int jb_is_num(const struct jv *v);
int jb_is_seq(const struct jv *v); /* list or tuple, not a generator */
const struct jv *jb_want_str(struct jbctx *c, const struct jv *x, const char *what);
struct jv *jb_escape(struct jbctx *c, struct jv *x); /* markupsafe.escape */
/* Argument i of a call: positional args[i] (i < n), else the keyword kw among kwn/kwv (nk), else NULL. */
struct jv *jb_argn(struct jv **args, size_t n, size_t i, const char **kwn, struct jv **kwv, size_t nk, const char *kw);
/* Raises Python's "fn() takes at least/at most ..." unless lo <= n <= hi. */
void jb_check_args(struct jbctx *c, const char *fn, size_t n, size_t lo, size_t hi);
struct jv *jb_case_map(struct jbctx *c, const struct jv *s, int mode);                       /* 'l' 'u' 't' 's' */
struct jv *jb_strip(struct jbctx *c, const struct jv *s, const struct jv *chars, int which); /* 1 l, 2 r, 3 */
struct jv *jb_replace(struct jbctx *c, const struct jv *s, const struct jv *old, const struct jv *new_, int64_t count);
struct jv *jb_pad(struct jbctx *c, const struct jv *s, int64_t width, const struct jv *fill, int mode);
struct jv *jb_printf(struct jbctx *c, struct jv *fmt, struct jv *args); /* fmt % args */
struct jv *jb_items(struct jbctx *c, struct jv *d);                     /* list of (k, v) tuples */
struct jv *jb_str_join(struct jbctx *c, const struct jv *sep, struct jv *it);
/* str.<m>(args) (jinja_str.c) */
struct jv *jb_str_method(struct jbctx *c, struct jv *self, const char *m, struct jv **args, size_t n, const char **kwn,
                         struct jv **kwv, size_t nk);
/* str.isdigit() / isalpha() / islower() ... by method name */
int jb_str_pred(struct jbctx *c, const struct jv *s, const char *name);

#endif
