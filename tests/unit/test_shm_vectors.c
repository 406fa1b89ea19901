/* The C rings (tfw_ring_reserve / tfw_ring_peek, used by the server and the C client) against the
 * shared-memory ring vectors the Python client also passes (tests/vectors/shm_ring.txt; its
 * header says what each line means). Each vector starts from a zeroed mapping set up as a
 * client's: the producer side is the request ring, the consumer side the response ring. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tollfree/error.h"
#include "tollfree/shm.h"
#include "wire/wire_internal.h"

#define MAX_RING 4096
#define MAX_TOK 16

static uint8_t g_map[TF_SHM_CTRL_BYTES + 2 * MAX_RING] __attribute__((aligned(64)));

static uint64_t num(const char *s)
{
    return strtoull(s, NULL, 0);
}

static uint64_t *u64at(size_t off)
{
    return (uint64_t *)(g_map + off);
}

static uint32_t ring_u32(const uint8_t *data, uint64_t off)
{
    uint32_t v;
    memcpy(&v, data + off, 4);
    return v;
}

/* Nonzero u32 words of the ring other than the one at `except` (UINT64_MAX: none). */
static int stray_words(const uint8_t *data, uint64_t ring, uint64_t except)
{
    int n = 0;
    for (uint64_t off = 0; off < ring; off += 4)
        if (off != except && ring_u32(data, off))
            n++;
    return n;
}

/* consume RING TAIL HEAD WORDS RESULT... */
static void consume(char **tok, int nt, int line)
{
    int failed = tf_test_failed;
    uint64_t ring = num(tok[1]), tail = num(tok[2]), head = num(tok[3]);
    tfw_ring_prod p;
    tfw_ring_cons c;
    memset(g_map, 0, sizeof g_map);
    tfw_ring_setup(g_map, ring, 0, &p, &c);
    uint8_t *data = (uint8_t *)c.data;
    if (strcmp(tok[4], "-")) {
        char words[256];
        snprintf(words, sizeof words, "%s", tok[4]);
        for (char *w = strtok(words, ","); w; w = strtok(NULL, ",")) {
            char *colon = strchr(w, ':');
            uint64_t off = strtoull(w, NULL, 10);
            uint32_t v = (uint32_t)strtoul(colon + 1, NULL, 16);
            memcpy(data + off, &v, 4);
        }
    }
    *u64at(TF_SHM_OFF_RESP_HEAD) = head;
    *u64at(TF_SHM_OFF_RESP_TAIL) = tail;
    c.local_tail = tail;
    const uint8_t *frame = NULL;
    uint32_t len = 0;
    int rc = tfw_ring_peek(&c, UINT64_MAX, &frame, &len);
    const char *want = tok[5];
    if (!strcmp(want, "frame") && nt == 9) {
        CHECK_EQ(rc, 1);
        if (rc == 1) {
            CHECK_EQ((uint64_t)(frame - c.data), num(tok[6]));
            CHECK_EQ(len, num(tok[7]));
            tfw_ring_consume(&c, len);
            CHECK_EQ(*u64at(TF_SHM_OFF_RESP_TAIL), num(tok[8]));
        }
    } else if (!strcmp(want, "empty") && nt == 7) {
        CHECK_EQ(rc, 0);
        CHECK_EQ(*u64at(TF_SHM_OFF_RESP_TAIL), num(tok[6]));
    } else if (!strcmp(want, "corrupt") && nt == 6) {
        CHECK_RC(rc, TF_E_SHM_CORRUPT);
    } else {
        fprintf(stderr, "line %d: bad consume vector\n", line);
        CHECK(0);
    }
    if (tf_test_failed != failed)
        fprintf(stderr, "  (vector on line %d)\n", line);
}

/* produce RING HEAD TAIL SPAN RESULT... */
static void produce(char **tok, int nt, int line)
{
    int failed = tf_test_failed;
    uint64_t ring = num(tok[1]), head = num(tok[2]), tail = num(tok[3]), span = num(tok[4]);
    tfw_ring_prod p;
    tfw_ring_cons c;
    memset(g_map, 0, sizeof g_map);
    tfw_ring_setup(g_map, ring, 0, &p, &c);
    *u64at(TF_SHM_OFF_REQ_HEAD) = head;
    *u64at(TF_SHM_OFF_REQ_TAIL) = tail;
    p.local_head = head;
    uint8_t *where = NULL;
    int rc = tfw_ring_reserve(&p, span, &where);
    const char *want = tok[5];
    uint64_t *hw = u64at(TF_SHM_OFF_REQ_HEAD);
    if (!strcmp(want, "at") && nt == 8) {
        CHECK_EQ(rc, 1);
        if (rc == 1) {
            CHECK_EQ((uint64_t)(where - p.data), num(tok[6]));
            CHECK_EQ(stray_words(p.data, ring, UINT64_MAX), 0);
            tfw_ring_publish(&p, span);
            CHECK_EQ(*hw, num(tok[7]));
        }
    } else if (!strcmp(want, "wrap") && nt == 9) {
        CHECK_EQ(rc, 1);
        if (rc == 1) {
            CHECK_EQ(ring_u32(p.data, num(tok[6])), TF_SHM_WRAP);
            CHECK_EQ(stray_words(p.data, ring, num(tok[6])), 0);
            CHECK_EQ((uint64_t)(where - p.data), num(tok[7]));
            CHECK_EQ(*hw, head); /* the wrap goes out with the frame */
            tfw_ring_publish(&p, span);
            CHECK_EQ(*hw, num(tok[8]));
        }
    } else if (!strcmp(want, "full") && nt == 7) {
        CHECK_EQ(rc, 0);
        CHECK_EQ(stray_words(p.data, ring, UINT64_MAX), 0);
        CHECK_EQ(*hw, num(tok[6]));
    } else if (!strcmp(want, "wrap_full") && nt == 8) {
        CHECK_EQ(rc, 0);
        CHECK_EQ(ring_u32(p.data, num(tok[6])), TF_SHM_WRAP);
        CHECK_EQ(stray_words(p.data, ring, num(tok[6])), 0);
        CHECK_EQ(*hw, num(tok[7]));
    } else if (!strcmp(want, "too_big") && nt == 6) {
        CHECK_RC(rc, TF_E_SHM_TOO_BIG);
    } else if (!strcmp(want, "corrupt") && nt == 6) {
        CHECK_RC(rc, TF_E_SHM_CORRUPT);
        CHECK_EQ(*hw, head);
    } else {
        fprintf(stderr, "line %d: bad produce vector\n", line);
        CHECK(0);
    }
    if (tf_test_failed != failed)
        fprintf(stderr, "  (vector on line %d)\n", line);
}

int main(void)
{
    char line[512];
    FILE *fp = tf_test_open_vectors("shm_ring.txt");
    int n_cons = 0, n_prod = 0, lineno = 0;
    while (fp && fgets(line, sizeof line, fp)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *tok[MAX_TOK] = {0};
        int nt = 0;
        for (char *p = strtok(line, " "); p && nt < MAX_TOK; p = strtok(NULL, " "))
            tok[nt++] = p;
        if (nt < 6 || num(tok[1]) > MAX_RING || (num(tok[1]) & (num(tok[1]) - 1))) {
            fprintf(stderr, "line %d: malformed vector\n", lineno);
            CHECK(0);
            continue;
        }
        /* tok[] points into line; consume() reuses strtok on its own copy of the words. */
        if (!strcmp(tok[0], "consume")) {
            consume(tok, nt, lineno);
            n_cons++;
        } else if (!strcmp(tok[0], "produce")) {
            produce(tok, nt, lineno);
            n_prod++;
        } else {
            fprintf(stderr, "line %d: unknown vector kind %s\n", lineno, tok[0]);
            CHECK(0);
        }
    }
    if (fp)
        fclose(fp);
    printf("%d consume and %d produce vectors\n", n_cons, n_prod);
    CHECK(n_cons >= 20);
    CHECK(n_prod >= 15);
    return tf_test_report();
}
