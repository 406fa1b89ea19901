/* Date cells of price files: the forms people's files have, parsed exactly into ns since the
 * epoch (research_internal.h). */
#include <ctype.h>
#include <string.h>

#include "research/research_internal.h"

typedef struct cur {
    const char *p, *e;
} cur;

/* Digits at c->p: how many (0: none); *v their value while it fits (at most 18 digits). */
static int digits(cur *c, int64_t *v)
{
    int n = 0;
    int64_t x = 0;
    while (c->p < c->e && *c->p >= '0' && *c->p <= '9') {
        if (n < 18)
            x = 10 * x + (*c->p - '0');
        n++;
        c->p++;
    }
    *v = x;
    return n;
}

/* One or two digits at c->p: 1 and *v, else 0. */
static int d12(cur *c, int64_t *v)
{
    int n = digits(c, v);
    return n == 1 || n == 2;
}

static int at(const cur *c, char ch)
{
    return c->p < c->e && *c->p == ch;
}

static int skip_spaces(cur *c)
{
    int n = 0;
    while (c->p < c->e && *c->p == ' ')
        c->p++, n++;
    return n;
}

/* A word of letters at c->p (consumed) as [*ws, *we). */
static int word(cur *c, const char **ws, const char **we)
{
    *ws = c->p;
    while (c->p < c->e && isalpha((unsigned char)*c->p))
        c->p++;
    *we = c->p;
    return (int)(*we - *ws);
}

static int word_is(const char *s, const char *e, const char *w)
{
    size_t n = (size_t)(e - s);
    if (n != strlen(w))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[i]) != w[i])
            return 0;
    return 1;
}

static const char *const months[12] = {"january",   "february", "march",    "april",
                                       "may",       "june",     "july",     "august",
                                       "september", "october",  "november", "december"};
static const char *const weekdays[7] = {"monday", "tuesday",  "wednesday", "thursday",
                                        "friday", "saturday", "sunday"};

/* A month (1..12) or weekday (1..7) name: the full name or its first three letters ("sept"
 * too); 0 when it is none. */
static int name_in(const char *s, const char *e, const char *const *names, int count)
{
    size_t n = (size_t)(e - s);
    for (int k = 0; k < count; k++) {
        size_t full = strlen(names[k]);
        if (n != 3 && n != full && !(k == 8 && count == 12 && n == 4))
            continue;
        int ok = 1;
        for (size_t i = 0; ok && i < n; i++)
            ok = tolower((unsigned char)s[i]) == names[k][i];
        if (ok)
            return k + 1;
    }
    return 0;
}

static int month_word(cur *c)
{
    const char *ws, *we;
    if (!word(c, &ws, &we))
        return 0;
    return name_in(ws, we, months, 12);
}

static int leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap(y) ? 29 : dim[m - 1];
}

static int valid_ymd(int64_t y, int m, int d)
{
    return y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= days_in_month(y, m);
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* [+-]hh[[:]mm] or Z / UTC / GMT at c->p, to the end of the cell. */
static int zone(cur *c, int64_t *offset_s)
{
    *offset_s = 0;
    if (c->p == c->e)
        return 0;
    if (at(c, 'Z') || at(c, 'z')) {
        c->p++;
        return c->p == c->e ? 0 : -1;
    }
    if (at(c, '+') || at(c, '-')) {
        int neg = *c->p++ == '-';
        int64_t hh, mm = 0;
        int n = digits(c, &hh);
        if (n == 4) {
            mm = hh % 100;
            hh /= 100;
        } else if (n == 2 && at(c, ':')) {
            c->p++;
            if (digits(c, &mm) != 2)
                return -1;
        } else if (n != 2)
            return -1;
        if (hh > 23 || mm > 59 || c->p != c->e)
            return -1;
        *offset_s = (neg ? -1 : 1) * (hh * 3600 + mm * 60);
        return 0;
    }
    const char *ws, *we;
    word(c, &ws, &we);
    if ((word_is(ws, we, "utc") || word_is(ws, we, "gmt")) && c->p == c->e)
        return 0;
    return -1;
}

/* The time part after a date: ('T' | spaces) HH:MM[:SS[.f]] [AM|PM] [zone]; or nothing. */
static int time_part(cur *c, tfr_date *d)
{
    if (c->p == c->e)
        return 0;
    if (at(c, 'T') || at(c, 't'))
        c->p++;
    else if (!skip_spaces(c))
        return -1;
    int64_t hh, mm, ss = 0, frac = 0;
    if (!d12(c, &hh) || !at(c, ':'))
        return -1;
    c->p++;
    if (digits(c, &mm) != 2)
        return -1;
    if (at(c, ':')) {
        c->p++;
        if (digits(c, &ss) != 2)
            return -1;
        if (at(c, '.') || at(c, ',')) {
            c->p++;
            int n = 0;
            while (c->p < c->e && *c->p >= '0' && *c->p <= '9') {
                if (n < 9)
                    frac = 10 * frac + (*c->p - '0');
                n++;
                c->p++;
            }
            if (!n)
                return -1;
            for (; n < 9; n++)
                frac *= 10;
        }
    }
    skip_spaces(c);
    const char *ws, *we;
    cur w = *c;
    word(&w, &ws, &we);
    int ampm = word_is(ws, we, "am") ? 1 : word_is(ws, we, "pm") ? 2 : 0;
    if (ampm) { /* 12 AM is midnight, 12 PM noon */
        if (hh < 1 || hh > 12)
            return -1;
        hh = hh % 12 + (ampm == 2 ? 12 : 0);
        *c = w;
        skip_spaces(c);
    }
    if (zone(c, &d->offset_s))
        return -1;
    if (hh > 23 || mm > 59 || ss > 59)
        return -1;
    d->day_ns = ((hh * 60 + mm) * 60 + ss) * 1000000000 + frac;
    return 0;
}

/* A plain number [s, e): [+-]digits[.digits]. */
static int plain_number(const char *s, const char *e, tfr_date *d)
{
    cur c = {s, e};
    int neg = 0, sign = 0;
    if (at(&c, '+') || at(&c, '-'))
        neg = *c.p++ == '-', sign = 1;
    int64_t v;
    const char *ds = c.p;
    int n = digits(&c, &v);
    if (n > 18) { /* up to 19 digits of ns: 9223372036854775807 at most */
        if (n > 19)
            return -1;
        v = 0;
        for (const char *p = ds; p < c.p; p++) {
            if (v > (INT64_MAX - (*p - '0')) / 10)
                return -1;
            v = 10 * v + (*p - '0');
        }
    }
    int64_t frac = 0;
    int fn = 0;
    if (at(&c, '.')) {
        c.p++;
        while (c.p < c.e && *c.p >= '0' && *c.p <= '9') {
            if (fn < 9)
                frac = 10 * frac + (*c.p - '0');
            fn++;
            c.p++;
        }
        for (int k = fn; k < 9; k++)
            frac *= 10;
    }
    if (c.p != c.e || (n == 0 && fn == 0))
        return -1;
    if (n == 8 && !sign && !fn && *s != '0') {
        int64_t y = v / 10000;
        int m = (int)(v / 100 % 100), dd = (int)(v % 100);
        if (valid_ymd(y, m, dd)) {
            d->form = TFR_DATE_YMD8;
            d->year = y;
            d->a = m;
            d->b = dd;
            return 0;
        }
    }
    d->form = TFR_DATE_EPOCH;
    d->epoch_int = neg ? -v : v;
    d->epoch_frac = neg ? -frac : frac;
    return 0;
}

/* The commonest cells, "YYYY-MM-DD" and "YYYY-MM-DD HH:MM:SS" (or 'T'), without the general
 * walk (it costs ~600 instructions a cell): 1 when the cell is one of them and valid (*d set
 * exactly as the general path sets it), 0 to take the general path. */
static int iso_fast(const char *s, const char *e, tfr_date *d)
{
    static const char shape[] = "dddd-dd-dd dd:dd:dd";
    size_t n = (size_t)(e - s);
    if (n != 10 && n != 19)
        return 0;
    int v[19];
    for (size_t i = 0; i < n; i++) {
        char want = shape[i];
        if (want == 'd') {
            if (s[i] < '0' || s[i] > '9')
                return 0;
            v[i] = s[i] - '0';
        } else if (s[i] != want && !(i == 10 && s[i] == 'T'))
            return 0;
    }
    int64_t y = v[0] * 1000 + v[1] * 100 + v[2] * 10 + v[3];
    int m = v[5] * 10 + v[6], dd = v[8] * 10 + v[9];
    if (!valid_ymd(y, m, dd))
        return 0;
    int64_t hh = 0, mm = 0, ss = 0;
    if (n == 19) {
        hh = v[11] * 10 + v[12];
        mm = v[14] * 10 + v[15];
        ss = v[17] * 10 + v[18];
        if (hh > 23 || mm > 59 || ss > 59)
            return 0;
    }
    memset(d, 0, sizeof *d);
    d->form = TFR_DATE_YMD;
    d->year = y;
    d->a = m;
    d->b = dd;
    d->day_ns = ((hh * 60 + mm) * 60 + ss) * 1000000000;
    return 1;
}

int tfr_date_parse(const char *s, const char *e, tfr_date *d)
{
    if (iso_fast(s, e, d))
        return 0;
    return tfr_date_parse_general(s, e, d);
}

int tfr_date_parse_general(const char *s, const char *e, tfr_date *d)
{
    memset(d, 0, sizeof *d);
    if (s >= e)
        return -1;
    if (plain_number(s, e, d) == 0)
        return 0;
    memset(d, 0, sizeof *d);
    cur c = {s, e};
    if (isalpha((unsigned char)*c.p)) {
        cur w = c;
        const char *ws, *we;
        word(&w, &ws, &we);
        if (name_in(ws, we, weekdays, 7)) { /* "Tue, 02 Jan 2024", "Tue Jan 02 2024" */
            c = w;
            if (at(&c, ','))
                c.p++;
            if (!skip_spaces(&c))
                return -1;
        }
    }
    int64_t v1, v2, v3;
    if (c.p < c.e && isalpha((unsigned char)*c.p)) { /* Jan 02 2024, January 2, 2024 */
        int m = month_word(&c);
        if (!m)
            return -1;
        if (at(&c, '.'))
            c.p++;
        if (!skip_spaces(&c) && !(at(&c, '-') && c.p++))
            return -1;
        if (!d12(&c, &v2))
            return -1;
        if (at(&c, ','))
            c.p++;
        if (!skip_spaces(&c) && !(at(&c, '-') && c.p++))
            return -1;
        if (digits(&c, &v3) != 4)
            return -1;
        d->form = TFR_DATE_MON_D_Y;
        d->year = v3;
        d->a = m;
        d->b = (int)v2;
    } else {
        int n1 = digits(&c, &v1);
        if (n1 == 4) {
            if (!(at(&c, '-') || at(&c, '/') || at(&c, '.')))
                return -1;
            char sep = *c.p++;
            if (c.p < c.e && isalpha((unsigned char)*c.p)) {
                int m = month_word(&c);
                if (!m || !at(&c, sep))
                    return -1;
                c.p++;
                if (!d12(&c, &v3))
                    return -1;
                d->form = TFR_DATE_Y_MON_D;
                d->a = m;
                d->b = (int)v3;
            } else {
                if (!d12(&c, &v2) || !at(&c, sep))
                    return -1;
                c.p++;
                if (!d12(&c, &v3))
                    return -1;
                d->form = TFR_DATE_YMD;
                d->a = (int)v2;
                d->b = (int)v3;
            }
            d->year = v1;
        } else if (n1 == 8) { /* 20240102 09:30:00 */
            d->form = TFR_DATE_YMD8;
            d->year = v1 / 10000;
            d->a = (int)(v1 / 100 % 100);
            d->b = (int)(v1 % 100);
        } else if (n1 == 1 || n1 == 2) {
            if (!(at(&c, '-') || at(&c, '/') || at(&c, '.') || at(&c, ' ')))
                return -1;
            char sep = *c.p;
            if (sep == ' ')
                skip_spaces(&c);
            else
                c.p++;
            if (c.p < c.e && isalpha((unsigned char)*c.p)) { /* 02-Jan-2024, 2 January 2024 */
                int m = month_word(&c);
                if (!m)
                    return -1;
                if (sep == ' ') {
                    if (!skip_spaces(&c))
                        return -1;
                } else if (at(&c, sep))
                    c.p++;
                else
                    return -1;
                if (digits(&c, &v3) != 4)
                    return -1;
                d->form = TFR_DATE_D_MON_Y;
                d->year = v3;
                d->a = m;
                d->b = (int)v1;
            } else {
                if (sep == ' ' || !d12(&c, &v2) || !at(&c, sep))
                    return -1;
                c.p++;
                if (digits(&c, &v3) != 4)
                    return -1;
                d->year = v3;
                if (sep == '.') { /* 02.01.2024: day first, as where it is written */
                    d->form = TFR_DATE_DMY_DOT;
                    d->a = (int)v2;
                    d->b = (int)v1;
                } else {
                    d->form = TFR_DATE_AB_Y;
                    d->a = (int)v1;
                    d->b = (int)v2;
                }
            }
        } else
            return -1;
    }
    if (time_part(&c, d))
        return -1;
    if (d->form == TFR_DATE_AB_Y) {
        /* Either reading must be a date; tfr_date_time checks the one the file decides. */
        int month_first = valid_ymd(d->year, d->a, d->b),
            day_first = valid_ymd(d->year, d->b, d->a);
        return month_first || day_first ? 0 : -1;
    }
    return valid_ymd(d->year, d->a, d->b) ? 0 : -1;
}

int64_t tfr_epoch_unit(int64_t v)
{
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    return m < 100000000000ull         ? 1
           : m < 100000000000000ull    ? 1000
           : m < 100000000000000000ull ? 1000000
                                       : 1000000000;
}

int tfr_date_time(const tfr_date *d, int day_first, int64_t per_second, int64_t *ns)
{
    int64_t t;
    if (d->form == TFR_DATE_EPOCH) {
        int64_t step = 1000000000 / per_second; /* ns per unit */
        if (__builtin_mul_overflow(d->epoch_int, step, &t) ||
            __builtin_add_overflow(t, d->epoch_frac / per_second, &t))
            return -2;
        *ns = t;
        return 0;
    }
    int m = d->a, dd = d->b;
    if (d->form == TFR_DATE_AB_Y && day_first == 1)
        m = d->b, dd = d->a;
    if (!valid_ymd(d->year, m, dd))
        return -1;
    if (d->year < 1678 || d->year > 2262)
        return -2;
    int64_t sec = days_from_civil(d->year, m, dd) * 86400 - d->offset_s;
    if (__builtin_mul_overflow(sec, (int64_t)1000000000, &t) ||
        __builtin_add_overflow(t, d->day_ns, &t))
        return -2;
    *ns = t;
    return 0;
}

const char *tfr_date_form_name(tfr_date_form f, int day_first)
{
    switch (f) {
    case TFR_DATE_YMD:
        return "YYYY-MM-DD";
    case TFR_DATE_YMD8:
        return "YYYYMMDD";
    case TFR_DATE_DMY_DOT:
        return "DD.MM.YYYY";
    case TFR_DATE_AB_Y:
        return day_first == 1 ? "DD/MM/YYYY" : day_first == 0 ? "MM/DD/YYYY" : "MM/DD/YYYY?";
    case TFR_DATE_D_MON_Y:
        return "DD-Mon-YYYY";
    case TFR_DATE_MON_D_Y:
        return "Mon DD YYYY";
    case TFR_DATE_Y_MON_D:
        return "YYYY-Mon-DD";
    case TFR_DATE_EPOCH:
        return "epoch";
    case TFR_DATE_NONE:
        break;
    }
    return "";
}
