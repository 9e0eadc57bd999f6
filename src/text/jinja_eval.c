/* jinja_eval.c - renders a parsed template (jinja_parse.c): statements, expressions, scopes as jinja2
 * resolves them (a fresh scope per loop iteration and macro call; `if` shares its scope; macros
 * see the scope they were defined in), macros with caller, bounded by steps / output / memory /
 * depth. Defines hy_jinja_render. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "text/jinja.h"
#include "text/jinja_internal.h"

typedef struct jv jv;
typedef struct jnode node;

struct jvar {
    const char *name;
    jv *v;
};

struct jscope {
    struct jscope *parent;
    struct jvar *vars;
    size_t n, cap;
};

struct ctx {
    struct jarena a;
    struct jbctx bc;
    struct jbuf *out;
    uint64_t steps, max_steps;
    size_t max_output;
    int depth, max_depth, rec;
};

#define A (&C->a)
enum { FLOW_OK = 0, FLOW_BREAK = 1, FLOW_CONTINUE = 2 };

static void tick(struct ctx *C)
{
    if (++C->steps > C->max_steps)
        jfail(A, "template exceeds %llu evaluation steps", (unsigned long long)C->max_steps);
}

static struct jscope *scope_new(struct ctx *C, struct jscope *parent)
{
    struct jscope *s = jarena_alloc(A, sizeof *s);
    s->parent = parent;
    return s;
}

static void scope_set(struct ctx *C, struct jscope *s, const char *name, jv *v)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->vars[i].name, name)) {
            s->vars[i].v = v;
            return;
        }
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 8;
        s->vars = jarena_grow(A, s->vars, s->cap * sizeof *s->vars, nc * sizeof *s->vars);
        s->cap = nc;
    }
    s->vars[s->n].name = name;
    s->vars[s->n].v = v;
    s->n++;
}

static jv *lookup(struct ctx *C, struct jscope *s, const char *name)
{
    for (; s; s = s->parent)
        for (size_t i = s->n; i-- > 0;)
            if (!strcmp(s->vars[i].name, name))
                return s->vars[i].v;
    int g = jb_global(name);
    if (g >= 0) {
        jv *f = jarena_alloc(A, sizeof *f);
        f->kind = JV_FUNC;
        f->u.func = g;
        return f;
    }
    size_t n = strlen(name);
    char *m = jarena_alloc(A, n + 20);
    snprintf(m, n + 20, "'%s' is undefined", name);
    return jv_undef(A, m);
}

static jv *eval(struct ctx *C, struct jscope *s, const node *x);
static int exec_body(struct ctx *C, struct jscope *s, node *const *body, size_t n);

static void enter(struct ctx *C)
{
    if (++C->rec > 3000)
        jfail(A, "maximum recursion depth exceeded");
}

/* ----------------------------------------------------------------------------------- macros */

static jv *capture(struct ctx *C, struct jscope *s, node *const *body, size_t n)
{
    struct jbuf b = {.limit = C->max_output};
    struct jbuf *saved = C->out;
    C->out = &b;
    exec_body(C, s, body, n);
    C->out = saved;
    return jv_str_nocopy(A, b.p ? b.p : "", b.n);
}

static jv *call_macro(struct ctx *C, jv *m, jv **args, size_t n, const char **kwn, jv **kwv, size_t nk, jv *caller)
{
    const node *def = m->u.macro.def;
    const char *mname = def->kind == NODE_MACRO ? def->name : "caller";
    if (++C->depth > C->max_depth)
        jfail(A, "maximum recursion depth exceeded (macro calls nested deeper than %d)", C->max_depth);
    struct jscope *s = scope_new(C, m->u.macro.scope);
    int uses_varargs = def->uses_caller & 1, uses_kwargs = def->uses_caller & 2;
    if (n > def->n_params && !uses_varargs)
        jfail(A, "macro '%s' takes not more than %zu argument(s)", mname, def->n_params);
    int *kw_used = jarena_alloc(A, (nk + 1) * sizeof(int));
    for (size_t i = 0; i < def->n_params; i++) {
        const char *p = def->params[i]->name;
        jv *v = NULL;
        if (i < n)
            v = args[i];
        else {
            for (size_t k = 0; k < nk; k++)
                if (!strcmp(kwn[k], p)) {
                    v = kwv[k];
                    kw_used[k] = 1;
                }
        }
        if (!v) {
            if (def->defaults[i])
                v = eval(C, s, def->defaults[i]);
            else {
                char *msg = jarena_alloc(A, strlen(p) + 40);
                sprintf(msg, "parameter '%s' was not provided", p);
                v = jv_undef(A, msg);
            }
        }
        scope_set(C, s, p, v);
    }
    jv *kw = jv_dict(A, 0);
    for (size_t k = 0; k < nk; k++)
        if (!kw_used[k]) {
            if (!uses_kwargs)
                jfail(A, "macro '%s' takes no keyword argument '%s'", mname, kwn[k]);
            jv_dict_set(A, kw, jv_strz(A, kwn[k]), kwv[k]);
        }
    if (uses_varargs) {
        size_t extra = n > def->n_params ? n - def->n_params : 0;
        jv *t = jv_tuple(A, extra);
        for (size_t i = 0; i < extra; i++)
            t->u.list.items[i] = args[def->n_params + i];
        scope_set(C, s, "varargs", t);
    }
    if (uses_kwargs)
        scope_set(C, s, "kwargs", kw);
    if (def->kind == NODE_MACRO)
        scope_set(C, s, "caller", caller ? caller : jv_undef(A, "No caller defined"));
    jv *r = capture(C, s, def->body, def->n_body);
    C->depth--;
    return r;
}

/* -------------------------------------------------------------------------------- expressions */

static jv **eval_list(struct ctx *C, struct jscope *s, node *const *v, size_t n)
{
    jv **r = jarena_alloc(A, (n + 1) * sizeof *r);
    for (size_t i = 0; i < n; i++)
        r[i] = eval(C, s, v[i]);
    return r;
}

static jv *do_call(struct ctx *C, struct jscope *s, const node *x, jv *caller)
{
    jv *fn = eval(C, s, x->a);
    jv **args = eval_list(C, s, x->args, x->n_args);
    jv **kw = eval_list(C, s, x->kwargs, x->n_kwargs);
    if (fn->kind == JV_MACRO)
        return call_macro(C, fn, args, x->n_args, x->kwnames, kw, x->n_kwargs, caller);
    if (caller)
        jfail(A, "line %d: unsupported: call block on a non-macro", x->line);
    return jb_call(&C->bc, fn, args, x->n_args, x->kwnames, kw, x->n_kwargs);
}

static jv *eval_filter(struct ctx *C, struct jscope *s, const node *x, jv *input)
{
    jv *in = x->a ? eval(C, s, x->a) : input;
    jv **args = eval_list(C, s, x->args, x->n_args);
    jv **kw = eval_list(C, s, x->kwargs, x->n_kwargs);
    return jb_filter(&C->bc, x->name, in, args, x->n_args, x->kwnames, kw, x->n_kwargs, x->line);
}

/* a filter chain applied to a block's output: the innermost filter has a == NULL */
static jv *apply_chain(struct ctx *C, struct jscope *s, const node *x, jv *input)
{
    if (!x->a)
        return eval_filter(C, s, x, input);
    jv *in = apply_chain(C, s, x->a, input);
    jv **args = eval_list(C, s, x->args, x->n_args);
    jv **kw = eval_list(C, s, x->kwargs, x->n_kwargs);
    return jb_filter(&C->bc, x->name, in, args, x->n_args, x->kwnames, kw, x->n_kwargs, x->line);
}

static jv *eval(struct ctx *C, struct jscope *s, const node *x)
{
    tick(C);
    enter(C);
    jv *r = NULL;
    switch (x->kind) {
    case NODE_CONST:
        r = x->value;
        break;
    case NODE_NAME:
        r = lookup(C, s, x->name);
        break;
    case NODE_GETATTR:
        r = jb_getattr(&C->bc, eval(C, s, x->a), x->name, strlen(x->name));
        break;
    case NODE_GETITEM: {
        jv *o = eval(C, s, x->a);
        r = jb_getitem(&C->bc, o, eval(C, s, x->b));
        break;
    }
    case NODE_SLICE: {
        jv *o = eval(C, s, x->a);
        jv *p[3];
        for (int i = 0; i < 3; i++)
            p[i] = x->args[i] ? eval(C, s, x->args[i]) : NULL;
        r = jb_slice(&C->bc, o, p[0], p[1], p[2]);
        break;
    }
    case NODE_CALL:
        r = do_call(C, s, x, NULL);
        break;
    case NODE_FILTER:
        r = eval_filter(C, s, x, NULL);
        break;
    case NODE_TEST: {
        jv *v = eval(C, s, x->a);
        jv **args = eval_list(C, s, x->args, x->n_args);
        r = jv_bool(jb_test(&C->bc, x->name, v, args, x->n_args) ^ x->op);
        break;
    }
    case NODE_BINOP: {
        jv *p = eval(C, s, x->a);
        r = jb_binop(&C->bc, x->op, p, eval(C, s, x->b));
        break;
    }
    case NODE_UNARY: {
        jv *v = eval(C, s, x->a);
        if (x->op == '!') {
            r = jv_bool(!jv_truthy(v));
            break;
        }
        jb_check_undef(&C->bc, v);
        if (x->op == '+' && jb_is_num(v)) {
            r = v->kind == JV_BOOL ? jv_int(A, v->u.b) : v;
            break;
        }
        if (v->kind == JV_FLOAT)
            r = jv_float(A, -v->u.f);
        else if (jb_is_int(v)) {
            int64_t i = v->kind == JV_INT ? v->u.i : v->u.b;
            if (i == INT64_MIN)
                jfail(A, "unsupported: integer overflow beyond 64 bits");
            r = jv_int(A, -i);
        } else
            jfail(A, "bad operand type for unary %c: '%s'", x->op, jv_type_name(v));
        break;
    }
    case NODE_AND: {
        jv *v = eval(C, s, x->a);
        r = jv_truthy(v) ? eval(C, s, x->b) : v;
        break;
    }
    case NODE_OR: {
        jv *v = eval(C, s, x->a);
        r = jv_truthy(v) ? v : eval(C, s, x->b);
        break;
    }
    case NODE_COMPARE: {
        jv *l = eval(C, s, x->a);
        r = jv_bool(1);
        for (size_t i = 0; i < x->n_args; i++) {
            jv *rv = eval(C, s, x->args[i]);
            int ok;
            switch (x->cmp_ops[i]) {
            case CMP_EQ:
                ok = jv_eq(l, rv);
                break;
            case CMP_NE:
                ok = !jv_eq(l, rv);
                break;
            case CMP_LT:
                ok = jv_cmp(A, l, rv, '<');
                break;
            case CMP_LE:
                ok = jv_cmp(A, l, rv, 'l');
                break;
            case CMP_GT:
                ok = jv_cmp(A, l, rv, '>');
                break;
            case CMP_GE:
                ok = jv_cmp(A, l, rv, 'g');
                break;
            case CMP_IN:
                ok = jb_contains(&C->bc, rv, l);
                break;
            default:
                ok = !jb_contains(&C->bc, rv, l);
                break;
            }
            if (!ok) {
                r = jv_bool(0);
                break;
            }
            l = rv;
        }
        break;
    }
    case NODE_COND:
        if (jv_truthy(eval(C, s, x->a)))
            r = eval(C, s, x->b);
        else if (x->c)
            r = eval(C, s, x->c);
        else {
            char *m = jarena_alloc(A, 120);
            snprintf(m, 120, "the inline if-expression on line %d evaluated to false and no else section was defined.",
                     x->line);
            r = jv_undef(A, m);
        }
        break;
    case NODE_LIST:
    case NODE_TUPLE: {
        jv **items = eval_list(C, s, x->args, x->n_args);
        r = x->kind == NODE_LIST ? jv_list(A, x->n_args) : jv_tuple(A, x->n_args);
        if (x->n_args)
            memcpy(r->u.list.items, items, x->n_args * sizeof *items);
        r->u.list.n = x->n_args;
        break;
    }
    case NODE_DICT: {
        r = jv_dict(A, x->n_args / 2);
        for (size_t i = 0; i + 1 < x->n_args; i += 2) {
            jv *k = eval(C, s, x->args[i]);
            if (k->kind == JV_LIST || k->kind == JV_DICT || k->kind == JV_NS)
                jfail(A, "unhashable type: '%s'", jv_type_name(k));
            jv_dict_set(A, r, k, eval(C, s, x->args[i + 1]));
        }
        break;
    }
    default:
        jfail(A, "line %d: internal error: not an expression", x->line);
    }
    C->rec--;
    return r;
}

/* --------------------------------------------------------------------------------- statements */

static void assign(struct ctx *C, struct jscope *s, const node *target, jv *v, int line)
{
    if (target->kind == NODE_NAME) {
        scope_set(C, s, target->name, v);
        return;
    }
    if (target->kind == NODE_GETATTR) {
        jv *ns = lookup(C, s, target->a->name);
        if (ns->kind != JV_NS)
            jfail(A, "cannot assign attribute on non-namespace object");
        jv_dict_set(A, ns, jv_strz(A, target->name), v);
        return;
    }
    /* tuple unpacking */
    size_t n;
    jv **items = jb_iter(&C->bc, v, &n);
    if (n < target->n_args)
        jfail(A, "not enough values to unpack (expected %zu, got %zu)", target->n_args, n);
    if (n > target->n_args)
        jfail(A, "too many values to unpack (expected %zu)", target->n_args);
    for (size_t i = 0; i < n; i++)
        assign(C, s, target->args[i], items[i], line);
}

static void output(struct ctx *C, jv *v)
{
    if (v->kind == JV_STR)
        jbuf_put(A, C->out, v->u.str.s, v->u.str.n);
    else
        jv_write(A, C->out, v, 0, 0);
}

static int exec_for(struct ctx *C, struct jscope *s, const node *x)
{
    jv *it = eval(C, s, x->a);
    size_t n;
    jv **items = jb_iter(&C->bc, it, &n);
    if (x->b) { /* `for x in xs if cond`: filtered before the loop (loop.length counts what passes) */
        jv **kept = jarena_alloc(A, (n + 1) * sizeof *kept);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            struct jscope *t = scope_new(C, s);
            assign(C, t, x->target, items[i], x->line);
            if (jv_truthy(eval(C, t, x->b)))
                kept[k++] = items[i];
        }
        items = kept;
        n = k;
    }
    struct jloop *L = jarena_alloc(A, sizeof *L);
    L->items = items;
    L->n = n;
    L->depth = 1;
    jv *lv = jarena_alloc(A, sizeof *lv);
    lv->kind = JV_LOOP;
    lv->u.loop = L;
    for (size_t i = 0; i < n; i++) {
        tick(C);
        L->i = i;
        struct jscope *t = scope_new(C, s);
        assign(C, t, x->target, items[i], x->line);
        scope_set(C, t, "loop", lv);
        int f = exec_body(C, t, x->body, x->n_body);
        if (f == FLOW_BREAK)
            break;
    }
    if (!n && x->n_else)
        return exec_body(C, s, x->else_, x->n_else);
    return FLOW_OK;
}

static int exec_stmt(struct ctx *C, struct jscope *s, const node *x)
{
    tick(C);
    switch (x->kind) {
    case NODE_TEXT:
        jbuf_put(A, C->out, x->text, x->text_len);
        return FLOW_OK;
    case NODE_OUTPUT:
        output(C, eval(C, s, x->a));
        return FLOW_OK;
    case NODE_IF:
        if (jv_truthy(eval(C, s, x->a)))
            return exec_body(C, s, x->body, x->n_body);
        return exec_body(C, s, x->else_, x->n_else);
    case NODE_FOR:
        return exec_for(C, s, x);
    case NODE_SET:
        assign(C, s, x->target, eval(C, s, x->a), x->line);
        return FLOW_OK;
    case NODE_SETBLOCK: {
        jv *v = capture(C, s, x->body, x->n_body);
        if (x->b)
            v = apply_chain(C, s, x->b, v);
        assign(C, s, x->target, v, x->line);
        return FLOW_OK;
    }
    case NODE_MACRO: {
        jv *m = jarena_alloc(A, sizeof *m);
        m->kind = JV_MACRO;
        m->u.macro.def = x;
        m->u.macro.scope = s;
        scope_set(C, s, x->name, m);
        return FLOW_OK;
    }
    case NODE_CALLBLOCK: {
        jv *caller = jarena_alloc(A, sizeof *caller);
        caller->kind = JV_MACRO;
        caller->u.macro.def = x;
        caller->u.macro.scope = s;
        output(C, do_call(C, s, x->a, caller));
        return FLOW_OK;
    }
    case NODE_FILTERBLOCK: {
        jv *v = capture(C, s, x->body, x->n_body);
        output(C, apply_chain(C, s, x->b, v));
        return FLOW_OK;
    }
    case NODE_WITH: {
        struct jscope *t = scope_new(C, s);
        for (size_t i = 0; i < x->n_params; i++)
            scope_set(C, t, x->params[i]->name, eval(C, s, x->defaults[i]));
        return exec_body(C, t, x->body, x->n_body);
    }
    case NODE_BREAK:
        return FLOW_BREAK;
    case NODE_CONTINUE:
        return FLOW_CONTINUE;
    default:
        jfail(A, "line %d: internal error: not a statement", x->line);
    }
}

static int exec_body(struct ctx *C, struct jscope *s, node *const *body, size_t n)
{
    enter(C);
    for (size_t i = 0; i < n; i++) {
        int f = exec_stmt(C, s, body[i]);
        if (f != FLOW_OK) {
            C->rec--;
            return f;
        }
    }
    C->rec--;
    return FLOW_OK;
}

char *hy_jinja_render(const struct hy_jinja *t, const json_t *vars, const struct hy_jinja_limits *limits,
                      size_t *out_len)
{
    if (!t)
        return hy_err_set("jinja: no template"), NULL;
    if (vars && !json_is_object(vars))
        return hy_err_set("jinja: template variables must be a JSON object"), NULL;
    struct ctx *C = calloc(1, sizeof *C);
    if (!C)
        return hy_err_set("out of memory"), NULL;
    jmp_buf jb;
    C->a.jb = &jb;
    C->max_output = limits && limits->max_output ? limits->max_output : (size_t)64 << 20;
    C->max_steps = limits && limits->max_steps ? limits->max_steps : 50000000ULL;
    C->max_depth = limits && limits->max_depth > 0 ? limits->max_depth : 256;
    C->a.limit = limits && limits->max_memory ? limits->max_memory : 8 * C->max_output + ((size_t)64 << 20);
    C->bc.a = &C->a;
    C->bc.now = limits && limits->now ? limits->now : time(NULL);
    C->bc.steps = &C->steps;
    C->bc.max_steps = C->max_steps;
    char *result = NULL;
    struct jbuf *root = NULL;
    if (setjmp(jb)) {
        jarena_free(&C->a);
        free(C);
        return NULL;
    }
    root = jarena_alloc(&C->a, sizeof *root);
    root->limit = C->max_output;
    C->out = root;
    struct jscope *g = scope_new(C, NULL);
    if (vars) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)vars, k, v)
        {
            scope_set(C, g, jarena_strndup(&C->a, k, strlen(k)), jv_from_json(&C->a, v, 0));
        }
    }
    exec_body(C, g, t->body, t->n_body);
    result = malloc(root->n + 1);
    if (!result) {
        jarena_free(&C->a);
        free(C);
        return hy_err_set("out of memory"), NULL;
    }
    if (root->n)
        memcpy(result, root->p, root->n);
    result[root->n] = '\0';
    if (out_len)
        *out_len = root->n;
    jarena_free(&C->a);
    free(C);
    return result;
}
