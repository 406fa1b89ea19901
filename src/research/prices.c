/* Close series: the check, and what a read produced (prices.h). */
#include <math.h>
#include <stdlib.h>

#include "research/research_internal.h"
#include "tollfree/error.h"
#include "tollfree/prices.h"

int tf_prices_check(const double *close, int64_t n, int64_t *first_bad)
{
    if (n < 0)
        return TF_E_INVALID_ARG;
    if (n > 0 && !close)
        return TF_E_NULL_ARG;
    for (int64_t i = 0; i < n; i++)
        if (!(isfinite(close[i]) && close[i] > 0)) {
            if (first_bad)
                *first_bad = i;
            return TF_E_BAD_INPUT;
        }
    return 0;
}

void tf_prices_free(tf_prices *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->close);
    free(p->times);
    free(p->dtext);
    free(p->doff);
    free(p->notes);
    free(p);
}

const double *tf_prices_values(const tf_prices *p, int64_t *n)
{
    if (n)
        *n = p && p->close ? p->n : 0;
    return p ? p->close : NULL;
}

double *tf_prices_take(tf_prices *p, int64_t *n)
{
    if (n)
        *n = p && p->close ? p->n : 0;
    if (!p)
        return NULL;
    double *c = p->close;
    p->close = NULL;
    return c;
}

const int64_t *tf_prices_times(const tf_prices *p)
{
    return p && p->date_checked ? p->times : NULL;
}

const char *tf_prices_dates(const tf_prices *p, const int64_t **offsets)
{
    const int64_t *off = p && p->doff ? p->doff : NULL;
    if (offsets)
        *offsets = off;
    return off ? (p->dtext ? p->dtext : "") : NULL;
}

int tf_prices_get(const tf_prices *p, int key, int64_t *value)
{
    if (!p || !value)
        return TF_E_NULL_ARG;
    switch (key) {
    case TF_PRICES_BARS:
        *value = p->n;
        return 0;
    case TF_PRICES_SKIPPED:
        *value = p->skipped;
        return 0;
    case TF_PRICES_FIRST_BAD_LINE:
        *value = p->first_bad_line;
        return 0;
    case TF_PRICES_REVERSED:
        *value = p->reversed;
        return 0;
    case TF_PRICES_DATE_CHECKED:
        *value = p->date_checked;
        return 0;
    case TF_PRICES_ASSUMED_SORTED:
        *value = p->assumed_sorted;
        return 0;
    case TF_PRICES_HEADER:
        *value = p->header;
        return 0;
    case TF_PRICES_COLUMN_INDEX:
        *value = p->col;
        return 0;
    case TF_PRICES_DATE_INDEX:
        *value = p->dcol;
        return 0;
    case TF_PRICES_SEP:
        *value = p->sep;
        return 0;
    case TF_PRICES_RAW:
        *value = p->raw;
        return 0;
    case TF_PRICES_DAY_FIRST:
        *value = p->day_first;
        return 0;
    default:
        return TF_E_INVALID_ARG;
    }
}

const char *tf_prices_text(const tf_prices *p, int key)
{
    if (!p)
        return NULL;
    switch (key) {
    case TF_PRICES_NAME:
        return p->name;
    case TF_PRICES_COLUMN:
        return p->column;
    case TF_PRICES_DATE_COLUMN:
        return p->date_column;
    case TF_PRICES_DATE_FORM:
        return p->date_form;
    case TF_PRICES_NOTES:
        return p->notes;
    default:
        return NULL;
    }
}
