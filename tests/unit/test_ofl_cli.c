/* `tollfree journal gen|verify|dump`: exit codes, one-line errors, the JSON fields, a corrupt
 * file. Runs the real binary ($TF_BUILD_DIR/tollfree). Also the benchmark's --quick smoke run
 * ($TF_BUILD_DIR/bench/bench_orderflow), so the benchmark cannot rot. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

static char dir[64];
static char bin[1024];
static char bench[1024];
static char out_text[1 << 20];
static char err_text[1 << 16];

/* Runs "tollfree ARGS" (a shell fragment), capturing stdout/stderr. Returns the exit status. */
static int run(const char *args)
{
    char cmd[4096], o[128], e[128];
    snprintf(o, sizeof o, "%s/out.txt", dir);
    snprintf(e, sizeof e, "%s/err.txt", dir);
    snprintf(cmd, sizeof cmd, "cd %s && %s %s >%s 2>%s", dir, bin, args, o, e);
    int st = system(cmd);
    FILE *f = fopen(o, "r");
    size_t n = f ? fread(out_text, 1, sizeof out_text - 1, f) : 0;
    out_text[n] = 0;
    if (f)
        fclose(f);
    f = fopen(e, "r");
    n = f ? fread(err_text, 1, sizeof err_text - 1, f) : 0;
    err_text[n] = 0;
    if (f)
        fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static size_t slurp(const char *name, uint8_t *buf, size_t cap)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f)
        fclose(f);
    return n;
}

static void spit(const char *name, const uint8_t *buf, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(buf, 1, n, f);
        fclose(f);
    }
}

static void test_usage(void)
{
    CHECK_EQ(run("journal --help"), 0);
    CHECK(strstr(out_text, "usage: tollfree journal") != NULL);
    CHECK_EQ(run("journal"), 2);
    CHECK_EQ(run("journal frobnicate"), 2);
    CHECK(strstr(err_text, "unknown subcommand 'frobnicate'") != NULL);
    CHECK_EQ(count_lines(err_text), 1);
    CHECK_EQ(run("journal gen --help"), 0);
    CHECK(strstr(out_text, "--count") != NULL);
    CHECK_EQ(run("journal verify --help"), 0);
    CHECK(strstr(out_text, "usage: tollfree journal verify") != NULL);
    CHECK_EQ(run("journal dump --help"), 0);
    CHECK(strstr(out_text, "--table") != NULL);

    static const char *bad[] = {
        "journal gen a.ofl",
        "journal gen --count",
        "journal gen --count -5 a.ofl",
        "journal gen --count 12x a.ofl",
        "journal gen --count 10",
        "journal gen --count 10 --durability sometimes a.ofl",
        "journal gen --count 10 --bogus a.ofl",
        "journal gen --count 10 a.ofl b.ofl",
        "journal verify",
        "journal verify --bogus x",
        "journal verify missing.ofl",
        "journal dump",
        "journal dump missing.ofl",
        "journal dump --xml x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run(bad[i]);
        CHECK_EQ(rc, 2);
        CHECK_EQ(count_lines(err_text), 1);
        if (rc != 2 || count_lines(err_text) != 1)
            fprintf(stderr, "  for: tollfree %s\n  stderr: %s", bad[i], err_text);
    }
}

static void test_gen_verify_dump(void)
{
    static uint8_t a[1 << 16], b[1 << 16];
    CHECK_EQ(run("journal gen --count 100 --seed 7 flow.ofl"), 0);
    CHECK(strstr(out_text, "100 records") != NULL);
    CHECK_EQ(run("journal gen --count 100 --seed 7 flow.ofl"), 2); /* exists */
    CHECK(strstr(err_text, "--force") != NULL);
    CHECK_EQ(run("journal gen --count 100 --seed 7 --force --durability every same.ofl"), 0);
    size_t na = slurp("flow.ofl", a, sizeof a), nb = slurp("same.ofl", b, sizeof b);
    CHECK(na > 15 && na == nb && !memcmp(a, b, na)); /* deterministic, whatever the policy */
    CHECK_EQ(run("journal gen --count 100 --seed 8 other.ofl"), 0);
    nb = slurp("other.ofl", b, sizeof b);
    CHECK(na != nb || memcmp(a, b, na) != 0);
    CHECK_EQ(run("journal gen --count 0 --session 9 empty.ofl"), 0);
    CHECK_EQ(run("journal verify empty.ofl"), 0);
    CHECK(strstr(out_text, "ok, 0 records") != NULL);
    CHECK(strstr(out_text, "session 9") != NULL);

    CHECK_EQ(run("journal verify flow.ofl"), 0);
    CHECK(strstr(out_text, "ok, 100 records") != NULL);

    /* JSON lines, the default */
    CHECK_EQ(run("journal dump flow.ofl"), 0);
    CHECK_EQ(count_lines(out_text), 100);
    CHECK_EQ(count_of(out_text, "\"kind\":\"NewLimit\""), 50);
    CHECK_EQ(count_of(out_text, "\"kind\":\"CancelByOrder\""), 20);
    CHECK_EQ(count_of(out_text, "\"kind\":\"Replace\""), 10);
    CHECK_EQ(count_of(out_text, "\"kind\":\"Trade\""), 15);
    CHECK_EQ(count_of(out_text, "\"kind\":\"Rejected\""), 5);
    static const char first[] = "{\"journal_seq\":0,\"kind\":\"NewLimit\",\"command_seq\":1,";
    CHECK(!strncmp(out_text, first, sizeof first - 1));
    CHECK(strstr(out_text, "{\"journal_seq\":99,") != NULL);
    CHECK_EQ(count_of(out_text, "\"side\":\"Buy\"") + count_of(out_text, "\"side\":\"Sell\""), 50);
    CHECK(strstr(out_text, "\"reason\":\"") != NULL);
    CHECK(strstr(out_text, "\"maker_order_id\":") != NULL);
    CHECK(strstr(out_text, "\"quantity\":\"") == NULL); /* an integer, not a string */
    CHECK_EQ(run("journal dump --json flow.ofl"), 0);
    CHECK_EQ(count_lines(out_text), 100);

    /* the JSON parses, and each kind has exactly the spec's fields */
    if (access("/usr/bin/python3", X_OK) == 0) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "cd %s && %s journal dump flow.ofl | /usr/bin/python3 -c '"
                 "import json,sys\n"
                 "want={\"NewLimit\":\"command_seq account_id client_order_id instrument_id side "
                 "price quantity\",\"CancelByOrder\":\"command_seq order_id\",\"Replace\":"
                 "\"command_seq order_id client_order_id price quantity\",\"Trade\":\"event_seq "
                 "command_seq timestamp_ns maker_order_id taker_order_id instrument_id price "
                 "quantity\",\"Rejected\":\"event_seq command_seq timestamp_ns client_order_id "
                 "reason\"}\n"
                 "n=0\n"
                 "for line in sys.stdin:\n"
                 "    o=json.loads(line)\n"
                 "    assert o[\"journal_seq\"]==n, o\n"
                 "    assert set(o)==set([\"journal_seq\",\"kind\"]+want[o[\"kind\"]].split()), o\n"
                 "    assert all(isinstance(o[k],int) for k in o if k not in "
                 "(\"kind\",\"side\",\"reason\")), o\n"
                 "    n+=1\n"
                 "assert n==100\n'",
                 dir, bin);
        CHECK_EQ(system(cmd), 0);
    } else {
        printf("note: /usr/bin/python3 missing, JSON not parsed\n");
    }

    /* table */
    CHECK_EQ(run("journal dump --table flow.ofl"), 0);
    CHECK_EQ(count_lines(out_text), 102);
    CHECK(strstr(out_text, "journal_seq") != NULL);
    CHECK(strstr(out_text, "side=") != NULL);

    /* a torn tail: verify names the offset and journal_seq; dump prints the valid prefix */
    spit("torn.ofl", a, na - 5);
    CHECK_EQ(run("journal verify torn.ofl"), 1);
    CHECK_EQ(count_lines(err_text), 1);
    CHECK(strstr(err_text, "(journal_seq 99)") != NULL);
    CHECK(strstr(err_text, "torn record") != NULL);
    char want_off[64];
    tf_journal_scan_result s;
    tf_journal_scan(a, na - 5, &s);
    snprintf(want_off, sizeof want_off, "offset %llu ", (unsigned long long)s.valid_bytes);
    CHECK(strstr(err_text, want_off) != NULL);
    CHECK_EQ(run("journal dump torn.ofl"), 1);
    CHECK_EQ(count_lines(out_text), 99);
    CHECK_EQ(count_lines(err_text), 1);

    /* a flipped byte in record 10: CRC */
    tf_journal_reader r;
    tf_ofl_msg m;
    tf_journal_reader_init(&r, a, na);
    for (int i = 0; i < 10; i++)
        tf_journal_reader_next(&r, &m);
    size_t off10 = r.pos;
    memcpy(b, a, na);
    b[off10 + 20] ^= 0x10;
    spit("flip.ofl", b, na);
    CHECK_EQ(run("journal verify flip.ofl"), 1);
    CHECK(strstr(err_text, "(journal_seq 10)") != NULL);
    CHECK(strstr(err_text, "CRC32C") != NULL);
    snprintf(want_off, sizeof want_off, "offset %zu ", off10);
    CHECK(strstr(err_text, want_off) != NULL);

    /* not a journal */
    memset(b, 'x', 64);
    spit("junk.ofl", b, 64);
    CHECK_EQ(run("journal verify junk.ofl"), 1);
    CHECK(strstr(err_text, "wrong magic") != NULL);
    CHECK(strstr(err_text, "offset 0 (journal_seq 0)") != NULL);
}

/* Quantities beyond 64 bits print as exact integers; a heartbeat has no payload fields. */
static void test_wide_quantity(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/wide.ofl", dir);
    tf_journal *j;
    CHECK_RC(tf_journal_open(p, NULL, &j, NULL), 0);
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_NEW_MARKET;
    m.new_market.quantity.lo = 5;
    m.new_market.quantity.hi = 1;
    m.new_market.side = 1;
    CHECK_RC(tf_journal_append(j, &m, NULL), 0);
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_TRADE;
    m.trade.price = -7;
    m.trade.quantity.lo = UINT64_MAX;
    m.trade.quantity.hi = UINT64_MAX;
    CHECK_RC(tf_journal_append(j, &m, NULL), 0);
    memset(&m, 0, sizeof m);
    CHECK_RC(tf_journal_append(j, &m, NULL), 0);
    CHECK_RC(tf_journal_close(j), 0);
    CHECK_EQ(run("journal dump wide.ofl"), 0);
    CHECK(strstr(out_text, "\"kind\":\"NewMarket\"") != NULL);
    CHECK(strstr(out_text, "\"quantity\":18446744073709551621}") != NULL);
    CHECK(strstr(out_text, "\"price\":-7,") != NULL);
    CHECK(strstr(out_text, "\"quantity\":340282366920938463463374607431768211455}") != NULL);
    CHECK(strstr(out_text, "{\"journal_seq\":2,\"kind\":\"Heartbeat\"}\n") != NULL);
}

static void test_bench_smoke(const char *build)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s --quick --dir %s %s/bench.json >%s/bench.txt 2>&1", bench, dir,
             dir, dir);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    static uint8_t j[1 << 16];
    size_t n = slurp("bench.json", j, sizeof j - 1);
    j[n] = 0;
    CHECK(n > 100);
    CHECK(strstr((char *)j, "\"failures\": 0") != NULL);
    CHECK(strstr((char *)j, "\"section\": \"append\"") != NULL);
    CHECK(strstr((char *)j, "\"section\": \"datagram\"") != NULL);
    (void)build;
}

int main(void)
{
    const char *build = getenv("TF_BUILD_DIR");
    if (!build) {
        printf("SKIP: TF_BUILD_DIR not set (run under ctest)\n");
        return 0;
    }
    snprintf(bin, sizeof bin, "%s/tollfree", build);
    snprintf(bench, sizeof bench, "%s/bench/bench_orderflow", build);
    snprintf(dir, sizeof dir, "/tmp/tf_ofl_cli_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK(access(bin, X_OK) == 0);
    test_usage();
    test_gen_verify_dump();
    test_wide_quantity();
    if (access(bench, X_OK) == 0)
        test_bench_smoke(build);
    else
        CHECK(!"bench/bench_orderflow not built");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tf_test_report();
}
