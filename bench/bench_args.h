/* A benchmark's command line: NAME VALUE options and flags from a table, -h / --help, and operands
 * (bench_replay's journal). A benchmark runs for minutes, so what it does not understand stops it
 * before it starts: --help prints the usage to stdout and exits 0; an unknown option, an option
 * without its value, a value that is not a whole number of the option's type (or is out of its
 * range) and an operand too many print "PROGRAM: what is wrong" and the usage to stderr and exit 2.
 * The usage is made from the table, so it lists every option there is. The parse is libc's
 * getopt_long, as the tollfree CLI's (src/cli/options.c). No allocation.
 * Header-only: each bench_*.c is its own program. */
#ifndef TF_BENCH_ARGS_H
#define TF_BENCH_ARGS_H

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum bench_opt_kind {
    BENCH_OPT_FLAG, /* int *, set to 1; takes no value */
    BENCH_OPT_INT,  /* int * */
    BENCH_OPT_U32,  /* uint32_t * */
    BENCH_OPT_I64,  /* int64_t * */
    BENCH_OPT_U64,  /* uint64_t * */
    BENCH_OPT_STR,  /* const char **: the argv string itself (it lives as long as main) */
} bench_opt_kind;

typedef struct bench_opt {
    const char *name; /* "--rounds" */
    bench_opt_kind kind;
    void *value;      /* written only when the option is given, so it holds the default */
    const char *arg;  /* the value's name in the usage ("N", "PATH"); NULL for a flag */
    const char *help; /* its text in the usage, with the default; '\n' starts another line */
} bench_opt;

typedef struct bench_args {
    const bench_opt *opts;
    size_t n_opts;
    const char *operands;      /* the usage's words for them ("JOURNAL.ofl"), NULL where none */
    const char *operands_help; /* their line in the usage, with a default; NULL: no line */
    const char *prog;          /* argv[0]'s base name, set by bench_args_parse */
} bench_args;

/* bench_args args = BENCH_ARGS(opts, NULL); with opts an array (not a pointer). */
#define BENCH_ARGS(opts_, operands_) BENCH_ARGS_OPERANDS(opts_, operands_, NULL)

/* The same with a line for optional operands, e.g. their default:
 * BENCH_ARGS_OPERANDS(opts, "[OUT.json]", "the JSON report (default out.json)"). */
#define BENCH_ARGS_OPERANDS(opts_, operands_, operands_help_)                                      \
    ((bench_args){.opts = (opts_),                                                                 \
                  .n_opts = sizeof(opts_) / sizeof((opts_)[0]),                                    \
                  .operands = (operands_),                                                         \
                  .operands_help = (operands_help_)})

/* A macro's value in a help string: "(1.." BENCH_ARGS_STR(MAX_ROUNDS) ")". */
#define BENCH_ARGS_STR(x) BENCH_ARGS_STR_(x)
#define BENCH_ARGS_STR_(x) #x

/* "--rounds N" into left[n]; its length. */
static inline int bench_opt_left(const bench_opt *o, char *left, size_t n)
{
    return snprintf(left, n, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

/* One option's lines: a '\n' in help goes on under the help's column. */
static inline void bench_usage_line(FILE *out, int width, const char *left, const char *help)
{
    fprintf(out, "  %-*s  ", width, left);
    for (const char *p = help; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fprintf(out, "%*s", width + 4, "");
    }
    fputc('\n', out);
}

static inline void bench_args_usage(const bench_args *a, FILE *out)
{
    char left[64];
    int width = (int)strlen("-h, --help");
    if (a->operands_help && (int)strlen(a->operands) > width)
        width = (int)strlen(a->operands);
    for (size_t i = 0; i < a->n_opts; i++) {
        int n = bench_opt_left(&a->opts[i], left, sizeof left);
        width = n > width ? n : width;
    }
    fprintf(out, "usage: %s%s%s [OPTION]...\n", a->prog, a->operands ? " " : "",
            a->operands ? a->operands : "");
    if (a->operands_help)
        bench_usage_line(out, width, a->operands, a->operands_help);
    for (size_t i = 0; i < a->n_opts; i++) {
        bench_opt_left(&a->opts[i], left, sizeof left);
        bench_usage_line(out, width, left, a->opts[i].help);
    }
    bench_usage_line(out, width, "-h, --help", "print this and exit");
}

/* For the parse and for a program's own checks after it: "PROGRAM: MESSAGE" and the usage on
 * stderr, then exit 2. */
__attribute__((format(printf, 2, 3))) static inline _Noreturn void
bench_args_refuse(const bench_args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", a->prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    bench_args_usage(a, stderr);
    exit(2);
}

/* s as a whole number of o's kind into o->value: 0, -EINVAL (not a number) or -ERANGE. */
static inline int bench_opt_set_number(const bench_opt *o, const char *s)
{
    int is_signed = o->kind == BENCH_OPT_INT || o->kind == BENCH_OPT_I64;
    long long v = 0;
    unsigned long long u = 0;
    char *end;
    errno = 0;
    if (is_signed)
        v = strtoll(s, &end, 10);
    else
        u = strtoull(s, &end, 10);
    if (end == s || *end)
        return -EINVAL;
    if (errno == ERANGE || (!is_signed && strchr(s, '-'))) /* strtoull takes "-1" as its max */
        return -ERANGE;
    switch (o->kind) {
    case BENCH_OPT_INT:
        if (v < INT_MIN || v > INT_MAX)
            return -ERANGE;
        *(int *)o->value = (int)v;
        break;
    case BENCH_OPT_U32:
        if (u > UINT32_MAX)
            return -ERANGE;
        *(uint32_t *)o->value = (uint32_t)u;
        break;
    case BENCH_OPT_I64:
        *(int64_t *)o->value = (int64_t)v;
        break;
    default:
        *(uint64_t *)o->value = (uint64_t)u;
        break;
    }
    return 0;
}

#define BENCH_ARGS_MAX 32 /* options a table may have */

/* Parses argv into the table's values with getopt_long (so --name=value and unambiguous
 * abbreviations work as in the tollfree CLI); the operands (what getopt leaves) go to
 * operands[0..max_operands) in order. Returns how many there were; exits as the top says. */
static inline int bench_args_parse(bench_args *a, int argc, char **argv, const char **operands,
                                   int max_operands)
{
    const char *slash = argc > 0 ? strrchr(argv[0], '/') : NULL;
    a->prog = argc < 1 ? "bench" : slash ? slash + 1 : argv[0];
    if (a->n_opts > BENCH_ARGS_MAX)
        bench_args_refuse(a, "more than %d options in the table", BENCH_ARGS_MAX);
    struct option lo[BENCH_ARGS_MAX + 2];
    for (size_t k = 0; k < a->n_opts; k++) /* every name is "--" and the long name */
        lo[k] = (struct option){a->opts[k].name + 2,
                                a->opts[k].kind == BENCH_OPT_FLAG ? no_argument : required_argument,
                                NULL, 256 + (int)k};
    lo[a->n_opts] = (struct option){"help", no_argument, NULL, 'h'};
    lo[a->n_opts + 1] = (struct option){0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        if (c == 'h') {
            bench_args_usage(a, stdout);
            exit(0);
        }
        if (c == ':')
            bench_args_refuse(a, "%s needs a value", argv[optind - 1]);
        if (c == '?')
            bench_args_refuse(a, "unknown option %s", argv[optind - 1]);
        const bench_opt *o = &a->opts[c - 256];
        if (o->kind == BENCH_OPT_FLAG)
            *(int *)o->value = 1;
        else if (o->kind == BENCH_OPT_STR)
            *(const char **)o->value = optarg;
        else {
            int rc = bench_opt_set_number(o, optarg);
            if (rc == -EINVAL)
                bench_args_refuse(a, "%s: '%s' is not a whole number", o->name, optarg);
            if (rc == -ERANGE)
                bench_args_refuse(a, "%s: %s is out of range", o->name, optarg);
        }
    }
    int n_operands = 0;
    for (; optind < argc; optind++) {
        if (n_operands == max_operands)
            bench_args_refuse(a, "unexpected argument %s", argv[optind]);
        operands[n_operands++] = argv[optind];
    }
    return n_operands;
}

#endif
