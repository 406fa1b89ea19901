/* The size rule shared by the growable option structs (src/common/opts_size.h, used by
 * tf_sweep_opts, tf_client_opts, tf_journal_opts and, through tfu_opts_load_n, tf_orders_opts), on
 * two made-up layouts of one struct: v1, the first sized layout, and v2, which appends two fields
 * after sizeof(v1). A v2 library reads a v1 caller (the missing fields read 0 = default); a v1
 * library reads a v2 caller only when the fields it does not know are zero. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/opts_size.h"
#include "net/net.h"
#include "harness.h"
#include "tollfree/engine.h"
#include "tollfree/error.h"
#include "tollfree/orders.h"

typedef struct v1 {
    size_t size;
    int a;
} v1;

typedef struct v2 {
    size_t size;
    int a;
    int64_t b;
    int c;
} v2;

#define V1_MIN TFU_FIELD_END(v1, a)

/* The limit-option table both servers parse their limits with (tfu_limit_take). */
static void test_limit_table(void)
{
    int conns = 7, reserve = 7;
    uint64_t mem = 7;
    char msg[160];
    uint32_t orders = 7;
    const tfu_limit_opt t[] = {
        {.name = "--max-conns", .lo = 1, .hi = 100, .i = &conns},
        {.name = "--conn-reserve", .hi = 100, .i = &reserve, .zero_is_none = 1},
        {.name = "--max-memory", .sized = 1, .lo = 1 << 20, .hi = UINT64_MAX / 2, .u = &mem},
        {.name = "--max-orders", .lo = 1, .hi = 1000, .u32 = &orders},
    };
    size_t n = sizeof t / sizeof t[0];
    CHECK_EQ(tfu_limit_take(t, n, "--max-memory", "4G", msg, sizeof msg), 1);
    CHECK(mem == (uint64_t)4 << 30);
    CHECK_EQ(tfu_limit_take(t, n, "--max-conns", "12", msg, sizeof msg), 1);
    CHECK_EQ(conns, 12);
    CHECK_EQ(tfu_limit_take(t, n, "--conn-reserve", "0", msg, sizeof msg), 1);
    CHECK_EQ(reserve, -1); /* 0 = none */
    CHECK_EQ(tfu_limit_take(t, n, "--conn-reserve", "3", msg, sizeof msg), 1);
    CHECK_EQ(reserve, 3);
    CHECK_EQ(tfu_limit_take(t, n, "--max-conns", "1K", msg, sizeof msg), -1); /* a count */
    CHECK(strstr(msg, "--max-conns 1K") != NULL);
    CHECK_EQ(conns, 12);
    CHECK_EQ(tfu_limit_take(t, n, "--max-memory", "512K", msg, sizeof msg), -1);
    CHECK(strstr(msg, "--max-memory 512K") != NULL);
    CHECK_EQ(tfu_limit_take(t, n, "--journal", "x", msg, sizeof msg), 0);
    CHECK_EQ(tfu_limit_take(t, n, "--max-orders", "1000", msg, sizeof msg), 1);
    CHECK(orders == 1000);
    CHECK_EQ(tfu_limit_take(t, n, "--max-orders", "1001", msg, sizeof msg), -1);
    CHECK(strstr(msg, "--max-orders 1001: give at most 1000") != NULL);
    CHECK(orders == 1000);
}

/* The limits both servers share (src/net/config.c): `serve` and `engine serve` read every one
 * of them through this one function, so a value one accepts the other accepts, with the same
 * message when it is refused (issue 25: `engine serve --max-memory 4G` was refused). */
static void test_server_limits(void)
{
    tfn_limits a, b;
    tfn_limits_init(&a);
    tfn_limits_init(&b);
    CHECK_EQ(a.stall_timeout_s, 60);
    CHECK(a.min_rate == 1024);
    char msg[160], msg2[160];
    const char *ok[][2] = {{"--max-memory", "4G"},  {"--max-memory", "64MiB"},
                           {"--max-output", "4M"},  {"--min-rate", "2K"},
                           {"--max-conns", "10"},   {"--max-conns-per-peer", "3"},
                           {"--conn-reserve", "0"}, {"--stall-timeout", "5"},
                           {"--idle-timeout", "7"}, {"--idle-timeout-full", "9"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        CHECK_EQ(tfn_limits_option(&a, ok[i][0], ok[i][1], msg, sizeof msg), 1);
    CHECK(a.max_memory == (uint64_t)64 << 20); /* the last one given */
    CHECK(a.max_output == (uint64_t)4 << 20 && a.min_rate == 2048);
    CHECK(a.max_conns == 10 && a.max_conns_per_peer == 3 && a.conn_reserve == -1);
    CHECK(a.stall_timeout_s == 5 && a.idle_timeout_s == 7 && a.idle_full_timeout_s == 9);
    const char *bad[][2] = {{"--max-memory", "512K"},
                            {"--max-memory", "4X"},
                            {"--max-output", "1K"},
                            {"--max-conns", "1K"},
                            {"--stall-timeout", "-1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(tfn_limits_option(&a, bad[i][0], bad[i][1], msg, sizeof msg), -1);
        CHECK_EQ(tfn_limits_option(&b, bad[i][0], bad[i][1], msg2, sizeof msg2), -1);
        CHECK(strcmp(msg, msg2) == 0 && strstr(msg, bad[i][0]) && strstr(msg, bad[i][1]));
    }
    CHECK(strstr(msg, "--stall-timeout -1: not a whole number") != NULL);
    CHECK_EQ(tfn_limits_option(&a, "--journal", "x", msg, sizeof msg), 0);
    /* Into a loop's config: what is given, and the loop's own defaults where nothing is. */
    tfn_config nc = {.mem_limit = 1, .out_max = 2};
    tfn_limits_apply(&b, &nc);
    CHECK(nc.mem_limit == 1 && nc.out_max == 2 && nc.max_conns == 4096);
    tfn_limits_apply(&a, &nc);
    CHECK(nc.mem_limit == (uint64_t)64 << 20 && nc.out_max == (size_t)4 << 20);
    CHECK(nc.idle_full_timeout_s == 9 && nc.conn_reserve == -1);
}

/* tfu_opts_load_n: the same rule for a struct whose size is a uint32_t (tf_orders_opts). A
 * size between _V1 and _V2 is a layout: its bytes are read, the fields past it read NULL. */
static void test_sized_u32(void)
{
    tf_orders_opts in = {.timeout_ms = 5,
                         .max_fills = 6,
                         .session = "s",
                         .secret = "k",
                         .secret_len = 1,
                         .tls_ca = "ca"};
    tf_orders_opts got;
    memset(&got, 0xA5, sizeof got);
    size_t mid = TF_ORDERS_OPTS_SIZE_V1 + sizeof(const char *);
    CHECK_RC(tfu_opts_load_n(&got, sizeof got, &in, mid, TF_ORDERS_OPTS_SIZE_V1), 0);
    CHECK(got.timeout_ms == 5 && got.max_fills == 6 && got.session == in.session);
    CHECK(got.secret == NULL && got.secret_len == 0 && got.tls_ca == NULL);
    /* dst's size is the caller's to set: the bytes are copied as they are. */
    CHECK(got.size == in.size);
    /* 0: the library's layout, every field read. */
    CHECK_RC(tfu_opts_load_n(&got, sizeof got, &in, 0, TF_ORDERS_OPTS_SIZE_V1), 0);
    CHECK(got.tls_ca == in.tls_ca && got.secret_len == 1);
    /* Below _V1: refused, dst untouched. */
    tf_orders_opts before = got;
    CHECK_RC(
        tfu_opts_load_n(&got, sizeof got, &in, TF_ORDERS_OPTS_SIZE_V1 - 1, TF_ORDERS_OPTS_SIZE_V1),
        TF_E_INVALID_ARG);
    CHECK(memcmp(&got, &before, sizeof got) == 0);
    /* Larger: the unknown tail must be zero. */
    struct {
        tf_orders_opts o;
        uint32_t next;
    } newer = {.o = in};
    CHECK_RC(tfu_opts_load_n(&got, sizeof got, &newer, sizeof newer, TF_ORDERS_OPTS_SIZE_V1), 0);
    newer.next = 1;
    CHECK_RC(tfu_opts_load_n(&got, sizeof got, &newer, sizeof newer, TF_ORDERS_OPTS_SIZE_V1),
             TF_E_INVALID_ARG);
}

/* tf_engine_config and tf_engine_flow_config under the one size rule (they refused 0 and
 * ignored a non-zero tail before): 0 is this layout; below the first layout is refused; a
 * longer struct is taken when its tail is zero and refused when it is not; the same for a
 * snapshot's override. */
static void test_engine_configs(void)
{
    uint64_t inst = 7;
    struct {
        tf_engine_config c;
        uint64_t tail;
    } big = {{.instruments = &inst, .n_instruments = 1, .max_orders = 16}, 0};
    tf_engine *e = NULL;
    big.c.size = 0;
    CHECK_RC(tf_engine_create(&big.c, &e), 0);
    CHECK(tf_engine_bytes_needed(&big.c) > 0);
    tf_engine_destroy(e);
    e = NULL;
    big.c.size = TF_ENGINE_CONFIG_SIZE_V1 - 8;
    CHECK_RC(tf_engine_create(&big.c, &e), TF_E_INVALID_ARG);
    CHECK_EQ(tf_engine_bytes_needed(&big.c), 0);
    big.c.size = sizeof big;
    CHECK_RC(tf_engine_create(&big.c, &e), 0);
    uint8_t snap[4096];
    uint64_t len = 0;
    CHECK_RC(tf_engine_snapshot_write(e, snap, sizeof snap, &len), 0);
    tf_engine_destroy(e);
    e = NULL;
    big.tail = 1;
    CHECK_RC(tf_engine_create(&big.c, &e), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_snapshot_read(snap, len, &big.c, &e), TF_E_INVALID_ARG);
    big.tail = 0;
    big.c.max_orders = 32;
    CHECK_RC(tf_engine_snapshot_read(snap, len, &big.c, &e), 0);
    tf_engine_destroy(e);
    e = NULL;

    struct {
        tf_engine_flow_config c;
        uint64_t tail;
    } fl = {{.seed = 1}, 0};
    tf_engine_flow *f = NULL;
    CHECK_RC(tf_engine_flow_open(&fl.c, &f), 0); /* size 0 */
    tf_engine_flow_close(f);
    f = NULL;
    fl.c.size = TF_ENGINE_FLOW_CONFIG_SIZE_V1 - 4;
    CHECK_RC(tf_engine_flow_open(&fl.c, &f), TF_E_INVALID_ARG);
    fl.c.size = sizeof fl;
    CHECK_RC(tf_engine_flow_open(&fl.c, &f), 0);
    tf_engine_flow_close(f);
    f = NULL;
    fl.tail = 9;
    CHECK_RC(tf_engine_flow_open(&fl.c, &f), TF_E_INVALID_ARG);
}

int main(void)
{
    test_limit_table();
    test_server_limits();
    test_sized_u32();
    test_engine_configs();
    /* A v2 library, a v1 caller: a read, b and c take their default 0, size becomes known. */
    v1 old = {.size = sizeof old, .a = 7};
    v2 got;
    memset(&got, 0xA5, sizeof got);
    CHECK_RC(tfu_opts_load(&got, sizeof got, &old, V1_MIN), 0);
    CHECK(got.size == sizeof got && got.a == 7 && got.b == 0 && got.c == 0);
    /* ... and a v1 caller whose size ends at a (no tail padding) is the same layout. */
    old.size = V1_MIN;
    memset(&got, 0xA5, sizeof got);
    CHECK_RC(tfu_opts_load(&got, sizeof got, &old, V1_MIN), 0);
    CHECK(got.a == 7 && got.b == 0 && got.c == 0);

    /* Size 0: the library's own layout. */
    v2 cur = {.a = 1, .b = 2, .c = 3};
    memset(&got, 0xA5, sizeof got);
    CHECK_RC(tfu_opts_load(&got, sizeof got, &cur, V1_MIN), 0);
    CHECK(got.size == sizeof got && got.a == 1 && got.b == 2 && got.c == 3);

    /* Too small: below the first sized layout; dst untouched. */
    v1 small = {.size = V1_MIN - 1, .a = 1};
    memset(&got, 0xA5, sizeof got);
    v2 before = got;
    CHECK_RC(tfu_opts_load(&got, sizeof got, &small, V1_MIN), TF_E_INVALID_ARG);
    CHECK(memcmp(&got, &before, sizeof got) == 0);
    small.size = sizeof(size_t);
    CHECK_RC(tfu_opts_load(&got, sizeof got, &small, V1_MIN), TF_E_INVALID_ARG);

    /* A v1 library, a v2 caller: accepted when b and c are zero (a read), refused otherwise. */
    v2 newer = {.size = sizeof newer, .a = 5};
    v1 lib;
    CHECK_RC(tfu_opts_load(&lib, sizeof lib, &newer, V1_MIN), 0);
    CHECK(lib.size == sizeof lib && lib.a == 5);
    newer.c = 1;
    memset(&lib, 0xA5, sizeof lib);
    v1 lib_before = lib;
    CHECK_RC(tfu_opts_load(&lib, sizeof lib, &newer, V1_MIN), TF_E_INVALID_ARG);
    CHECK(memcmp(&lib, &lib_before, sizeof lib) == 0);
    newer.c = 0;
    newer.b = INT64_MIN; /* only the top byte set */
    CHECK_RC(tfu_opts_load(&lib, sizeof lib, &newer, V1_MIN), TF_E_INVALID_ARG);

    /* Every byte beyond the known layout is checked, up to the caller's size. */
    union {
        v1 o;
        unsigned char raw[256];
    } big;
    memset(&big, 0, sizeof big);
    big.o.size = sizeof big;
    big.o.a = 9;
    CHECK_RC(tfu_opts_load(&lib, sizeof lib, &big.o, V1_MIN), 0);
    CHECK(lib.a == 9);
    for (size_t k = sizeof(v1); k < sizeof big; k += 37) {
        big.raw[k] = 1;
        CHECK_RC(tfu_opts_load(&lib, sizeof lib, &big.o, V1_MIN), TF_E_INVALID_ARG);
        big.raw[k] = 0;
    }
    big.raw[sizeof big - 1] = 0x80;
    CHECK_RC(tfu_opts_load(&lib, sizeof lib, &big.o, V1_MIN), TF_E_INVALID_ARG);
    /* Bytes past the caller's size are not read: a shorter size ignores them. */
    big.o.size = sizeof big - 1;
    CHECK_RC(tfu_opts_load(&lib, sizeof lib, &big.o, V1_MIN), 0);
    return tf_test_report();
}
