/* The size rule shared by the growable option structs (src/common/opts_size.h, used by
 * tf_sweep_opts, tf_client_opts and tf_journal_opts), on two made-up layouts of one struct: v1,
 * the first sized layout, and v2, which appends two fields after sizeof(v1). A v2 library reads
 * a v1 caller (the missing fields read 0 = default); a v1 library reads a v2 caller only when the
 * fields it does not know are zero. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/opts_size.h"
#include "harness.h"
#include "tollfree/error.h"

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
    const tfu_limit_opt t[] = {
        {"--max-conns", 0, 1, 100, &conns, NULL, 0},
        {"--conn-reserve", 0, 0, 100, &reserve, NULL, 1},
        {"--max-memory", 1, 1 << 20, UINT64_MAX / 2, NULL, &mem, 0},
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
}

int main(void)
{
    test_limit_table();
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
