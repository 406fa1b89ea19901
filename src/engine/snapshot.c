/* Snapshots: the whole engine state in one CRC32C-protected image (format in docs/engine.md).
 *
 *   0   "TFES" magic, u16 version (1, 2 or 3), u16 0
 *   8   u64 total length of the image (trailer included)
 *   16  u32 n_instruments, u32 max_orders, u64 max_bytes
 *   32  u64 next_order_id, last_command_seq, next_event_seq
 *   56  u64 applied, duplicates, skipped, events, trades, rejected
 *   104 u64 n_orders
 *   112 u64 instrument id * n_instruments (ascending)
 *       order * n_orders, in hash order (books ascending, bids then asks, best first, oldest
 *       first): u64 instrument_id, u64 side, i64 price, u64 order_id, account_id,
 *       client_order_id, remaining (56 bytes); version 3 adds u64 filled (64 bytes), and its
 *       side field has bit 8 set for an order a gateway command placed
 *       version 3 only: u64 gateway flag (0 or 1), then i64 last trade price * n_instruments
 *       (0 = none yet), in the instruments' order
 *       versions 2 and 3: u64 n_stp, then n_stp * (u64 account_id, u64 mode), accounts
 *       ascending (16 bytes each); version 2 has n_stp >= 1, version 3 may have 0
 *       u32 CRC32C of every byte before it
 * All little-endian. An image is written in the oldest version that holds the state: version 1
 * (byte for byte as before) without STP settings, without the gateway flag and before any trade;
 * version 2 with STP settings only; version 3 once a book has traded or a gateway command has
 * been applied. Versions 1 and 2 load with filled 0, the flag off and no last trade.
 * Loading rebuilds the books by resting the orders in that order, which restores every level's time
 * priority.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/opts_size.h"
#include "engine/engine_internal.h"
#include "orderflow/fio.h"

#define HEAD_LEN 112
#define ORDER_LEN 56
#define ORDER_LEN_V3 64
#define VERSION 1
#define VERSION_STP 2
#define VERSION_V3 3
#define STP_LEN 16

/* The image is little-endian; on a little-endian host a fixed-size memcpy is one move. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline void st64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
#else
static inline void st64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}
#endif

static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The oldest version that holds the engine's state. */
static int version_of(const tf_engine *e)
{
    int traded = 0;
    for (uint32_t b = 0; b < e->n_books && !traded; b++)
        traded = e->last_trade[b] != 0;
    if (traded || e->gateway)
        return VERSION_V3;
    return e->n_modes ? VERSION_STP : VERSION;
}

uint64_t tf_engine_snapshot_size(const tf_engine *e)
{
    if (!e)
        return 0;
    int v = version_of(e);
    if (v == VERSION_V3)
        return HEAD_LEN + 16ull * e->n_books + ORDER_LEN_V3 * e->live + 8 + 8 +
               STP_LEN * (uint64_t)e->n_modes + 4;
    uint64_t stp = e->n_modes ? 8 + STP_LEN * (uint64_t)e->n_modes : 0;
    return HEAD_LEN + 8ull * e->n_books + ORDER_LEN * e->live + stp + 4;
}

int tf_engine_snapshot_write(const tf_engine *e, void *buf, uint64_t cap, uint64_t *len)
{
    if (!e || !buf || !len)
        return TF_E_NULL_ARG;
    uint64_t need = tf_engine_snapshot_size(e);
    if (cap < need)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    uint8_t *p = buf;
    int v = version_of(e);
    memcpy(p, "TFES", 4);
    p[4] = (uint8_t)v;
    p[5] = p[6] = p[7] = 0;
    st64(p + 8, need);
    st32(p + 16, e->n_books);
    st32(p + 20, e->max_orders);
    const uint64_t head[] = {e->max_bytes,      e->next_order_id, e->last_command_seq,
                             e->next_event_seq, e->applied,       e->duplicates,
                             e->skipped,        e->events,        e->trades,
                             e->rejected,       e->live};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        st64(p + 24 + 8 * i, head[i]);
    uint8_t *q = p + HEAD_LEN;
    for (uint32_t b = 0; b < e->n_books; b++, q += 8)
        st64(q, e->instrument[b]);
    const int n_fields = v == VERSION_V3 ? 8 : 7;
    for (uint32_t t = 0; t < 2 * e->n_books; t++)
        for (uint32_t li = e->sides[t].best; li; li = eng_tree_next(e, li))
            for (uint32_t oi = e->levels[li].head; oi; oi = e->orders[oi].next) {
                const eng_order *o = &e->orders[oi];
                const uint64_t f[] = {e->instrument[t >> 1],
                                      (t & 1) | (uint64_t)e->by_gateway[oi] << 8,
                                      (uint64_t)o->price,
                                      o->id,
                                      o->account,
                                      o->coid,
                                      o->remaining,
                                      e->orders[oi].filled};
                for (int i = 0; i < n_fields; i++)
                    st64(q + 8 * i, f[i]);
                q += 8 * (unsigned)n_fields;
            }
    if (v == VERSION_V3) {
        st64(q, (uint64_t)e->gateway);
        q += 8;
        for (uint32_t b = 0; b < e->n_books; b++, q += 8)
            st64(q, (uint64_t)e->last_trade[b]);
    }
    if (e->n_modes || v == VERSION_V3) {
        st64(q, e->n_modes);
        q += 8;
        for (uint32_t i = 0; i < e->n_stp; i++)
            if (e->stp[i].mode) {
                st64(q, e->stp[i].account);
                st64(q + 8, e->stp[i].mode);
                q += STP_LEN;
            }
    }
    st32(q, tf_crc32c(0, p, need - 4));
    *len = need;
    return 0;
}

/* One order of the image, checked against the engine being built and the order before it. */
static int load_order(tf_engine *e, const uint8_t *q, int v3, int *prev_tree, int64_t *prev_key)
{
    uint64_t instrument = ld64(q), side = ld64(q + 8), id = ld64(q + 24);
    uint64_t gateway = v3 ? side >> 8 : 0; /* bit 8: a gateway command placed it */
    side &= v3 ? 0xff : ~0ull;
    int64_t price = (int64_t)ld64(q + 16);
    uint64_t account = ld64(q + 32), coid = ld64(q + 40), remaining = ld64(q + 48);
    uint64_t filled = v3 ? ld64(q + 56) : 0;
    int book = eng_book_of(e, instrument);
    if (book < 0 || side > 1 || gateway > 1 || price <= 0 || remaining < 1 ||
        remaining > (uint64_t)INT64_MAX || id == 0 || id >= e->next_order_id ||
        e->live >= e->max_orders)
        return TF_E_ENGINE_SNAPSHOT;
    int tree = book * 2 + (int)side;
    int64_t key = eng_key((int)side, price);
    /* Hash order: trees ascending, keys ascending within a tree (ties: the image's order). */
    if (tree < *prev_tree || (tree == *prev_tree && key < *prev_key))
        return TF_E_ENGINE_SNAPSHOT;
    if (eng_find_id(e, id) || eng_find_client(e, account, coid))
        return TF_E_ENGINE_SNAPSHOT;
    uint32_t oi = eng_rest(e, (uint32_t)tree, price, id, account, coid, remaining);
    e->orders[oi].filled = filled;
    e->by_gateway[oi] = (uint8_t)gateway;
    *prev_tree = tree;
    *prev_key = key;
    return 0;
}

/* The length of a version-2 image's STP section (u64 count + entries), found from the end: the
 * count sits right after the orders, which the header's n_orders places. 0 when it does not fit. */
static uint64_t stp_section(const uint8_t *p, uint64_t len, uint32_t n_books, uint64_t n_orders)
{
    uint64_t body = len - HEAD_LEN - 4;
    if (n_books > TF_ENGINE_MAX_INSTRUMENTS || n_orders > TF_ENGINE_MAX_ORDERS)
        return 0;
    uint64_t at = 8ull * n_books + ORDER_LEN * n_orders; /* offset of n_stp within the body */
    if (body < at + 8)
        return 0;
    uint64_t n_stp = ld64(p + HEAD_LEN + at);
    if (n_stp == 0 || n_stp > TF_ENGINE_STP_ACCOUNTS || body - at - 8 != STP_LEN * n_stp)
        return 0;
    return 8 + STP_LEN * n_stp;
}

/* The length of a version-3 image's tail after the orders (gateway flag, last trades, u64 n_stp,
 * entries), found as stp_section finds version 2's. 0 when it does not fit. */
static uint64_t v3_tail(const uint8_t *p, uint64_t len, uint32_t n_books, uint64_t n_orders)
{
    uint64_t body = len - HEAD_LEN - 4;
    if (n_books > TF_ENGINE_MAX_INSTRUMENTS || n_orders > TF_ENGINE_MAX_ORDERS)
        return 0;
    uint64_t at = 8ull * n_books + ORDER_LEN_V3 * n_orders + 8 + 8ull * n_books; /* n_stp */
    if (body < at + 8)
        return 0;
    uint64_t n_stp = ld64(p + HEAD_LEN + at);
    if (n_stp > TF_ENGINE_STP_ACCOUNTS || body - at - 8 != STP_LEN * n_stp)
        return 0;
    return 8 + 8ull * n_books + 8 + STP_LEN * n_stp;
}

/* Version 3's gateway flag and last trade prices at *q (then *q is at n_stp). A book with a
 * partly filled order has traded: its last trade price cannot be 0. */
static int load_v3(tf_engine *e, const uint8_t **q)
{
    uint64_t flag = ld64(*q);
    if (flag > 1)
        return TF_E_ENGINE_SNAPSHOT;
    e->gateway = (int)flag;
    *q += 8;
    for (uint32_t b = 0; b < e->n_books; b++, *q += 8) {
        int64_t px = (int64_t)ld64(*q);
        if (px < 0)
            return TF_E_ENGINE_SNAPSHOT;
        e->last_trade[b] = px;
    }
    for (uint32_t t = 0; t < 2 * e->n_books; t++)
        for (uint32_t li = e->sides[t].best; li; li = eng_tree_next(e, li))
            for (uint32_t oi = e->levels[li].head; oi; oi = e->orders[oi].next)
                if (e->orders[oi].filled && !e->last_trade[t >> 1])
                    return TF_E_ENGINE_SNAPSHOT;
    return 0;
}

/* The STP entries at q: accounts strictly ascending, modes 1..3. */
static int load_stp(tf_engine *e, const uint8_t *q)
{
    uint64_t n = ld64(q);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t account = ld64(q + 8 + STP_LEN * i), mode = ld64(q + 16 + STP_LEN * i);
        if (mode < TF_ENGINE_STP_CANCEL_NEWEST || mode > TF_ENGINE_STP_CANCEL_BOTH ||
            (i && account <= e->stp[i - 1].account))
            return TF_E_ENGINE_SNAPSHOT;
        e->stp[i] = (eng_stp){.account = account, .mode = (uint32_t)mode};
        e->n_stp++;
        e->n_modes++;
    }
    return 0;
}

int tf_engine_snapshot_read(const void *buf, uint64_t len, const tf_engine_config *cfg_override,
                            tf_engine **out)
{
    if (!out)
        return TF_E_NULL_ARG;
    *out = NULL;
    if (!buf)
        return TF_E_NULL_ARG;
    const uint8_t *p = buf;
    if (len < HEAD_LEN + 4 || memcmp(p, "TFES", 4) || p[4] < VERSION || p[4] > VERSION_V3 || p[5] ||
        p[6] || p[7] || ld64(p + 8) != len)
        return TF_E_ENGINE_SNAPSHOT;
    const int v3 = p[4] == VERSION_V3;
    const uint64_t order_len = v3 ? ORDER_LEN_V3 : ORDER_LEN;
    uint32_t n_books = ld32(p + 16), max_orders = ld32(p + 20);
    uint64_t n_orders = ld64(p + 104);
    /* Counts are checked against the length by division before anything is sized by them. */
    uint64_t body = len - HEAD_LEN - 4, stp_len = 0;
    if (p[4] == VERSION_STP && (stp_len = stp_section(p, len, n_books, n_orders)) == 0)
        return TF_E_ENGINE_SNAPSHOT;
    if (v3 && (stp_len = v3_tail(p, len, n_books, n_orders)) == 0)
        return TF_E_ENGINE_SNAPSHOT;
    body -= stp_len;
    if (n_books == 0 || n_books > TF_ENGINE_MAX_INSTRUMENTS || body < 8ull * n_books ||
        (body - 8ull * n_books) % order_len || (body - 8ull * n_books) / order_len != n_orders)
        return TF_E_ENGINE_SNAPSHOT;
    if (tf_crc32c(0, p, len - 4) != ld32(p + len - 4))
        return TF_E_ENGINE_SNAPSHOT;
    tf_engine_config cfg = {
        .size = sizeof cfg,
        .instruments = (const uint64_t *)(p + HEAD_LEN), /* copied below if unaligned */
        .n_instruments = n_books,
        .max_orders = max_orders,
        .max_bytes = ld64(p + 24),
    };
    if (cfg_override) { /* read under the size rule (docs/api.md), as tf_engine_create does */
        tf_engine_config o;
        if (tfu_opts_load_n(&o, sizeof o, cfg_override, cfg_override->size,
                            TF_ENGINE_CONFIG_SIZE_V1))
            return TF_E_INVALID_ARG;
        if (o.max_orders)
            cfg.max_orders = o.max_orders;
        if (o.max_bytes)
            cfg.max_bytes = o.max_bytes;
    }
    if (n_orders > cfg.max_orders)
        return cfg.max_orders < max_orders ? TF_E_LIMIT : TF_E_ENGINE_SNAPSHOT;
    uint64_t *ids = malloc(8ull * n_books);
    if (!ids)
        return TF_E_NOMEM;
    for (uint32_t i = 0; i < n_books; i++)
        ids[i] = ld64(p + HEAD_LEN + 8ull * i);
    for (uint32_t i = 1; i < n_books; i++)
        if (ids[i] <= ids[i - 1]) {
            free(ids);
            return TF_E_ENGINE_SNAPSHOT;
        }
    cfg.instruments = ids;
    tf_engine *e;
    int rc = tf_engine_create(&cfg, &e);
    free(ids);
    if (rc)
        return rc == TF_E_INVALID_ARG ? TF_E_ENGINE_SNAPSHOT : rc;
    e->next_order_id = ld64(p + 32);
    e->last_command_seq = ld64(p + 40);
    e->next_event_seq = ld64(p + 48);
    e->applied = ld64(p + 56);
    e->duplicates = ld64(p + 64);
    e->skipped = ld64(p + 72);
    e->events = ld64(p + 80);
    e->trades = ld64(p + 88);
    e->rejected = ld64(p + 96);
    if (e->next_order_id == 0 || e->next_event_seq == 0) {
        tf_engine_destroy(e);
        return TF_E_ENGINE_SNAPSHOT;
    }
    const uint8_t *q = p + HEAD_LEN + 8ull * n_books;
    int prev_tree = -1;
    int64_t prev_key = INT64_MIN;
    for (uint64_t i = 0; i < n_orders; i++, q += order_len)
        if ((rc = load_order(e, q, v3, &prev_tree, &prev_key))) {
            tf_engine_destroy(e);
            return rc;
        }
    if (v3 && (rc = load_v3(e, &q))) {
        tf_engine_destroy(e);
        return rc;
    }
    if (stp_len && (rc = load_stp(e, q))) {
        tf_engine_destroy(e);
        return rc;
    }
    *out = e;
    return 0;
}

int tf_engine_snapshot_save(const tf_engine *e, const char *path)
{
    if (!e || !path)
        return TF_E_NULL_ARG;
    uint64_t n = tf_engine_snapshot_size(e);
    uint8_t *buf = malloc(n);
    if (!buf)
        return TF_E_NOMEM;
    uint64_t len;
    int rc = tf_engine_snapshot_write(e, buf, n, &len);
    if (!rc)
        rc = tfo_replace_file(path, buf, len);
    free(buf);
    return rc;
}

int tf_engine_snapshot_load(const char *path, const tf_engine_config *cfg_override, tf_engine **out)
{
    if (!out)
        return TF_E_NULL_ARG;
    *out = NULL;
    if (!path)
        return TF_E_NULL_ARG;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st)) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return TF_E_ENGINE_SNAPSHOT;
    }
    uint64_t n = (uint64_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    int rc = buf ? 0 : TF_E_NOMEM;
    for (uint64_t got = 0; !rc && got < n;) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = r < 0 ? -errno : TF_E_ENGINE_SNAPSHOT;
        else
            got += (uint64_t)r;
    }
    close(fd);
    /* The engine service's snapshot.tfs ends with a 40-byte block binding it to its journal
     * ("TFSB", docs/engine-service.md): the image is what comes before it. */
    if (!rc && n > HEAD_LEN + 4 + 40 && ld64(buf + 8) == n - 40 && !memcmp(buf + n - 40, "TFSB", 4))
        n -= 40;
    if (!rc)
        rc = tf_engine_snapshot_read(buf, n, cfg_override, out);
    free(buf);
    return rc;
}
