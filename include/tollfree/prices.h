/* Price files and close series: one reader (CSV or raw f64) and one check, used by the
 * `tollfree` program and the Python package alike. docs/research.md, "Price files", gives the
 * rules: the header line, the close and date columns, the forms of dates and their order, the
 * separators, and every refusal. */
#ifndef TOLLFREE_PRICES_H
#define TOLLFREE_PRICES_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks a close series: 0 when every one of close[0..n) is a positive finite number (the pnl
 * divides by the entry price); TF_E_BAD_INPUT with *first_bad (may be NULL) set to the index of
 * the first value that is not; TF_E_NULL_ARG when close is NULL and n > 0; TF_E_INVALID_ARG
 * when n < 0. */
TF_API int tf_prices_check(const double *close, int64_t n, int64_t *first_bad);

/* How to read a price file. Zero-initialised means every default. A growable struct: size is 0
 * or sizeof(tf_prices_opts) as the caller knows it (the library's rule for such structs: fields
 * are only appended and a new field's zero is its default). */
typedef struct tf_prices_opts {
    size_t size;
    const char *name;        /* the file's name in messages; NULL: the path, "<stdin>" for "-"
                                and fd 0, "<fd N>", "<buffer>" */
    const char *column;      /* the close column: a header name, any case, or a 1-based number;
                                NULL: "close" */
    const char *date_column; /* NULL: found (a column named date, datetime, time, timestamp, ...,
                                else the first column, named or not, whose first cell is a date);
                                "none": no date column; a header name, any case ("" is the column
                                with an empty name, as pandas writes its index); a 1-based number */
    int raw;                 /* raw little-endian f64 (read_path: also for *.f64, *.bin, *.raw) */
    int skip_bad_rows;       /* skip and count rows whose close or date cell is bad, or that are
                                short, instead of refusing the first */
    int sep;                 /* ',', ';' or '\t'; 0: found from the first line */
    int assume_sorted;       /* the caller says the rows are oldest first: dates are not parsed,
                                checked or reordered (said in the notes) */
    int keep_dates;          /* keep each bar's date cell text (tf_prices_dates) */
} tf_prices_opts;

/* What one read produced: an opaque handle, freed with tf_prices_free. */
typedef struct tf_prices tf_prices;

/* Reads a price file into *out. path "-" is stdin. The file is streamed: memory holds the close
 * column, 8 bytes a bar of parsed times when there is a date column, the date text only with
 * keep_dates, and one line; never the file. o may be NULL (defaults). On failure, *out is NULL
 * and msg (msg_cap bytes, always NUL-terminated when msg_cap > 0; may be NULL when msg_cap is 0)
 * holds one line without a newline: "FILE:LINE: column K 'NAME': WHAT: 'CELL' (what to do)", or
 * "FILE: WHAT (what to do)" where no line is at fault. Returns 0; TF_E_BAD_INPUT (the file is
 * refused); -errno (open or read failed, e.g. -ENOENT, -EISDIR); TF_E_NOMEM; TF_E_LIMIT (more
 * than TF_MAX_BARS bars, a line over 64 MiB, more than 4096 fields); TF_E_NULL_ARG (out or path
 * NULL); TF_E_INVALID_ARG (o->size, o->sep not one of 0 ',' ';' '\t'). Library code never
 * prints: the caller prints msg and the notes (tf_prices_text). */
TF_API int tf_prices_read_path(tf_prices **out, const char *path, const tf_prices_opts *o,
                               char *msg, size_t msg_cap);
/* The same from an open descriptor (read to its end, not closed). */
TF_API int tf_prices_read_fd(tf_prices **out, int fd, const tf_prices_opts *o, char *msg,
                             size_t msg_cap);
/* The same from len bytes at data (not kept past the call; data may be NULL when len is 0). */
TF_API int tf_prices_read_buffer(tf_prices **out, const void *data, size_t len,
                                 const tf_prices_opts *o, char *msg, size_t msg_cap);

/* Frees p and everything its accessors returned; NULL is fine. */
TF_API void tf_prices_free(tf_prices *p);

/* The closes, oldest first, *n of them (n may be NULL); valid until tf_prices_free or
 * tf_prices_take. NULL for a NULL p. */
TF_API const double *tf_prices_values(const tf_prices *p, int64_t *n);
/* Hands the malloc'd close array over to the caller (who frees it with free()); p keeps its other
 * results and no longer has values. NULL when already taken or p is NULL. */
TF_API double *tf_prices_take(tf_prices *p, int64_t *n);
/* Each bar's time in ns since 1970-01-01 UTC (a date without an offset is taken as UTC; epoch
 * numbers by their size: seconds, ms, us or ns), oldest first, n of them; NULL when there is no
 * date column or with assume_sorted. Valid until tf_prices_free. */
TF_API const int64_t *tf_prices_times(const tf_prices *p);
/* With keep_dates and a date column: the date cells' text, oldest first, bar i being bytes
 * [off[i], off[i+1]) (not NUL-separated; n + 1 offsets in *offsets); else NULL. Valid until
 * tf_prices_free. */
TF_API const char *tf_prices_dates(const tf_prices *p, const int64_t **offsets);

/* Numbers about the read, for tf_prices_get. */
typedef enum tf_prices_key {
    TF_PRICES_BARS = 1,           /* bars read (also after tf_prices_take) */
    TF_PRICES_SKIPPED = 2,        /* rows skipped (skip_bad_rows; raw: values) */
    TF_PRICES_FIRST_BAD_LINE = 3, /* the line of the first skipped row (raw: value number) */
    TF_PRICES_REVERSED = 4,       /* 1: the dates ran newest first and the bars were reversed */
    TF_PRICES_DATE_CHECKED = 5,   /* 1: a date column was parsed and the bar order checked */
    TF_PRICES_ASSUMED_SORTED = 6, /* 1: assume_sorted was given */
    TF_PRICES_HEADER = 7,         /* 1: the first line was a header line */
    TF_PRICES_COLUMN_INDEX = 8,   /* the close column, 0-based; -1 for raw */
    TF_PRICES_DATE_INDEX = 9,     /* the date column, 0-based; -1 when none */
    TF_PRICES_SEP = 10,           /* the separator's byte (',' ';' '\t'); 0 for raw */
    TF_PRICES_RAW = 11,           /* 1: read as raw f64 */
    TF_PRICES_DAY_FIRST = 12,     /* nn/nn/yyyy dates: 1 day-first, 0 month-first, -1 no date
                                     decided (both readings gave the same order; times are
                                     month-first); 0 for other forms */
} tf_prices_key;

/* *value = the number key names. 0, TF_E_NULL_ARG (p or value NULL), TF_E_INVALID_ARG (an
 * unknown key). */
TF_API int tf_prices_get(const tf_prices *p, int key, int64_t *value);

/* Texts about the read, for tf_prices_text. */
typedef enum tf_prices_text_key {
    TF_PRICES_NAME = 1,        /* the name used in messages */
    TF_PRICES_COLUMN = 2,      /* the close column's header name (without a header: "K", its
                                  1-based number); "" for raw */
    TF_PRICES_DATE_COLUMN = 3, /* the date column's header name ("" when none or unnamed) */
    TF_PRICES_DATE_FORM = 4,   /* "YYYY-MM-DD", "MM/DD/YYYY", "epoch", ...; "" when none */
    TF_PRICES_NOTES = 5,       /* what reading did that changes nothing silently: one line per
                                  note ("FILE: ..."), newline-separated, "" when none */
} tf_prices_text_key;

/* The NUL-terminated text key names (valid until tf_prices_free); NULL for a NULL p or an unknown
 * key. */
TF_API const char *tf_prices_text(const tf_prices *p, int key);

#ifdef __cplusplus
}
#endif

#endif
