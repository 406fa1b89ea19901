/* The research part's internal header (src/research): date cells. Not installed. */
#ifndef TF_RESEARCH_INTERNAL_H
#define TF_RESEARCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* The forms of a date cell (docs/research.md, "Price files"). A column keeps the form of its
 * first date: a later cell in another form is "not a date like the rows before". */
typedef enum tfr_date_form {
    TFR_DATE_NONE = 0,
    TFR_DATE_YMD,     /* 2024-01-02, 2024/01/02, 2024.01.02 (+ time) */
    TFR_DATE_YMD8,    /* 20240102 (+ time) */
    TFR_DATE_DMY_DOT, /* 02.01.2024 */
    TFR_DATE_AB_Y,    /* 01/02/2024 or 01-02-2024: month-first or day-first, the file decides */
    TFR_DATE_D_MON_Y, /* 02-Jan-2024, 2 January 2024 */
    TFR_DATE_MON_D_Y, /* Jan 02 2024, January 2, 2024 */
    TFR_DATE_Y_MON_D, /* 2024-Jan-02 */
    TFR_DATE_EPOCH,   /* a plain number: epoch seconds, ms, us or ns by its size */
} tfr_date_form;

/* A parsed date cell, before it becomes a time (tfr_date_time). */
typedef struct tfr_date {
    tfr_date_form form;
    int64_t year;
    int a, b;           /* YMD-like forms: month, day; TFR_DATE_AB_Y: the first and second parts */
    int64_t day_ns;     /* time of day, ns */
    int64_t offset_s;   /* the cell's UTC offset (+01:00 is 3600); 0 without one */
    int64_t epoch_int;  /* TFR_DATE_EPOCH: the integer part (sign applied) */
    int64_t epoch_frac; /* its fraction in units of 1e-9 of the unit (same sign) */
} tfr_date;

/* Parses the trimmed cell [s, e). 0 and *d on success; -1 when it is no date form tollfree reads
 * (bad month or day numbers included: 2024-02-30 is no date). */
int tfr_date_parse(const char *s, const char *e, tfr_date *d);
/* The same without the fast path for "YYYY-MM-DD[ HH:MM:SS]" (tests check the two agree). */
int tfr_date_parse_general(const char *s, const char *e, tfr_date *d);

/* The unit of epoch numbers whose integer part is v: 1 (s), 1000 (ms), 1000000 (us) or
 * 1000000000 (ns), by its size (below 1e11 seconds, 1e14 ms, 1e17 us, else ns). */
int64_t tfr_epoch_unit(int64_t v);

/* The time of d in ns since 1970-01-01 UTC (a cell without an offset is taken as UTC).
 * day_first says how TFR_DATE_AB_Y reads (1: 02/01/2024 is 2 January); per_second is the epoch
 * unit (tfr_epoch_unit of the column's first cell). 0, or -1 when it is no valid date under that
 * reading, -2 when it is outside what int64 ns hold (1678 to 2261). */
int tfr_date_time(const tfr_date *d, int day_first, int64_t per_second, int64_t *ns);

/* A short name of the form for messages ("YYYY-MM-DD", "MM/DD/YYYY", ...). */
const char *tfr_date_form_name(tfr_date_form f, int day_first);

/* What one read produced (tollfree/prices.h's opaque tf_prices). */
struct tf_prices {
    char *name;
    double *close;  /* NULL once taken */
    int64_t n;      /* bars */
    int64_t *times; /* n, or NULL */
    char *dtext;    /* keep_dates: the date cells back to back */
    int64_t *doff;  /* n + 1 offsets into dtext */
    int64_t skipped, first_bad_line;
    int reversed, date_checked, assumed_sorted, header, col, dcol, sep, raw, day_first;
    char column[128], date_column[128], date_form[32];
    char *notes; /* "" when none */
    size_t notes_len;
};

#endif
