/* The instrument list stored beside a command journal (journal.h): round trip, the text it
 * stores, and every error return of tf_journal_instruments_save / _load / _format. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/error.h"
#include "tollfree/journal.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_round_trip(void)
{
    char j[256], side[300];
    snprintf(j, sizeof j, "%s", tmp("c.ofl"));
    snprintf(side, sizeof side, "%s%s", j, TF_JOURNAL_INSTRUMENTS_SUFFIX);
    uint64_t ids[] = {42, 3, 1, 2, 7, 8, 100};
    CHECK_RC(tf_journal_instruments_save(j, 77, ids, 7), 0);
    FILE *f = fopen(side, "r");
    char text[512] = {0};
    CHECK(f && fread(text, 1, sizeof text - 1, f) > 0);
    if (f)
        fclose(f);
    CHECK(!strncmp(text,
                   "tollfree-instruments 1\nsession_id 77\ninstruments 1-3,7,8,42,100\n"
                   "crc32c ",
                   63));
    CHECK(access(side, F_OK) == 0);
    char tmpname[320];
    snprintf(tmpname, sizeof tmpname, "%s.tmp", side);
    CHECK(access(tmpname, F_OK) != 0); /* renamed over */
    uint64_t got[16], session = 0;
    uint32_t n = 0;
    CHECK_RC(tf_journal_instruments_load(j, &session, got, 16, &n), 0);
    CHECK_EQ(session, 77);
    CHECK_EQ(n, 7);
    uint64_t want[] = {1, 2, 3, 7, 8, 42, 100};
    CHECK(!memcmp(got, want, sizeof want));
    CHECK_RC(tf_journal_instruments_load(j, NULL, got, 16, NULL), 0);
    CHECK_RC(tf_journal_instruments_load(j, &session, got, 6, &n), TF_E_LIMIT);
    /* a second save replaces the first */
    uint64_t one = 9;
    CHECK_RC(tf_journal_instruments_save(j, 78, &one, 1), 0);
    CHECK_RC(tf_journal_instruments_load(j, &session, got, 16, &n), 0);
    CHECK(session == 78 && n == 1 && got[0] == 9);
}

static void test_errors(void)
{
    uint64_t ids[] = {1, 2}, got[4];
    uint32_t n;
    CHECK_RC(tf_journal_instruments_save(NULL, 1, ids, 2), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_instruments_save(tmp("e.ofl"), 1, NULL, 2), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_instruments_save(tmp("e.ofl"), 1, ids, 0), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_instruments_save(tmp("e.ofl"), 1, ids, TF_JOURNAL_INSTRUMENTS_MAX + 1),
             TF_E_INVALID_ARG);
    uint64_t zero[] = {0, 1}, dup[] = {4, 2, 4};
    CHECK_RC(tf_journal_instruments_save(tmp("e.ofl"), 1, zero, 2), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_instruments_save(tmp("e.ofl"), 1, dup, 3), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_instruments_save("/nonexistent-dir/x.ofl", 1, ids, 2), -ENOENT);
    CHECK_RC(tf_journal_instruments_load(NULL, NULL, got, 4, &n), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_instruments_load(tmp("e.ofl"), NULL, NULL, 4, &n), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_instruments_load(tmp("none.ofl"), NULL, got, 4, &n), -ENOENT);

    /* damaged or foreign files: TF_E_BAD_INPUT, never a list */
    CHECK_RC(tf_journal_instruments_save(tmp("d.ofl"), 5, ids, 2), 0);
    char side[300];
    snprintf(side, sizeof side, "%s%s", tmp("d.ofl"), TF_JOURNAL_INSTRUMENTS_SUFFIX);
    FILE *f = fopen(side, "r");
    char good[256] = {0};
    size_t len = f ? fread(good, 1, sizeof good - 1, f) : 0;
    if (f)
        fclose(f);
    CHECK(len > 40);
    for (size_t i = 0; i < len; i++) { /* every byte changed: refused */
        char bad[256];
        memcpy(bad, good, len + 1);
        bad[i] = bad[i] == '9' ? '8' : '9';
        write_text(side, bad);
        int rc = tf_journal_instruments_load(tmp("d.ofl"), NULL, got, 4, &n);
        CHECK(rc == TF_E_BAD_INPUT);
    }
    for (size_t cut = 0; cut < len; cut++) { /* every truncation: refused */
        char bad[256];
        memcpy(bad, good, cut);
        bad[cut] = '\0';
        write_text(side, bad);
        CHECK_RC(tf_journal_instruments_load(tmp("d.ofl"), NULL, got, 4, &n), TF_E_BAD_INPUT);
    }
    write_text(side, "hello\n");
    CHECK_RC(tf_journal_instruments_load(tmp("d.ofl"), NULL, got, 4, &n), TF_E_BAD_INPUT);
}

static void test_format(void)
{
    uint64_t ids[] = {1, 2, 3, 4, 9, 11, 12, 18446744073709551615ull};
    char buf[64];
    CHECK_EQ(tf_journal_instruments_format(ids, 8, buf, sizeof buf), 32);
    CHECK(!strcmp(buf, "1-4,9,11,12,18446744073709551615"));
    CHECK_RC(tf_journal_instruments_format(ids, 8, buf, 10), TF_E_LIMIT);
    CHECK(!strcmp(buf, "1-4,9"));
    CHECK_EQ(tf_journal_instruments_format(ids, 0, buf, 4), 0);
    CHECK(buf[0] == '\0');
    CHECK_RC(tf_journal_instruments_format(NULL, 1, buf, 4), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_instruments_format(ids, 1, NULL, 4), TF_E_NULL_ARG);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tf_jinst_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_errors();
    test_format();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tf_test_report();
}
