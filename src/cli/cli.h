/* Helpers shared by the CLI commands: reading series and grids. Messages go to stderr here,
 * since this is the program's edge, never the library's. */
#ifndef TF_CLI_H
#define TF_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* The embedded default data set (default_data.S). */
extern const double tf_default_close[];
extern const uint64_t tf_default_close_bytes;

/* How to read a close series (tf_cli_read_series_ex): the CLI's face of tf_prices_opts
 * (tollfree/prices.h, whose comments give each rule). */
typedef struct tf_cli_series_opts {
    const char *column;      /* the close column: a header name, any case, or a 1-based number
                                (NULL: close) */
    const char *date_column; /* NULL: found by name, else by content; "none"; a header name ("":
                                the unnamed column); a 1-based number */
    int raw;                 /* raw little-endian f64 whatever the name */
    int skip_bad_rows;       /* skip and count bad rows instead of failing */
    char sep;                /* ',', ';' or '\t'; 0: found from the first line */
    int assume_sorted;       /* the rows are oldest first: dates unchecked (said on stderr) */
    int keep_dates;          /* keep each bar's date cell text in the info (dates, date_off) */
} tf_cli_series_opts;

/* What reading found (for the summary and the report). */
typedef struct tf_cli_series_info {
    int64_t skipped;  /* bad rows skipped (skip_bad_rows) */
    int reversed;     /* the dates ran newest first; the series was reversed */
    int date_checked; /* a date column was found and the bar order checked */
    char column[128]; /* the close column's header name (or its 1-based index) */
    char date_column[128];
    /* keep_dates and a date column: bar i's date cell is dates[date_off[i] .. date_off[i+1])
     * (malloc'd copies, the caller frees both); else NULL */
    char *dates;
    int64_t *date_off;
    int64_t *times; /* keep_dates: each bar's time, ns since 1970 UTC (malloc'd); NULL without
                       parsed dates (none, or --assume-sorted) */
} tf_cli_series_info;

/* The series options every command that reads --input shares: their getopt codes, the rows of
 * a struct option table (TF_CLI_SERIES_OPTIONS, inside the command's own table; needs
 * <getopt.h>), their --help lines (tf_cli_series_help) and one handler. */
enum {
    TF_CLI_OPT_COLUMN = 0x5300,
    TF_CLI_OPT_DATE_COLUMN,
    TF_CLI_OPT_RAW,
    TF_CLI_OPT_SKIP_BAD_ROWS,
    TF_CLI_OPT_SEP,
    TF_CLI_OPT_ASSUME_SORTED,
};
/* clang-format off */
#define TF_CLI_SERIES_OPTIONS                                                                      \
    {"column", required_argument, 0, TF_CLI_OPT_COLUMN},                                           \
    {"date-column", required_argument, 0, TF_CLI_OPT_DATE_COLUMN},                                 \
    {"raw", no_argument, 0, TF_CLI_OPT_RAW},                                                       \
    {"skip-bad-rows", no_argument, 0, TF_CLI_OPT_SKIP_BAD_ROWS},                                   \
    {"sep", required_argument, 0, TF_CLI_OPT_SEP},                                                 \
    {"assume-sorted", no_argument, 0, TF_CLI_OPT_ASSUME_SORTED}
/* clang-format on */
extern const char tf_cli_series_help[];
/* Takes getopt's (c, optarg) into o when c is a series option: 0; 2 after one line on stderr (a
 * --sep that is not ',' ';' or tab); 1 when c is no series option (the caller's own). */
int tf_cli_series_option(int c, const char *arg, tf_cli_series_opts *o);

/* Reads a close series from path ("-" is stdin) with the library's reader (tf_prices_read_path:
 * streamed; raw f64 for *.f64/.bin/.raw or o->raw, else CSV). On success *out is a malloc'd array
 * of *n values, oldest first, the reader's notes are printed as "tollfree: ..." lines on stderr
 * and *info (may be NULL) says what was done. On failure prints the reader's one line
 * "tollfree: FILE:LINE: column K 'NAME': WHAT: 'CELL' (what to do)" and returns -1. */
int tf_cli_read_series_ex(const char *path, const tf_cli_series_opts *o, double **out, int64_t *n,
                          tf_cli_series_info *info);
/* tf_cli_read_series_ex with a column name and raw flag, everything else default. */
int tf_cli_read_series(const char *path, const char *column, int raw, double **out, int64_t *n);

/* Parses --grid: "default", "LO:HI:N" (N Hull lengths LO + j*(HI-LO)/(N-1)), or a CSV FILE of
 * six integer columns (L,half,sq,p,p3,p2; an optional header line). On success *out is a malloc'd
 * int64 [n][6]. On failure prints one line and returns -2 for a malformed LO:HI:N (a usage error,
 * exit 2), -1 for a grid file that cannot be read or parsed (exit 1). */
int tf_cli_read_grid(const char *spec, int64_t **out, int64_t *n);

/* Parses --fee by the library's tf_fee_parse (percent points per closed trade, finite,
 * 0 <= fee < 100). On failure prints one line naming cmd ("tollfree sweep", ...) and returns -1. */
int tf_cli_parse_fee(const char *cmd, const char *arg, double *fee);

/* Runs getopt_long over argv (options only) and hands each option to take(c, optarg, ctx), which
 * returns 0 or, after one line on stderr, non-zero. Returns -1 when every option was taken, 0 at
 * -h/--help (the caller prints its usage), 2 after one line on stderr naming cmd ("tollfree
 * sweep"): an unknown option, a missing value, a positional argument, or take refused. */
struct option;
int tf_cli_options(const char *cmd, int argc, char **argv, const struct option *opts,
                   int (*take)(int c, const char *arg, void *ctx), void *ctx);

/* Whole file into a NUL-terminated malloc'd buffer; -errno on failure. */
int tf_cli_slurp(const char *path, char **out, size_t *len);

/* An output file written whole or not at all (journal gen, engine gen): the writer writes and
 * syncs o->tmp (PATH.tmp), which tf_cli_out_commit renames over PATH. SIGINT and SIGTERM between
 * begin and commit only set tf_cli_interrupted: the writer stops at the next record, and commit
 * removes the temporary instead. */
typedef struct tf_cli_out {
    const char *path;
    const char *cmd; /* "journal gen": messages start "tollfree journal gen: " */
    char tmp[4096];
} tf_cli_out;
extern volatile sig_atomic_t tf_cli_interrupted;
/* Refuses (one line on stderr, -1) when PATH exists and !force, or when count records of at most
 * per_record bytes plus fixed bytes do not fit in 95% of the free space of PATH's file system;
 * else sets o->tmp, removes a stale PATH.tmp, catches SIGINT/SIGTERM, returns 0. */
int tf_cli_out_begin(tf_cli_out *o, const char *cmd, const char *path, int force, uint64_t count,
                     uint64_t per_record, uint64_t fixed);
/* ok: the writer finished and synced o->tmp. Renames it over PATH (and syncs the directory), or
 * (not ok, interrupted, or the rename failed) removes it and says why. Restores the default
 * signal handlers. Returns 0 when PATH was written; -1 with a line on stderr otherwise, and when
 * PATH is in place but its directory could not be synced (tfu_sync_parent_dir). */
int tf_cli_out_commit(tf_cli_out *o, int ok);

/* The Python side of a command (python.c): argv = {interpreter, "-m", module, args..., NULL}
 * (malloc'd; NULL on failure, errno set) after PYTHONPATH / TOLLFREE_LIB / TOLLFREE_BIN are set
 * for the child; the interpreter is $TOLLFREE_PYTHON, else /usr/bin/python3, else python3.
 * tf_cli_python_exec replaces this process with it; it returns (1) only after printing why it
 * could not. */
char **tf_cli_python_argv(const char *module, int nargs, char *const *args);
int tf_cli_python_exec(const char *what, const char *module, int nargs, char *const *args);

#endif
