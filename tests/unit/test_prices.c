/* The price file reader and check (include/tollfree/prices.h) from C: every error return of the
 * public API, the exact bits, the date forms and their times, and the pipe (fd) path. The file
 * shapes through the CLI and Python are python/tests/test_prices.py. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "research/research_internal.h"
#include "tollfree/error.h"
#include "tollfree/prices.h"

static char msg[2048];

/* Reads text (NUL-terminated) with o; returns the rc, *p on success. */
static int rd(const char *text, const tf_prices_opts *o, tf_prices **p)
{
    return tf_prices_read_buffer(p, text, strlen(text), o, msg, sizeof msg);
}

static int64_t get(const tf_prices *p, int key)
{
    int64_t v = -99;
    CHECK_RC(tf_prices_get(p, key, &v), 0);
    return v;
}

static void test_check(void)
{
    double ok[3] = {1.0, 2.5, 1e300}, bad[3] = {1.0, 2.0, -0.0};
    int64_t i = -1;
    CHECK_RC(tf_prices_check(ok, 3, &i), 0);
    CHECK_RC(tf_prices_check(bad, 3, &i), TF_E_BAD_INPUT);
    CHECK_EQ(i, 2);
    bad[1] = NAN;
    CHECK_RC(tf_prices_check(bad, 3, NULL), TF_E_BAD_INPUT);
    bad[1] = INFINITY;
    CHECK_RC(tf_prices_check(bad, 3, &i), TF_E_BAD_INPUT);
    CHECK_EQ(i, 1);
    CHECK_RC(tf_prices_check(NULL, 0, &i), 0);
    CHECK_RC(tf_prices_check(NULL, 1, &i), TF_E_NULL_ARG);
    CHECK_RC(tf_prices_check(ok, -1, &i), TF_E_INVALID_ARG);
}

static void test_errors(void)
{
    tf_prices *p = (tf_prices *)1;
    CHECK_RC(tf_prices_read_buffer(NULL, "1\n", 2, NULL, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_prices_read_buffer(&p, NULL, 2, NULL, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK(p == NULL);
    CHECK_RC(tf_prices_read_path(&p, NULL, NULL, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_prices_read_path(&p, "/nonexistent/x.csv", NULL, msg, sizeof msg), -ENOENT);
    CHECK(strstr(msg, "/nonexistent/x.csv: ") == msg);
    CHECK_RC(tf_prices_read_path(&p, "/", NULL, msg, sizeof msg), -EISDIR);
    CHECK_RC(tf_prices_read_fd(&p, -1, NULL, msg, sizeof msg), -EBADF);
    tf_prices_opts o = {.size = sizeof o, .sep = '|'};
    CHECK_RC(rd("close\n1\n", &o, &p), TF_E_INVALID_ARG);
    o = (tf_prices_opts){.size = 3};
    CHECK_RC(rd("close\n1\n", &o, &p), TF_E_INVALID_ARG);
    CHECK_RC(rd("", NULL, &p), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "<buffer>: empty input") != NULL);
    /* no room for the message is fine */
    CHECK_RC(tf_prices_read_buffer(&p, "x\n", 2, NULL, NULL, 0), TF_E_BAD_INPUT);
    CHECK(p == NULL);
    CHECK_RC(tf_prices_get(NULL, TF_PRICES_BARS, NULL), TF_E_NULL_ARG);
    CHECK(tf_prices_text(NULL, TF_PRICES_NAME) == NULL);
    tf_prices_free(NULL);
}

static void test_values_dates_times(void)
{
    tf_prices_opts o = {.size = sizeof o, .keep_dates = 1};
    tf_prices *p;
    /* newest first, a pandas index column, CRLF, a quoted close */
    CHECK_RC(rd(",Open,Close\r\n2024-01-03,1,\"0.3\"\r\n2024-01-02 12:00:00,1,0.1\r\n", &o, &p), 0);
    int64_t n = 0;
    const double *v = tf_prices_values(p, &n);
    CHECK_EQ(n, 2);
    CHECK(v[0] == 0.1 && v[1] == 0.3); /* the bits strtod gives */
    const int64_t *t = tf_prices_times(p);
    CHECK(t && t[0] == (int64_t)1704196800 * 1000000000 &&
          t[1] == (int64_t)1704240000 * 1000000000);
    const int64_t *off;
    const char *d = tf_prices_dates(p, &off);
    CHECK(d && off[0] == 0 && off[1] == 19 && !memcmp(d, "2024-01-02 12:00:0020", 21));
    CHECK_EQ(get(p, TF_PRICES_REVERSED), 1);
    CHECK_EQ(get(p, TF_PRICES_DATE_INDEX), 0);
    CHECK_EQ(get(p, TF_PRICES_COLUMN_INDEX), 2);
    CHECK_EQ(get(p, TF_PRICES_SEP), ',');
    CHECK(!strcmp(tf_prices_text(p, TF_PRICES_DATE_FORM), "YYYY-MM-DD"));
    CHECK(strstr(tf_prices_text(p, TF_PRICES_NOTES), "newest first") != NULL);
    int64_t k;
    CHECK_RC(tf_prices_get(p, 999, &k), TF_E_INVALID_ARG);
    CHECK(tf_prices_text(p, 999) == NULL);
    double *own = tf_prices_take(p, &n);
    CHECK(own && n == 2 && tf_prices_take(p, NULL) == NULL && tf_prices_values(p, NULL) == NULL);
    CHECK_EQ(get(p, TF_PRICES_BARS), 2);
    free(own);
    tf_prices_free(p);
}

/* One date cell's time (ns), or INT64_MIN when refused. */
static int64_t one(const char *cell)
{
    char text[256];
    snprintf(text, sizeof text, "Date,Close\n%s,1\n", cell);
    tf_prices *p;
    if (rd(text, NULL, &p))
        return INT64_MIN;
    int64_t t = tf_prices_times(p) ? tf_prices_times(p)[0] : INT64_MIN + 1;
    tf_prices_free(p);
    return t;
}

static void test_date_forms(void)
{
    const int64_t day = (int64_t)1704153600 * 1000000000; /* 2024-01-02 UTC */
    const char *same_day[] = {"2024-01-02",
                              "2024/01/02",
                              "20240102",
                              "02.01.2024",
                              "02-Jan-2024",
                              "Jan 02 2024",
                              "2 January 2024",
                              "\"Jan 2, 2024\"",
                              "\"Tue, 02 Jan 2024\"",
                              "2024-Jan-02",
                              "1704153600",
                              "1704153600000",
                              "2024-01-02T00:00:00Z",
                              "2024-01-02 01:00:00+01:00",
                              "2024-01-01 19:00-05:00",
                              "01/02/2024 12:00 AM"};
    for (size_t i = 0; i < sizeof same_day / sizeof same_day[0]; i++) {
        int64_t t = one(same_day[i]);
        if (t != day)
            fprintf(stderr, "date '%s': %lld\n", same_day[i], (long long)t);
        CHECK(t == day);
    }
    CHECK(one("2024-01-02 09:30:00.25") == day + 34200250000000);
    CHECK(one("01/02/2024 12:30 PM") == day + 45000 * (int64_t)1000000000);
    const char *refused[] = {"2024-02-30", "2024-13-01",  "31/31/2024",  "2024-01-02 25:00",
                             "Q1 2024",    "02-Foo-2024", "2024-01-02T", "1e9",
                             "2262-05-01", "1600-01-01"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int64_t t = one(refused[i]);
        if (t != INT64_MIN)
            fprintf(stderr, "date '%s' taken: %lld\n", refused[i], (long long)t);
        CHECK(t == INT64_MIN);
    }
}

static void test_fd_and_messages(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    const char text[] = "Date;Close\n2024-01-02;100\n2024-01-03;abc\n";
    CHECK(write(fds[1], text, sizeof text - 1) == (ssize_t)sizeof text - 1);
    close(fds[1]);
    tf_prices *p;
    tf_prices_opts o = {.size = sizeof o, .name = "prices.csv"};
    CHECK_RC(tf_prices_read_fd(&p, fds[0], &o, msg, sizeof msg), TF_E_BAD_INPUT);
    close(fds[0]);
    CHECK(!strcmp(msg, "prices.csv:3: column 2 'Close': not a number: 'abc' (fix the cell, or "
                       "--skip-bad-rows)"));
    o.skip_bad_rows = 1;
    CHECK_RC(tf_prices_read_buffer(&p, text, sizeof text - 1, &o, msg, sizeof msg), 0);
    CHECK_EQ(get(p, TF_PRICES_SKIPPED), 1);
    CHECK_EQ(get(p, TF_PRICES_FIRST_BAD_LINE), 3);
    CHECK(strstr(tf_prices_text(p, TF_PRICES_NOTES), "skipped 1 bad rows") != NULL);
    tf_prices_free(p);
    /* raw f64: 8 bytes a value */
    double raw[2] = {101.5, 0.0};
    o = (tf_prices_opts){.raw = 1};
    CHECK_RC(tf_prices_read_buffer(&p, raw, sizeof raw, &o, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "value 2 (byte 8)") != NULL);
    CHECK_RC(tf_prices_read_buffer(&p, raw, 8, &o, msg, sizeof msg), 0);
    CHECK_EQ(get(p, TF_PRICES_RAW), 1);
    CHECK(tf_prices_values(p, NULL)[0] == 101.5);
    tf_prices_free(p);
}

/* The ISO fast path gives exactly what the general parser gives, on valid and near-valid cells:
 * random digits (so invalid months, days, hours), 'T' or ' ' or another byte between, and
 * lengths 10 and 19 (and 18, 20: the general path alone). */
static void test_iso_fast_path(void)
{
    static const char shape[] = "dddd-dd-dd dd:dd:dd?";
    uint64_t x = 88172645463325252ull;
    int mismatches = 0, parsed = 0;
    for (int t = 0; t < 200000; t++) {
        char cell[24];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = (x & 3) == 0 ? 10 : (x & 3) == 1 ? 19 : (x & 3) == 2 ? 18 : 20;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            char c = shape[i];
            if (c == 'd')
                /* mostly plausible: 0-2 in the tens of month/day/hour fields, any digit else */
                c = (char)('0' + (x >> 8) % ((i == 5 || i == 8 || i == 11) ? 3 : 10));
            else if (c == '?')
                c = (char)('0' + (x >> 8) % 10);
            if ((x & 0xff) < 3) /* now and then a wrong byte anywhere */
                c = "T/:x. "[(x >> 16) % 6];
            cell[i] = c;
        }
        if (n == 10 && (x & 0x300) == 0x100)
            cell[0] = '1';
        tfr_date a, b;
        memset(&a, 0x55, sizeof a);
        memset(&b, 0x55, sizeof b);
        int ra = tfr_date_parse(cell, cell + n, &a);
        int rb = tfr_date_parse_general(cell, cell + n, &b);
        parsed += ra == 0;
        if (ra != rb || (ra == 0 && memcmp(&a, &b, sizeof a)))
            mismatches++;
    }
    CHECK_EQ(mismatches, 0);
    CHECK(parsed > 10000); /* the test reached the fast path's successes */
}

int main(void)
{
    test_iso_fast_path();
    test_check();
    test_errors();
    test_values_dates_times();
    test_date_forms();
    test_fd_and_messages();
    return tf_test_report();
}
