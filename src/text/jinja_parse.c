/* jinja_parse.c - the Jinja parser: tokens (jinja_lex.c) -> statement and expression trees, with
 * jinja2's operator precedence; unsupported statements, filters and tests are refused here, naming
 * the line. Defines hy_jinja_parse and hy_jinja_free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/jinja.h"
#include "text/jinja_internal.h"

struct parser {
    struct jarena *a;
    struct jtok *t;
    size_t n, i;
    int depth;
    int in_loop, in_macro;
};

typedef struct jnode node;

/* a growable node list */
struct nlist {
    node **v;
    size_t n, cap;
};

static void nl_push(struct parser *P, struct nlist *l, node *x)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 4;
        l->v = jarena_grow(P->a, l->v, l->cap * sizeof *l->v, nc * sizeof *l->v);
        l->cap = nc;
    }
    l->v[l->n++] = x;
}

static struct jtok *cur(struct parser *P)
{
    return &P->t[P->i];
}
static struct jtok *peek(struct parser *P, size_t k)
{
    return P->i + k < P->n ? &P->t[P->i + k] : &P->t[P->n - 1];
}

static const char *tok_desc(struct jtok *t)
{
    switch (t->kind) {
    case TK_EOF:
        return "end of template";
    case TK_BLOCK_END:
        return "end of statement block";
    case TK_VAR_END:
        return "end of print statement";
    case TK_NAME:
    case TK_OP:
        return t->s;
    case TK_STRING:
        return "string";
    case TK_INT:
        return "integer";
    case TK_FLOAT:
        return "float";
    default:
        return "template data";
    }
}

static _Noreturn void unexpected(struct parser *P, const char *what)
{
    struct jtok *t = cur(P);
    if (t->kind == TK_EOF)
        jfail(P->a, "line %d: unexpected end of template%s%s", t->line, what ? ", expected " : "", what ? what : "");
    jfail(P->a, "line %d: unexpected '%s'%s%s", t->line, tok_desc(t), what ? ", expected " : "", what ? what : "");
}

static int is_op(struct parser *P, const char *op)
{
    struct jtok *t = cur(P);
    return t->kind == TK_OP && !strcmp(t->s, op);
}

static int is_name(struct parser *P, const char *nm)
{
    struct jtok *t = cur(P);
    return t->kind == TK_NAME && !strcmp(t->s, nm);
}

static void expect_op(struct parser *P, const char *op)
{
    if (!is_op(P, op)) {
        char w[16];
        w[0] = '\'';
        strncpy(w + 1, op, 12);
        w[13] = 0;
        strcat(w, "'");
        unexpected(P, w);
    }
    P->i++;
}

static void expect_block_end(struct parser *P)
{
    if (cur(P)->kind != TK_BLOCK_END)
        unexpected(P, "end of statement block");
    P->i++;
}

static node *mknode(struct parser *P, int kind, int line)
{
    node *x = jarena_alloc(P->a, sizeof *x);
    x->kind = kind;
    x->line = line;
    return x;
}

static node *parse_expr(struct parser *P);
static node *parse_or(struct parser *P);
static node *parse_unary(struct parser *P, int with_filter);
static node *parse_primary(struct parser *P);

static void enter(struct parser *P)
{
    if (++P->depth > 200)
        jfail(P->a, "line %d: template nested too deeply", cur(P)->line);
}

/* call arguments after '(' ; fills args / kwargs */
static void parse_call_args(struct parser *P, node *x)
{
    struct nlist args = {0}, kw = {0};
    const char **names = NULL;
    size_t ncap = 0;
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (args.n || kw.n)
            expect_op(P, ",");
        if (is_op(P, ")"))
            break;
        if (is_op(P, "*") || is_op(P, "**"))
            jfail(P->a, "line %d: unsupported *args / **kwargs in a call", cur(P)->line);
        if (cur(P)->kind == TK_NAME && peek(P, 1)->kind == TK_OP && !strcmp(peek(P, 1)->s, "=")) {
            if (kw.n == ncap) {
                size_t nc = ncap ? 2 * ncap : 4;
                names = jarena_grow(P->a, names, ncap * sizeof *names, nc * sizeof *names);
                ncap = nc;
            }
            names[kw.n] = cur(P)->s;
            P->i += 2;
            nl_push(P, &kw, parse_expr(P));
        } else {
            if (kw.n)
                jfail(P->a, "line %d: invalid syntax for function call expression", cur(P)->line);
            nl_push(P, &args, parse_expr(P));
        }
    }
    P->i++;
    x->args = args.v;
    x->n_args = args.n;
    x->kwargs = kw.v;
    x->kwnames = names;
    x->n_kwargs = kw.n;
}

static node *parse_filter(struct parser *P, node *input)
{
    /* after '|' */
    struct jtok *t = cur(P);
    if (t->kind != TK_NAME)
        unexpected(P, "filter name");
    node *f = mknode(P, NODE_FILTER, t->line);
    f->name = t->s;
    P->i++;
    if (is_op(P, "."))
        jfail(P->a, "line %d: unsupported dotted filter name", t->line);
    if (!jb_has_filter(f->name))
        jfail(P->a, "line %d: No filter named '%s'.", t->line, f->name);
    f->a = input;
    if (is_op(P, "("))
        parse_call_args(P, f);
    return f;
}

static node *parse_test(struct parser *P, node *input)
{
    /* after 'is' */
    int line = cur(P)->line;
    node *x = mknode(P, NODE_TEST, line);
    if (is_name(P, "not")) {
        x->op = 1;
        P->i++;
    }
    struct jtok *t = cur(P);
    if (t->kind != TK_NAME)
        unexpected(P, "test name");
    x->name = t->s;
    P->i++;
    if (!jb_has_test(x->name))
        jfail(P->a, "line %d: No test named '%s'.", t->line, x->name);
    x->a = input;
    t = cur(P);
    if (is_op(P, "(")) {
        parse_call_args(P, x);
    } else if ((t->kind == TK_NAME && strcmp(t->s, "else") && strcmp(t->s, "or") && strcmp(t->s, "and") &&
                strcmp(t->s, "if") && strcmp(t->s, "in") && strcmp(t->s, "not") && strcmp(t->s, "is")) ||
               t->kind == TK_STRING || t->kind == TK_INT || t->kind == TK_FLOAT || is_op(P, "[") || is_op(P, "{")) {
        /* one argument without parentheses: `is divisibleby 3`, `is sameas none` */
        node *arg = parse_primary(P);
        x->args = jarena_alloc(P->a, sizeof(node *));
        x->args[0] = arg;
        x->n_args = 1;
    }
    if (x->n_kwargs)
        jfail(P->a, "line %d: unsupported keyword arguments to a test", line);
    return x;
}

static node *parse_postfix(struct parser *P, node *x)
{
    for (;;) {
        struct jtok *t = cur(P);
        if (is_op(P, ".")) {
            P->i++;
            t = cur(P);
            if (t->kind == TK_NAME) {
                node *g = mknode(P, NODE_GETATTR, t->line);
                g->a = x;
                g->name = t->s;
                P->i++;
                x = g;
            } else if (t->kind == TK_INT) {
                node *g = mknode(P, NODE_GETITEM, t->line);
                g->a = x;
                g->b = mknode(P, NODE_CONST, t->line);
                g->b->value = jv_int(P->a, t->i);
                P->i++;
                x = g;
            } else
                unexpected(P, "name or number");
        } else if (is_op(P, "[")) {
            int line = t->line;
            P->i++;
            node *parts[3] = {0};
            int np = 0, is_slice = 0;
            for (;;) {
                if (!is_op(P, ":") && !is_op(P, "]"))
                    parts[np] = parse_expr(P);
                if (is_op(P, ":")) {
                    is_slice = 1;
                    if (++np > 2)
                        unexpected(P, "']'");
                    P->i++;
                    continue;
                }
                break;
            }
            if (!is_slice && is_op(P, ","))
                jfail(P->a, "line %d: unsupported tuple subscript", line);
            expect_op(P, "]");
            if (is_slice) {
                node *s = mknode(P, NODE_SLICE, line);
                s->a = x;
                s->args = jarena_alloc(P->a, 3 * sizeof(node *));
                memcpy(s->args, parts, sizeof parts);
                s->n_args = 3;
                x = s;
            } else {
                if (!parts[0])
                    unexpected(P, "expression");
                node *g = mknode(P, NODE_GETITEM, line);
                g->a = x;
                g->b = parts[0];
                x = g;
            }
        } else if (is_op(P, "(")) {
            node *c = mknode(P, NODE_CALL, t->line);
            c->a = x;
            parse_call_args(P, c);
            x = c;
        } else
            return x;
    }
}

static node *parse_filter_expr(struct parser *P, node *x)
{
    for (;;) {
        if (is_op(P, "|")) {
            P->i++;
            x = parse_filter(P, x);
        } else if (is_name(P, "is")) {
            P->i++;
            x = parse_test(P, x);
        } else if (is_op(P, "(")) {
            node *c = mknode(P, NODE_CALL, cur(P)->line);
            c->a = x;
            parse_call_args(P, c);
            x = c;
        } else
            return x;
    }
}

static node *parse_primary(struct parser *P)
{
    struct jtok *t = cur(P);
    enter(P);
    node *x;
    switch (t->kind) {
    case TK_NAME:
        P->i++;
        x = mknode(P, NODE_CONST, t->line);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            x->value = jv_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            x->value = jv_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            x->value = jv_none();
        else {
            x->kind = NODE_NAME;
            x->name = t->s;
        }
        break;
    case TK_STRING: {
        /* adjacent string literals concatenate */
        size_t tot = 0, j = P->i;
        while (P->t[j].kind == TK_STRING)
            tot += P->t[j++].n;
        char *s = jarena_alloc(P->a, tot + 1);
        size_t k = 0;
        while (cur(P)->kind == TK_STRING) {
            memcpy(s + k, cur(P)->s, cur(P)->n);
            k += cur(P)->n;
            P->i++;
        }
        x = mknode(P, NODE_CONST, t->line);
        x->value = jv_str_nocopy(P->a, s, k);
        break;
    }
    case TK_INT:
        P->i++;
        x = mknode(P, NODE_CONST, t->line);
        x->value = jv_int(P->a, t->i);
        break;
    case TK_FLOAT:
        P->i++;
        x = mknode(P, NODE_CONST, t->line);
        x->value = jv_float(P->a, t->f);
        break;
    case TK_OP:
        if (is_op(P, "(")) {
            P->i++;
            if (is_op(P, ")")) {
                P->i++;
                x = mknode(P, NODE_TUPLE, t->line);
                break;
            }
            node *e = parse_expr(P);
            if (is_op(P, ",")) {
                struct nlist l = {0};
                nl_push(P, &l, e);
                while (is_op(P, ",")) {
                    P->i++;
                    if (is_op(P, ")"))
                        break;
                    nl_push(P, &l, parse_expr(P));
                }
                x = mknode(P, NODE_TUPLE, t->line);
                x->args = l.v;
                x->n_args = l.n;
            } else
                x = e;
            expect_op(P, ")");
            break;
        }
        if (is_op(P, "[")) {
            P->i++;
            struct nlist l = {0};
            while (!is_op(P, "]")) {
                if (l.n)
                    expect_op(P, ",");
                if (is_op(P, "]"))
                    break;
                nl_push(P, &l, parse_expr(P));
            }
            P->i++;
            x = mknode(P, NODE_LIST, t->line);
            x->args = l.v;
            x->n_args = l.n;
            break;
        }
        if (is_op(P, "{")) {
            P->i++;
            struct nlist l = {0};
            while (!is_op(P, "}")) {
                if (l.n)
                    expect_op(P, ",");
                if (is_op(P, "}"))
                    break;
                nl_push(P, &l, parse_expr(P));
                expect_op(P, ":");
                nl_push(P, &l, parse_expr(P));
            }
            P->i++;
            x = mknode(P, NODE_DICT, t->line);
            x->args = l.v;
            x->n_args = l.n;
            break;
        }
        /* fall through */
    default:
        unexpected(P, NULL);
    }
    P->depth--;
    return parse_postfix(P, x);
}

static node *parse_unary(struct parser *P, int with_filter)
{
    enter(P);
    node *x;
    struct jtok *t = cur(P);
    if (is_op(P, "-") || is_op(P, "+")) {
        P->i++;
        x = mknode(P, NODE_UNARY, t->line);
        x->op = t->s[0];
        x->a = parse_unary(P, 0);
    } else
        x = parse_primary(P);
    if (with_filter)
        x = parse_filter_expr(P, x);
    P->depth--;
    return x;
}

static node *binop(struct parser *P, int op, node *l, node *r, int line)
{
    node *x = mknode(P, NODE_BINOP, line);
    x->op = op;
    x->a = l;
    x->b = r;
    return x;
}

static node *parse_pow(struct parser *P)
{
    node *x = parse_unary(P, 1);
    while (is_op(P, "**")) {
        int line = cur(P)->line;
        P->i++;
        x = binop(P, OP_POW, x, parse_unary(P, 1), line);
    }
    return x;
}

static node *parse_math2(struct parser *P)
{
    node *x = parse_pow(P);
    for (;;) {
        int op = is_op(P, "*")    ? OP_MUL
                 : is_op(P, "/")  ? OP_DIV
                 : is_op(P, "//") ? OP_FLOORDIV
                 : is_op(P, "%")  ? OP_MOD
                                  : 0;
        if (!op)
            return x;
        int line = cur(P)->line;
        P->i++;
        x = binop(P, op, x, parse_pow(P), line);
    }
}

static node *parse_concat(struct parser *P)
{
    node *x = parse_math2(P);
    while (is_op(P, "~")) {
        int line = cur(P)->line;
        P->i++;
        x = binop(P, OP_CONCAT, x, parse_math2(P), line);
    }
    return x;
}

static node *parse_math1(struct parser *P)
{
    node *x = parse_concat(P);
    for (;;) {
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : 0;
        if (!op)
            return x;
        int line = cur(P)->line;
        P->i++;
        x = binop(P, op, x, parse_concat(P), line);
    }
}

static node *parse_compare(struct parser *P)
{
    node *x = parse_math1(P);
    struct nlist rhs = {0};
    int *ops = NULL;
    size_t cap = 0;
    for (;;) {
        int op = 0;
        struct jtok *t = cur(P);
        if (t->kind == TK_OP) {
            op = !strcmp(t->s, "==")   ? CMP_EQ
                 : !strcmp(t->s, "!=") ? CMP_NE
                 : !strcmp(t->s, "<")  ? CMP_LT
                 : !strcmp(t->s, "<=") ? CMP_LE
                 : !strcmp(t->s, ">")  ? CMP_GT
                 : !strcmp(t->s, ">=") ? CMP_GE
                                       : 0;
            if (op)
                P->i++;
        } else if (is_name(P, "in")) {
            op = CMP_IN;
            P->i++;
        } else if (is_name(P, "not") && peek(P, 1)->kind == TK_NAME && !strcmp(peek(P, 1)->s, "in")) {
            op = CMP_NOTIN;
            P->i += 2;
        }
        if (!op)
            break;
        if (rhs.n == cap) {
            size_t nc = cap ? 2 * cap : 4;
            ops = jarena_grow(P->a, ops, cap * sizeof *ops, nc * sizeof *ops);
            cap = nc;
        }
        ops[rhs.n] = op;
        nl_push(P, &rhs, parse_math1(P));
    }
    if (!rhs.n)
        return x;
    node *c = mknode(P, NODE_COMPARE, x->line);
    c->a = x;
    c->args = rhs.v;
    c->n_args = rhs.n;
    c->cmp_ops = ops;
    return c;
}

static node *parse_not(struct parser *P)
{
    if (is_name(P, "not")) {
        node *x = mknode(P, NODE_UNARY, cur(P)->line);
        P->i++;
        enter(P);
        x->op = '!';
        x->a = parse_not(P);
        P->depth--;
        return x;
    }
    return parse_compare(P);
}

static node *parse_and(struct parser *P)
{
    node *x = parse_not(P);
    while (is_name(P, "and")) {
        node *y = mknode(P, NODE_AND, cur(P)->line);
        P->i++;
        y->a = x;
        y->b = parse_not(P);
        x = y;
    }
    return x;
}

static node *parse_or(struct parser *P)
{
    node *x = parse_and(P);
    while (is_name(P, "or")) {
        node *y = mknode(P, NODE_OR, cur(P)->line);
        P->i++;
        y->a = x;
        y->b = parse_and(P);
        x = y;
    }
    return x;
}

static node *parse_expr(struct parser *P)
{
    enter(P);
    node *x = parse_or(P);
    while (is_name(P, "if")) {
        node *c = mknode(P, NODE_COND, cur(P)->line);
        P->i++;
        c->b = x;
        c->a = parse_or(P);
        if (is_name(P, "else")) {
            P->i++;
            c->c = parse_expr(P);
        }
        x = c;
    }
    P->depth--;
    return x;
}

/* an expression or an unparenthesized tuple (`a, b`) */
static node *parse_tuple_expr(struct parser *P, int names_only);
static node *parse_tuple_expr_noif(struct parser *P)
{
    return parse_tuple_expr(P, 2);
}

/* names_only: 0 = expressions, 1 = assignment targets (names, ns.attr), 2 = expressions without
 * `if` (a for loop's iterable, whose `if` is the loop filter) */
static node *parse_tuple_expr(struct parser *P, int names_only)
{
    int line = cur(P)->line;
    node *first;
    if (names_only == 1) {
        if (cur(P)->kind != TK_NAME)
            unexpected(P, "name");
        first = mknode(P, NODE_NAME, line);
        first->name = cur(P)->s;
        P->i++;
        if (is_op(P, ".")) { /* ns.attr */
            P->i++;
            if (cur(P)->kind != TK_NAME)
                unexpected(P, "name");
            node *g = mknode(P, NODE_GETATTR, line);
            g->a = first;
            g->name = cur(P)->s;
            P->i++;
            return g;
        }
    } else
        first = names_only == 2 ? parse_or(P) : parse_expr(P);
    if (!is_op(P, ","))
        return first;
    struct nlist l = {0};
    nl_push(P, &l, first);
    while (is_op(P, ",")) {
        P->i++;
        if (names_only == 1) {
            if (cur(P)->kind != TK_NAME)
                break;
            node *nm = mknode(P, NODE_NAME, cur(P)->line);
            nm->name = cur(P)->s;
            P->i++;
            nl_push(P, &l, nm);
        } else {
            if (cur(P)->kind == TK_BLOCK_END || cur(P)->kind == TK_VAR_END || is_op(P, ")"))
                break;
            nl_push(P, &l, names_only == 2 ? parse_or(P) : parse_expr(P));
        }
    }
    node *t = mknode(P, NODE_TUPLE, line);
    t->args = l.v;
    t->n_args = l.n;
    return t;
}

static node *parse_for_target(struct parser *P)
{
    if (is_op(P, "(")) {
        P->i++;
        node *t = parse_tuple_expr(P, 1);
        expect_op(P, ")");
        if (t->kind == NODE_GETATTR)
            jfail(P->a, "line %d: can't assign to an attribute in a for target", t->line);
        return t;
    }
    node *t = parse_tuple_expr(P, 1);
    if (t->kind == NODE_GETATTR)
        jfail(P->a, "line %d: can't assign to an attribute in a for target", t->line);
    return t;
}

/* ------------------------------------------------------------------------------ statements */

static int body_uses(const node *x, const char *name, int depth);

static int list_uses(node *const *v, size_t n, const char *name, int depth)
{
    for (size_t i = 0; i < n; i++)
        if (body_uses(v[i], name, depth))
            return 1;
    return 0;
}

/* does the tree reference `name` (a macro's varargs / kwargs)? */
static int body_uses(const node *x, const char *name, int depth)
{
    if (!x || depth > 400)
        return 0;
    if (x->kind == NODE_NAME && !strcmp(x->name, name))
        return 1;
    return body_uses(x->a, name, depth + 1) || body_uses(x->b, name, depth + 1) || body_uses(x->c, name, depth + 1) ||
           body_uses(x->target, name, depth + 1) || list_uses(x->args, x->n_args, name, depth + 1) ||
           list_uses(x->kwargs, x->n_kwargs, name, depth + 1) || list_uses(x->body, x->n_body, name, depth + 1) ||
           list_uses(x->else_, x->n_else, name, depth + 1) || list_uses(x->defaults, x->n_params, name, depth + 1);
}

static void macro_flags(node *x)
{
    x->uses_caller = (body_uses(x, "varargs", 0) ? 1 : 0) | (body_uses(x, "kwargs", 0) ? 2 : 0);
}

static void parse_body(struct parser *P, struct nlist *out, const char *const *ends, const char **which);

static int name_in(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(s, *list))
            return 1;
    return 0;
}

static void parse_params(struct parser *P, node *x)
{
    struct nlist ps = {0}, ds = {0};
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (ps.n)
            expect_op(P, ",");
        if (is_op(P, ")"))
            break;
        if (cur(P)->kind != TK_NAME)
            unexpected(P, "parameter name");
        node *nm = mknode(P, NODE_NAME, cur(P)->line);
        nm->name = cur(P)->s;
        P->i++;
        node *d = NULL;
        if (is_op(P, "=")) {
            P->i++;
            d = parse_expr(P);
        } else if (ds.n && ds.v[ds.n - 1])
            jfail(P->a, "line %d: non-default argument follows default argument", nm->line);
        nl_push(P, &ps, nm);
        nl_push(P, &ds, d);
    }
    P->i++;
    x->params = ps.v;
    x->defaults = ds.v;
    x->n_params = ps.n;
}

static node *parse_filter_chain(struct parser *P)
{
    node *x = NULL;
    do {
        if (x)
            P->i++;
        x = parse_filter(P, x);
    } while (is_op(P, "|"));
    return x;
}

/* after '{%' with cur at the statement name; returns the node (or NULL for a closing tag handled
 * by the caller) */
static node *parse_statement(struct parser *P)
{
    struct jtok *t = cur(P);
    int line = t->line;
    if (t->kind != TK_NAME)
        unexpected(P, "statement name");
    const char *nm = t->s;
    P->i++;
    enter(P);
    node *x = NULL;
    if (!strcmp(nm, "if")) {
        x = mknode(P, NODE_IF, line);
        x->a = parse_expr(P);
        expect_block_end(P);
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        struct nlist body = {0};
        const char *which;
        parse_body(P, &body, ends, &which);
        x->body = body.v;
        x->n_body = body.n;
        node *tail = x;
        while (!strcmp(which, "elif")) {
            node *e = mknode(P, NODE_IF, cur(P)->line);
            e->a = parse_expr(P);
            expect_block_end(P);
            struct nlist b2 = {0};
            parse_body(P, &b2, ends, &which);
            e->body = b2.v;
            e->n_body = b2.n;
            tail->else_ = jarena_alloc(P->a, sizeof(node *));
            tail->else_[0] = e;
            tail->n_else = 1;
            tail = e;
        }
        if (!strcmp(which, "else")) {
            expect_block_end(P);
            static const char *const ends2[] = {"endif", NULL};
            struct nlist b3 = {0};
            parse_body(P, &b3, ends2, &which);
            tail->else_ = b3.v;
            tail->n_else = b3.n;
        }
        expect_block_end(P);
    } else if (!strcmp(nm, "for")) {
        x = mknode(P, NODE_FOR, line);
        x->target = parse_for_target(P);
        if (!is_name(P, "in"))
            unexpected(P, "'in'");
        P->i++;
        x->a = parse_tuple_expr_noif(P);
        if (is_name(P, "if")) {
            P->i++;
            x->b = parse_expr(P);
        }
        if (is_name(P, "recursive"))
            jfail(P->a, "line %d: unsupported recursive for loop", line);
        expect_block_end(P);
        static const char *const ends[] = {"else", "endfor", NULL};
        struct nlist body = {0};
        const char *which;
        P->in_loop++;
        parse_body(P, &body, ends, &which);
        P->in_loop--;
        x->body = body.v;
        x->n_body = body.n;
        if (!strcmp(which, "else")) {
            expect_block_end(P);
            static const char *const ends2[] = {"endfor", NULL};
            struct nlist b2 = {0};
            int saved = P->in_loop;
            P->in_loop = 0;
            parse_body(P, &b2, ends2, &which);
            P->in_loop = saved;
            x->else_ = b2.v;
            x->n_else = b2.n;
        }
        expect_block_end(P);
    } else if (!strcmp(nm, "set")) {
        node *target = is_op(P, "(") ? parse_for_target(P) : parse_tuple_expr(P, 1);
        if (is_op(P, "=")) {
            P->i++;
            x = mknode(P, NODE_SET, line);
            x->target = target;
            x->a = parse_tuple_expr(P, 0);
            expect_block_end(P);
        } else {
            if (target->kind != NODE_NAME)
                unexpected(P, "'='");
            x = mknode(P, NODE_SETBLOCK, line);
            x->target = target;
            if (is_op(P, "|")) {
                P->i++;
                x->b = parse_filter_chain(P);
            }
            expect_block_end(P);
            static const char *const ends[] = {"endset", NULL};
            struct nlist body = {0};
            const char *which;
            parse_body(P, &body, ends, &which);
            x->body = body.v;
            x->n_body = body.n;
            expect_block_end(P);
        }
    } else if (!strcmp(nm, "macro")) {
        x = mknode(P, NODE_MACRO, line);
        if (cur(P)->kind != TK_NAME)
            unexpected(P, "macro name");
        x->name = cur(P)->s;
        P->i++;
        parse_params(P, x);
        expect_block_end(P);
        static const char *const ends[] = {"endmacro", NULL};
        struct nlist body = {0};
        const char *which;
        int saved = P->in_loop;
        P->in_loop = 0;
        parse_body(P, &body, ends, &which);
        P->in_loop = saved;
        x->body = body.v;
        x->n_body = body.n;
        macro_flags(x);
        if (cur(P)->kind == TK_NAME && !strcmp(cur(P)->s, x->name))
            P->i++;
        expect_block_end(P);
    } else if (!strcmp(nm, "call")) {
        x = mknode(P, NODE_CALLBLOCK, line);
        x->name = "caller";
        if (is_op(P, "("))
            parse_params(P, x);
        x->a = parse_expr(P);
        if (x->a->kind != NODE_CALL)
            jfail(P->a, "line %d: expected call", line);
        expect_block_end(P);
        static const char *const ends[] = {"endcall", NULL};
        struct nlist body = {0};
        const char *which;
        int saved = P->in_loop;
        P->in_loop = 0;
        parse_body(P, &body, ends, &which);
        P->in_loop = saved;
        x->body = body.v;
        x->n_body = body.n;
        macro_flags(x);
        expect_block_end(P);
    } else if (!strcmp(nm, "filter")) {
        x = mknode(P, NODE_FILTERBLOCK, line);
        x->b = parse_filter_chain(P);
        expect_block_end(P);
        static const char *const ends[] = {"endfilter", NULL};
        struct nlist body = {0};
        const char *which;
        parse_body(P, &body, ends, &which);
        x->body = body.v;
        x->n_body = body.n;
        expect_block_end(P);
    } else if (!strcmp(nm, "with")) {
        x = mknode(P, NODE_WITH, line);
        struct nlist ps = {0}, ds = {0};
        while (cur(P)->kind != TK_BLOCK_END) {
            if (ps.n)
                expect_op(P, ",");
            node *tg = parse_for_target(P);
            if (tg->kind != NODE_NAME)
                jfail(P->a, "line %d: unsupported tuple target in 'with'", line);
            expect_op(P, "=");
            nl_push(P, &ps, tg);
            nl_push(P, &ds, parse_expr(P));
        }
        expect_block_end(P);
        x->params = ps.v;
        x->defaults = ds.v;
        x->n_params = ps.n;
        static const char *const ends[] = {"endwith", NULL};
        struct nlist body = {0};
        const char *which;
        parse_body(P, &body, ends, &which);
        x->body = body.v;
        x->n_body = body.n;
        expect_block_end(P);
    } else if (!strcmp(nm, "generation")) {
        /* transformers' AssistantTracker: the body renders unchanged */
        expect_block_end(P);
        static const char *const ends[] = {"endgeneration", NULL};
        struct nlist body = {0};
        const char *which;
        parse_body(P, &body, ends, &which);
        x = mknode(P, NODE_IF, line);
        x->a = mknode(P, NODE_CONST, line);
        x->a->value = jv_bool(1);
        x->body = body.v;
        x->n_body = body.n;
        expect_block_end(P);
    } else if (!strcmp(nm, "break") || !strcmp(nm, "continue")) {
        if (!P->in_loop)
            jfail(P->a, "line %d: '%s' outside of a loop", line, nm);
        x = mknode(P, nm[0] == 'b' ? NODE_BREAK : NODE_CONTINUE, line);
        expect_block_end(P);
    } else {
        static const char *const known[] = {"include", "import",     "from",  "extends",   "block",
                                            "do",      "autoescape", "trans", "pluralize", NULL};
        if (name_in(nm, known))
            jfail(P->a, "line %d: unsupported statement '%s'", line, nm);
        jfail(P->a, "line %d: Encountered unknown tag '%s'.", line, nm);
    }
    P->depth--;
    return x;
}

/* parses until a block tag whose name is in ends (cur left after the name) */
static void parse_body(struct parser *P, struct nlist *out, const char *const *ends, const char **which)
{
    for (;;) {
        struct jtok *t = cur(P);
        switch (t->kind) {
        case TK_EOF:
            if (ends) {
                const char *last = ends[0];
                for (size_t k = 0; ends[k]; k++)
                    last = ends[k];
                jfail(P->a, "line %d: unexpected end of template, expected '%s'", t->line, last);
            }
            return;
        case TK_TEXT: {
            node *x = mknode(P, NODE_TEXT, t->line);
            x->text = t->s;
            x->text_len = t->n;
            nl_push(P, out, x);
            P->i++;
            break;
        }
        case TK_VAR_BEGIN: {
            P->i++;
            node *x = mknode(P, NODE_OUTPUT, t->line);
            x->a = parse_tuple_expr(P, 0);
            if (cur(P)->kind != TK_VAR_END)
                unexpected(P, "end of print statement");
            P->i++;
            nl_push(P, out, x);
            break;
        }
        case TK_BLOCK_BEGIN: {
            P->i++;
            struct jtok *nt = cur(P);
            if (nt->kind == TK_NAME && ends && name_in(nt->s, ends)) {
                *which = nt->s;
                P->i++;
                return;
            }
            if (nt->kind == TK_NAME && (!strncmp(nt->s, "end", 3) || !strcmp(nt->s, "elif") || !strcmp(nt->s, "else")))
                jfail(P->a, "line %d: Encountered unknown tag '%s'.", nt->line, nt->s);
            nl_push(P, out, parse_statement(P));
            break;
        }
        default:
            unexpected(P, NULL);
        }
    }
}

struct hy_jinja *hy_jinja_parse(const char *src, size_t len)
{
    if (!src && len)
        return hy_err_set("jinja: no template text"), NULL;
    /* valid UTF-8 only (Python reads the template as str) */
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)src[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!l || i + l > len || c == 0xc0 || c == 0xc1 || c > 0xf4)
            goto bad;
        for (size_t k = 1; k < l; k++)
            if (((unsigned char)src[i + k] & 0xc0) != 0x80)
                goto bad;
        if (l == 3) {
            uint32_t cp = ((uint32_t)(c & 0xf) << 12) | ((uint32_t)(src[i + 1] & 0x3f) << 6);
            if (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))
                goto bad;
        }
        if (l == 4 &&
            ((c == 0xf0 && (unsigned char)src[i + 1] < 0x90) || (c == 0xf4 && (unsigned char)src[i + 1] > 0x8f)))
            goto bad;
        i += l;
        continue;
    bad : {
        int line = 1;
        for (size_t k = 0; k < i; k++)
            line += src[k] == '\n';
        hy_err_set("line %d: template is not valid UTF-8", line);
        return NULL;
    }
    }
    struct hy_jinja *t = calloc(1, sizeof *t);
    if (!t)
        return hy_err_set("out of memory"), NULL;
    jmp_buf jb;
    t->arena.jb = &jb;
    t->arena.limit = 0;
    if (setjmp(jb)) {
        jarena_free(&t->arena);
        free(t);
        return NULL;
    }
    struct parser P = {.a = &t->arena};
    P.t = jlex(&t->arena, src ? src : "", len, &P.n);
    struct nlist body = {0};
    parse_body(&P, &body, NULL, NULL);
    t->body = body.v;
    t->n_body = body.n;
    t->arena.jb = NULL;
    return t;
}

void hy_jinja_free(struct hy_jinja *t)
{
    if (!t)
        return;
    jarena_free(&t->arena);
    free(t);
}
