/* Fault injection for the journal and the engine's snapshot files, the SQLite way: the file I/O
 * table of src/orderflow/fio.h is replaced by one that makes the Nth write (pwrite/write), the
 * Nth fsync/fdatasync or the Nth ftruncate fail with ENOSPC or EIO, or a write put down only part
 * of its bytes (then go on, or then fail with ENOSPC as a full disk does). N walks over every such
 * call of a whole run, for each durability policy and for a run that reopens a journal with a
 * torn tail half-way (recovery's own I/O). Every run must:
 *   - report the failure to the caller with its errno (-ENOSPC, -EIO), and a short write that
 *     the next call completes must not be an error at all;
 *   - keep every record that was acknowledged as durable (journal_seq < tf_journal_durable_end
 *     before the failure): reopening finds at least those, and nothing but records that were
 *     appended, in order, byte for byte;
 *   - leave a file that reopens (to a valid prefix) and takes appends again.
 * Snapshots: a failed save reports its errno, leaves no FILE.tmp, and FILE still loads to the
 * previous snapshot's state (or to the new one when only the directory sync after the rename
 * failed). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "orderflow/fio.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

/* ---- the injector --------------------------------------------------------------------------- */

enum cls { CLS_WRITE, CLS_SYNC, CLS_TRUNC };
static const char *const cls_name[] = {"write", "sync", "ftruncate"};
enum mode { M_ENOSPC, M_EIO, M_SHORT, M_SHORT_THEN_ENOSPC };
static const char *const mode_name[] = {"ENOSPC", "EIO", "short write", "short write + ENOSPC"};

static struct {
    long calls[3]; /* calls seen per class since the last arm() */
    long fail_at;  /* the call (1-based) of class cls that fails; 0: none */
    enum cls cls;
    enum mode mode;
    int enospc_next; /* after a short write: the next write fails with ENOSPC */
    int fired;
} inj;

static void arm(enum cls c, enum mode m, long n)
{
    memset(&inj, 0, sizeof inj);
    inj.cls = c;
    inj.mode = m;
    inj.fail_at = n;
}

static int fault_errno(void)
{
    return inj.mode == M_EIO ? EIO : ENOSPC;
}

/* 0: do the real call with n bytes; 1: fail with errno set; 2: do it with *n shortened. */
static int decide_write(size_t *n)
{
    if (inj.enospc_next) {
        inj.enospc_next = 0;
        errno = ENOSPC;
        return 1;
    }
    if (++inj.calls[CLS_WRITE] != inj.fail_at || inj.cls != CLS_WRITE)
        return 0;
    inj.fired = 1;
    if ((inj.mode == M_SHORT || inj.mode == M_SHORT_THEN_ENOSPC) && *n >= 2) {
        *n /= 2;
        inj.enospc_next = inj.mode == M_SHORT_THEN_ENOSPC;
        return 2;
    }
    errno = inj.mode == M_EIO ? EIO : ENOSPC;
    return 1;
}

static ssize_t f_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (decide_write(&n) == 1)
        return -1;
    return pwrite(fd, buf, n, off);
}

static ssize_t f_write(int fd, const void *buf, size_t n)
{
    if (decide_write(&n) == 1)
        return -1;
    return write(fd, buf, n);
}

static int decide_sync(void)
{
    if (++inj.calls[CLS_SYNC] != inj.fail_at || inj.cls != CLS_SYNC)
        return 0;
    inj.fired = 1;
    errno = fault_errno();
    return 1;
}

static int f_fsync(int fd)
{
    return decide_sync() ? -1 : fsync(fd);
}

static int f_fdatasync(int fd)
{
    return decide_sync() ? -1 : fdatasync(fd);
}

static int f_ftruncate(int fd, off_t len)
{
    if (++inj.calls[CLS_TRUNC] != inj.fail_at || inj.cls != CLS_TRUNC)
        return ftruncate(fd, len);
    inj.fired = 1;
    errno = fault_errno();
    return -1;
}

static const tfo_fio_ops fault_ops = {
    .pwrite = f_pwrite,
    .write = f_write,
    .fsync = f_fsync,
    .fdatasync = f_fdatasync,
    .ftruncate = f_ftruncate,
};

/* What the caller must see: the injected errno, or nothing for a short write the loop completes. */
static int expected_rc(void)
{
    if (!inj.fired || inj.mode == M_SHORT)
        return 0;
    return -fault_errno();
}

static char dir[64];
static char path[160];

/* ---- the journal walk ----------------------------------------------------------------------- */

#define MAX_RECORDS 10000
#define SESSION 0x5eed

static tf_ofl_msg msgs[MAX_RECORDS + 8];

struct scenario {
    const char *name;
    tf_journal_durability durability;
    uint32_t group_frames;
    int count;
    int sync_every; /* NONE: tf_journal_sync after every this many appends (0: never) */
    int reopen_at;  /* after this many appends: close, add a torn record, reopen (0: never) */
};

/* group_max_us is set beyond any run's length, so no group ever closes on time: the walk is the
 * same on every machine. */
static tf_journal_opts opts_of(const struct scenario *sc)
{
    tf_journal_opts o = {.durability = sc->durability,
                         .group_max_frames = sc->group_frames,
                         .group_max_us = 4000000000u,
                         .session_id = SESSION};
    return o;
}

struct outcome {
    int first_err;     /* the first error any call returned (0: none) */
    uint64_t acked;    /* records reported durable before the first error */
    uint64_t attempts; /* records handed to append (the last may have failed) */
};

/* A record cut short after the end, as a crash in the middle of a write leaves it. */
static int add_torn_tail(void)
{
    FILE *f = fopen(path, "ab");
    if (!f)
        return TF_E_INVALID_ARG;
    static const uint8_t torn[] = {20, 0, 0x03, 0, 0, 0};
    size_t n = fwrite(torn, 1, sizeof torn, f);
    return fclose(f) == 0 && n == sizeof torn ? 0 : TF_E_INVALID_ARG;
}

/* One whole run: open a fresh journal, append sc->count records, close. */
static struct outcome run_journal(const struct scenario *sc)
{
    struct outcome out = {0, 0, 0};
    unlink(path);
    tf_journal_opts o = opts_of(sc);
    tf_journal *j;
    int rc = tf_journal_open(path, &o, &j, NULL);
    if (rc) {
        out.first_err = rc;
        return out;
    }
    for (int i = 0; i < sc->count && !rc; i++) {
        out.attempts++;
        uint64_t seq = 0;
        rc = tf_journal_append(j, &msgs[i], &seq);
        if (!rc && seq != (uint64_t)i)
            rc = TF_E_INVALID_ARG; /* never an injected errno: the check below fails */
        if (!rc && sc->sync_every && (i + 1) % sc->sync_every == 0)
            rc = tf_journal_sync(j);
        if (!rc && sc->reopen_at && i + 1 == sc->reopen_at) {
            /* Recovery's own I/O: it cuts the torn tail and syncs what it keeps. */
            rc = tf_journal_close(j);
            if (!rc)
                out.acked = (uint64_t)i + 1;
            if (!rc)
                rc = add_torn_tail();
            if (!rc)
                rc = tf_journal_open(path, &o, &j, NULL);
            if (rc) {
                out.first_err = rc;
                return out; /* the handle is gone (close frees it; open made none) */
            }
        }
        if (!rc)
            out.acked = tf_journal_durable_end(j);
    }
    if (rc) {
        out.first_err = rc;
        /* After an I/O error the handle is failed for good. */
        tf_ofl_msg hb;
        memset(&hb, 0, sizeof hb);
        int again = tf_journal_append(j, &hb, NULL);
        int closed = tf_journal_close(j);
        if (again != TF_E_OFL_JOURNAL_FAILED || closed != TF_E_OFL_JOURNAL_FAILED)
            out.first_err = TF_E_INVALID_ARG;
        return out;
    }
    rc = tf_journal_close(j);
    out.first_err = rc;
    if (!rc)
        out.acked = (uint64_t)sc->count;
    return out;
}

/* The file after a run (no fault now): reopens, holds a prefix of what was appended that keeps
 * every acknowledged record, and takes appends again. Returns 0 when all of that holds. */
static int check_after(const struct scenario *sc, const struct outcome *out)
{
    tf_journal_opts o = opts_of(sc);
    tf_journal *j;
    tf_journal_recovery rec;
    int rc = tf_journal_open(path, &o, &j, &rec);
    if (rc) {
        fprintf(stderr, "  reopen: %s\n", tf_strerror(rc));
        return 1;
    }
    uint64_t kept = rec.records;
    int bad = 0;
    if (kept < out->acked || kept > out->attempts) {
        fprintf(stderr, "  reopen kept %llu records; acknowledged %llu, appended %llu\n",
                (unsigned long long)kept, (unsigned long long)out->acked,
                (unsigned long long)out->attempts);
        bad = 1;
    }
    for (int i = 0; i < 3 && !bad; i++)
        bad |= tf_journal_append(j, &msgs[kept + (uint64_t)i], NULL) != 0;
    bad |= tf_journal_close(j) != 0;

    tf_journal_map m;
    if (tf_journal_map_open(path, &m) != 0)
        return 1;
    tf_journal_reader r;
    bad |= tf_journal_reader_init(&r, m.data, m.len) != 0;
    bad |= r.header.session_id != SESSION;
    bad |= r.pos != TF_JOURNAL_HEADER_LEN;
    uint64_t n = 0;
    tf_ofl_msg got;
    while (!bad && (rc = tf_journal_reader_next(&r, &got)) == 1) {
        /* record n is msgs[n] (after the kept prefix: the resumed appends of msgs[kept..]) */
        uint8_t want[TF_OFL_MAX_FRAME];
        tf_ofl_msg w = msgs[n];
        w.journal_seq = n;
        int len = tf_ofl_frame_encode(want, sizeof want, &w);
        bad |= len < 0 || (size_t)len != r.frame_len || memcmp(want, r.frame, r.frame_len) != 0;
        n++;
    }
    bad |= rc != 0 || n != kept + 3;
    tf_journal_map_close(&m);
    return bad;
}

/* Counts the calls of one clean run, then fails each of them in turn, in every mode. */
static void walk_journal(const struct scenario *sc)
{
    arm(CLS_WRITE, M_EIO, 0);
    struct outcome clean = run_journal(sc);
    CHECK_RC(clean.first_err, 0);
    CHECK_EQ(clean.acked, sc->count);
    long total[3] = {inj.calls[CLS_WRITE], inj.calls[CLS_SYNC], inj.calls[CLS_TRUNC]};
    CHECK(total[CLS_WRITE] > 1 && total[CLS_SYNC] > 1);
    CHECK_EQ(total[CLS_TRUNC], sc->reopen_at ? 1 : 0);
    int runs = 0, failures = 0;
    for (int c = CLS_WRITE; c <= CLS_TRUNC; c++) {
        int modes = c == CLS_WRITE ? 4 : 2;
        for (int m = 0; m < modes; m++) {
            for (long nth = 1; nth <= total[c]; nth++) {
                arm((enum cls)c, (enum mode)m, nth);
                struct outcome out = run_journal(sc);
                int want = expected_rc();
                int fired = inj.fired;
                arm(CLS_WRITE, M_EIO, 0);
                int bad = !fired || out.first_err != want;
                if (bad)
                    fprintf(stderr, "  returned %d (%s), wanted %d (%s)\n", out.first_err,
                            tf_strerror(out.first_err), want, tf_strerror(want));
                bad |= check_after(sc, &out);
                if (bad && failures++ < 5)
                    fprintf(stderr, "%s: %s at %s call %ld of %ld went wrong\n", sc->name,
                            mode_name[m], cls_name[c], nth, total[c]);
                runs++;
            }
        }
    }
    CHECK_EQ(failures, 0);
    printf("journal %-6s %5d records: %ld writes, %ld syncs, %ld truncations per run; %d faulted "
           "runs ok\n",
           sc->name, sc->count, total[CLS_WRITE], total[CLS_SYNC], total[CLS_TRUNC],
           runs - failures);
}

/* ---- the snapshot walk ---------------------------------------------------------------------- */

static int discard(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    (void)ctx, (void)ev, (void)n;
    return 0;
}

static void apply_flow(tf_engine *e, tf_engine_flow *f, int n)
{
    tf_ofl_msg ev[64];
    tf_engine_sink sink = {.ev = ev, .cap = 64, .flush = discard};
    for (int i = 0; i < n; i++) {
        tf_ofl_msg m;
        tf_engine_flow_next(f, &m);
        sink.n = 0;
        (void)tf_engine_apply(e, &m, &sink);
    }
}

static uint64_t hash_of_file(void)
{
    tf_engine *e;
    if (tf_engine_snapshot_load(path, NULL, &e) != 0)
        return 0;
    uint64_t h = tf_engine_state_hash(e);
    tf_engine_destroy(e);
    return h;
}

static void put_file(const uint8_t *b, uint64_t n)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(b, 1, n, fp) == n);
    if (fp)
        fclose(fp);
}

static void walk_snapshot(void)
{
    uint64_t ids[] = {1, 2, 3};
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = ids, .n_instruments = 3, .max_orders = 100000};
    tf_engine_flow_config fc = {.size = sizeof fc,
                                .mix = TF_ENGINE_MIX_EXCHANGE_CORE,
                                .seed = 5,
                                .instruments = ids,
                                .n_instruments = 3,
                                .target_orders = 2000};
    tf_engine *e;
    tf_engine_flow *f;
    CHECK_RC(tf_engine_create(&cfg, &e), 0);
    CHECK_RC(tf_engine_flow_open(&fc, &f), 0);
    apply_flow(e, f, 20000);
    unlink(path);
    CHECK_RC(tf_engine_snapshot_save(e, path), 0);
    uint64_t h_old = tf_engine_state_hash(e);
    CHECK_EQ(hash_of_file(), h_old);
    uint8_t *old_img = malloc(tf_engine_snapshot_size(e));
    uint64_t old_len = 0;
    CHECK_RC(tf_engine_snapshot_write(e, old_img, tf_engine_snapshot_size(e), &old_len), 0);
    apply_flow(e, f, 5000);
    uint64_t h_new = tf_engine_state_hash(e);
    CHECK(h_new != h_old);

    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    arm(CLS_WRITE, M_EIO, 0);
    CHECK_RC(tf_engine_snapshot_save(e, path), 0); /* counts the calls of a save */
    long total[2] = {inj.calls[CLS_WRITE], inj.calls[CLS_SYNC]};
    CHECK(total[CLS_WRITE] >= 1 && total[CLS_SYNC] >= 2); /* the file, then its directory */
    int runs = 0, failures = 0;
    for (int c = CLS_WRITE; c <= CLS_SYNC; c++) {
        int modes = c == CLS_WRITE ? 4 : 2;
        for (int m = 0; m < modes; m++) {
            for (long nth = 1; nth <= total[c]; nth++) {
                struct stat st;
                arm(CLS_WRITE, M_EIO, 0);
                put_file(old_img, old_len); /* FILE holds the old snapshot again */
                arm((enum cls)c, (enum mode)m, nth);
                int rc = tf_engine_snapshot_save(e, path);
                int want = expected_rc();
                int fired = inj.fired;
                /* the last sync is the directory's, after the rename: the new file is in place */
                int renamed = rc == 0 || (c == CLS_SYNC && nth == total[CLS_SYNC]);
                arm(CLS_WRITE, M_EIO, 0);
                int bad = !fired || rc != want;
                bad |= hash_of_file() != (renamed ? h_new : h_old);
                bad |= stat(tmp, &st) == 0; /* no FILE.tmp left */
                if (bad && failures++ < 5)
                    fprintf(stderr, "snapshot: %s at %s call %ld: returned %d (%s)\n", mode_name[m],
                            c == CLS_WRITE ? "write" : "sync", nth, rc, tf_strerror(rc));
                runs++;
            }
        }
    }
    CHECK_EQ(failures, 0);
    printf("snapshot %llu bytes: %ld writes, %ld syncs per save; %d faulted saves ok\n",
           (unsigned long long)tf_engine_snapshot_size(e), total[CLS_WRITE], total[CLS_SYNC],
           runs - failures);
    free(old_img);
    tf_engine_flow_close(f);
    tf_engine_destroy(e);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tf_jfault_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/j.ofl", dir);
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 3);
    for (int i = 0; i < MAX_RECORDS + 8; i++)
        tf_ofl_gen_next(&g, &msgs[i]);

    const tfo_fio_ops *prev = tfo_fio_set(&fault_ops);
    /* NONE: 10,000 records overflow the 256 KiB staging buffer, with an explicit sync;
     * GROUP: a group commit every 16 records; EVERY: a write + fdatasync per record. */
    static const struct scenario sc[] = {
        {"none", TF_JOURNAL_NONE, 0, MAX_RECORDS, 6000, 0},
        {"group", TF_JOURNAL_GROUP, 16, 200, 0, 0},
        {"every", TF_JOURNAL_EVERY, 0, 30, 0, 0},
        {"reopen", TF_JOURNAL_GROUP, 16, 100, 0, 40},
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        walk_journal(&sc[i]);

    snprintf(path, sizeof path, "%s/engine.snap", dir);
    walk_snapshot();
    tfo_fio_set(prev);

    unlink(path);
    snprintf(path, sizeof path, "%s/j.ofl", dir);
    unlink(path);
    rmdir(dir);
    return tf_test_report();
}
