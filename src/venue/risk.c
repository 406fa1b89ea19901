/* Pre-trade risk state and checks (docs/venue.md, "Risk"), and the payloads of the risk
 * records 0x11-0x13. The state changes only through records (a config's RiskLimits, a
 * KillSwitch), so a replay of the journal makes the same decisions. */
#include <stdlib.h>
#include <string.h>

#include "common/table.h"
#include "engine/risk_view.h"
#include "venue/risk.h"

__extension__ typedef unsigned __int128 u128;

#define PROFILES_CAP (2 * TFV_RISK_MAX_ACCOUNTS + 2) /* compacted when full */
#define PROFILE_SEARCH 64 /* profiles a new account's limits are compared with */

/* What the checks read of an account's limits, on a cache line of its own. Accounts with the
 * same limits share one profile (a config usually gives many accounts the same ones), so the
 * checks read a small per-account index and a few hot lines, not one line per account: with
 * 1,000 accounts the lines were 64 KB, more than the L1 cache, and a check missed it nearly
 * every time. */
typedef struct profile {
    _Alignas(64) uint64_t max_qty; /* UINT64_MAX: none (a valid quantity is <= INT64_MAX) */
    uint64_t max_notional;         /* 0: none */
    uint64_t band;                 /* ticks or basis points (bps) */
    int64_t ref_price;             /* with REF_FIXED */
    uint32_t max_open;             /* 0: none */
    uint8_t ref;                   /* REF_*: where the band's reference comes from, or no band */
    uint8_t bps;                   /* the band is in basis points (else in ticks) */
} profile;

/* The band compiled per profile: one test of `ref` tells a profile without a band (every other
 * absent rule is one test as well: max_qty UINT64_MAX, max_notional 0, max_open 0). */
enum { REF_NONE, REF_FIXED, REF_BOOK, REF_LAST };

/* prof[0] is the profile of an account without limits: every rule absent, so an account the
 * config does not name passes them all without a test of its own. */
#define NO_LIMITS 0

struct tfv_risk {
    struct tfv_risk_head h; /* n, n_killed: what tfv_risk_check reads inline (risk.h) */
    uint32_t span;          /* dense: n (account a is at a - first when below span), else 0 */
    uint64_t first;         /* ids[0] (0 without accounts) */
    int dense;              /* the accounts are consecutive ids (or there are none) */
    tf_engine *e;
    tfv_limits *acct; /* ascending by account: the limits as configured */
    uint64_t *ids;    /* [i]: acct[i].account, what the lookups compare */
    uint16_t *pix;    /* [i]: acct[i]'s profile */
    profile *prof;
    uint32_t n_prof;
    tfu_table index;  /* account -> position in acct + 1 (table.h); rebuilt on a change */
    uint64_t *killed; /* ascending */
    uint32_t cap_killed;
};

/* ---- payloads --------------------------------------------------------------------------- */

static void st64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t ld64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* u64 account, max_qty, max_notional, band, i64 ref_price, u32 max_open, u8 band_unit, u8 stp,
 * u8 ref_last (0/1; 1 only with ref_price 0), u8 0. A record from before ref_last has 0 there: it
 * means what it meant (the configured reference, else the book's). */
int tfv_limits_encode(const tfv_limits *l, uint8_t out[TFV_RISK_LIMITS_LEN])
{
    st64(out, l->account);
    st64(out + 8, l->max_qty);
    st64(out + 16, l->max_notional);
    st64(out + 24, l->band);
    st64(out + 32, (uint64_t)l->ref_price);
    for (int i = 0; i < 4; i++)
        out[40 + i] = (uint8_t)(l->max_open >> (8 * i));
    out[44] = l->band_unit;
    out[45] = l->stp;
    out[46] = l->ref_last;
    out[47] = 0;
    return TFV_RISK_LIMITS_LEN;
}

int tfv_limits_decode(const uint8_t *p, size_t n, tfv_limits *out)
{
    if (n != TFV_RISK_LIMITS_LEN || p[44] > TFV_BAND_BPS || p[45] > TF_ENGINE_STP_CANCEL_BOTH ||
        p[46] > 1 || (p[46] && ld64(p + 32)) || p[47] || (int64_t)ld64(p + 32) < 0)
        return TF_E_PROTOCOL;
    *out = (tfv_limits){
        .account = ld64(p),
        .max_qty = ld64(p + 8),
        .max_notional = ld64(p + 16),
        .band = ld64(p + 24),
        .ref_price = (int64_t)ld64(p + 32),
        .max_open =
            (uint32_t)p[40] | (uint32_t)p[41] << 8 | (uint32_t)p[42] << 16 | (uint32_t)p[43] << 24,
        .band_unit = p[44],
        .stp = p[45],
        .ref_last = p[46],
    };
    return 0;
}

/* u64 command_seq, u64 account, u8 on (0/1) */
int tfv_kill_encode(uint64_t command_seq, uint64_t account, int on,
                    uint8_t out[TFV_KILL_SWITCH_LEN])
{
    st64(out, command_seq);
    st64(out + 8, account);
    out[16] = on ? 1 : 0;
    return TFV_KILL_SWITCH_LEN;
}

int tfv_kill_decode(const uint8_t *p, size_t n, uint64_t *command_seq, uint64_t *account, int *on)
{
    if (n != TFV_KILL_SWITCH_LEN || p[16] > 1)
        return TF_E_PROTOCOL;
    *command_seq = ld64(p);
    *account = ld64(p + 8);
    *on = p[16];
    return 0;
}

/* u64 command_seq, u64 session */
int tfv_cod_encode(uint64_t command_seq, uint64_t session,
                   uint8_t out[TFV_CANCEL_ON_DISCONNECT_LEN])
{
    st64(out, command_seq);
    st64(out + 8, session);
    return TFV_CANCEL_ON_DISCONNECT_LEN;
}

int tfv_cod_decode(const uint8_t *p, size_t n, uint64_t *command_seq, uint64_t *session)
{
    if (n != TFV_CANCEL_ON_DISCONNECT_LEN)
        return TF_E_PROTOCOL;
    *command_seq = ld64(p);
    *session = ld64(p + 8);
    return 0;
}

int tfv_risk_kind(int kind)
{
    return kind >= TFV_RISK_LIMITS && kind <= TFV_CANCEL_ON_DISCONNECT;
}

int tfv_risk_payload_size(int kind)
{
    switch (kind) {
    case TFV_RISK_LIMITS:
        return TFV_RISK_LIMITS_LEN;
    case TFV_KILL_SWITCH:
        return TFV_KILL_SWITCH_LEN;
    case TFV_CANCEL_ON_DISCONNECT:
        return TFV_CANCEL_ON_DISCONNECT_LEN;
    default:
        return TF_E_OFL_UNKNOWN_KIND;
    }
}

const char *tfv_risk_kind_name(int kind)
{
    switch (kind) {
    case TFV_RISK_LIMITS:
        return "RiskLimits";
    case TFV_KILL_SWITCH:
        return "KillSwitch";
    case TFV_CANCEL_ON_DISCONNECT:
        return "CancelOnDisconnect";
    default:
        return NULL;
    }
}

int tfv_risk_payload_check(int kind, const uint8_t *p, size_t n)
{
    int size = tfv_risk_payload_size(kind);
    if (size < 0)
        return size;
    if (n != (size_t)size)
        return TF_E_OFL_PAYLOAD_LENGTH;
    tfv_limits l;
    uint64_t a, b;
    int on;
    if (kind == TFV_RISK_LIMITS)
        return tfv_limits_decode(p, n, &l);
    if (kind == TFV_KILL_SWITCH)
        return tfv_kill_decode(p, n, &a, &b, &on);
    return tfv_cod_decode(p, n, &a, &b);
}

/* ---- state ------------------------------------------------------------------------------ */

static profile profile_from(const tfv_limits *l);
static void reindex(tfv_risk *r);

int tfv_risk_open(tf_engine *e, tfv_risk **out)
{
    tfv_risk *r = calloc(1, sizeof *r);
    if (!r)
        return TF_E_NOMEM;
    r->acct = calloc(TFV_RISK_MAX_ACCOUNTS, sizeof *r->acct);
    r->ids = calloc(TFV_RISK_MAX_ACCOUNTS, sizeof *r->ids);
    r->pix = calloc(TFV_RISK_MAX_ACCOUNTS, sizeof *r->pix);
    r->prof = aligned_alloc(_Alignof(profile), PROFILES_CAP * sizeof *r->prof);
    if (!r->acct || !r->ids || !r->pix || !r->prof ||
        tfu_table_init(&r->index, TFV_RISK_MAX_ACCOUNTS)) {
        tfv_risk_close(r);
        return TF_E_NOMEM;
    }
    r->e = e;
    r->n_prof = 1;
    r->prof[NO_LIMITS] = profile_from(&(tfv_limits){0});
    reindex(r);
    *out = r;
    return 0;
}

void tfv_risk_close(tfv_risk *r)
{
    if (!r)
        return;
    free(r->acct);
    free(r->ids);
    free(r->pix);
    free(r->prof);
    tfu_table_fini(&r->index);
    free(r->killed);
    free(r);
}

uint32_t tfv_risk_accounts(const tfv_risk *r)
{
    return r ? r->h.n : 0;
}

/* The index's entries are positions in ids[] + 1 (0 is the table's null). */
static uint64_t index_hash(const void *pool, uint32_t idx)
{
    return tfu_mix(((const tfv_risk *)pool)->ids[idx - 1]);
}

static int index_eq(const void *pool, uint32_t idx, const void *key)
{
    return ((const tfv_risk *)pool)->ids[idx - 1] == *(const uint64_t *)key;
}

/* The index over ids[]: a config change is rare, so it is rebuilt whole. */
static void reindex(tfv_risk *r)
{
    uint32_t n = r->h.n;
    tfu_table_clear(&r->index);
    for (uint32_t i = 0; i < n; i++)
        tfu_tab_insert(&r->index, tfu_mix(r->ids[i]), i + 1, index_hash, r);
    r->dense = !n || r->ids[n - 1] - r->ids[0] == n - 1;
    r->span = r->dense ? n : 0;
    r->first = n ? r->ids[0] : 0;
}

/* What a check made with `fast` returns where the full check would make a call (a kill switch
 * on, accounts that are not consecutive ids, a product past 2^64): the check then finishes with
 * the calls (replace_full, new_limit_check). Never a reason (those are > 0). */
#define BAIL (-1)

/* An account's profile through the index (accounts that are not consecutive ids). */
static __attribute__((noinline)) const profile *indexed_limits(const tfv_risk *r, uint64_t account)
{
    uint32_t idx = tfu_tab_find(&r->index, tfu_mix(account), index_eq, r, &account);
    return &r->prof[idx ? r->pix[idx - 1] : NO_LIMITS];
}

/* The profile of account (NO_LIMITS for one without limits) into *l. ids[] is ascending without
 * duplicates, so account a sits at a - ids[0] when the ids are consecutive (1..N: one compare,
 * no load of ids[]), else the index finds it: with fast, BAIL (returned) instead of that call. */
static inline __attribute__((always_inline)) int limits_of(const tfv_risk *r, uint64_t account,
                                                           const int fast, const profile **l)
{
    uint64_t d = account - r->first; /* wraps for an account below the first */
    if (__builtin_expect(d < r->span, 1))
        *l = &r->prof[r->pix[d]];
    else if (r->dense)
        *l = &r->prof[NO_LIMITS];
    else if (fast)
        return BAIL;
    else
        *l = indexed_limits(r, account);
    return 0;
}

static profile profile_from(const tfv_limits *l)
{
    profile p;
    memset(&p, 0, sizeof p); /* padding too: profiles are compared whole */
    p.max_qty = l->max_qty ? l->max_qty : UINT64_MAX;
    p.max_notional = l->max_notional;
    p.max_open = l->max_open;
    if (l->band) {
        p.band = l->band;
        p.bps = l->band_unit == TFV_BAND_BPS;
        p.ref = l->ref_price ? REF_FIXED : l->ref_last ? REF_LAST : REF_BOOK;
        p.ref_price = l->ref_price;
    }
    return p;
}

/* The profile of l: one of the first PROFILE_SEARCH alike (NO_LIMITS too), else a new one. */
static uint16_t profile_add(tfv_risk *r, const tfv_limits *l)
{
    profile p = profile_from(l);
    uint32_t k = r->n_prof < PROFILE_SEARCH ? r->n_prof : PROFILE_SEARCH;
    for (uint32_t j = 0; j < k; j++)
        if (!memcmp(&r->prof[j], &p, sizeof p))
            return (uint16_t)j;
    r->prof[r->n_prof] = p;
    return (uint16_t)r->n_prof++;
}

/* Every account's profile anew (profiles of limits since replaced are dropped). */
static void profiles_rebuild(tfv_risk *r)
{
    r->n_prof = 1; /* NO_LIMITS stays */
    for (uint32_t i = 0; i < r->h.n; i++)
        r->pix[i] = profile_add(r, &r->acct[i]);
}

int tfv_risk_apply_limits(tfv_risk *r, const tfv_limits *l)
{
    if (l->account == 0) { /* the reset: the previous config's settings go, and every STP
                            * mode (a snapshot may hold modes of a config not seen since) */
        for (uint32_t i = 0; i < r->h.n; i++)
            tf_engine_track_account(r->e, r->ids[i], 0);
        tf_engine_clear_stp(r->e);
        r->h.n = 0;
        r->n_prof = 1; /* NO_LIMITS stays */
        reindex(r);
        return 0;
    }
    uint32_t n = r->h.n, i = 0;
    while (i < n && r->ids[i] < l->account)
        i++;
    int have = i < n && r->ids[i] == l->account;
    if (!have && n == TFV_RISK_MAX_ACCOUNTS)
        return TF_E_LIMIT;
    int rc = tf_engine_set_stp(r->e, l->account, l->stp);
    if (!rc)
        rc = tf_engine_track_account(r->e, l->account, l->max_open != 0);
    if (rc)
        return rc;
    if (!have) {
        memmove(&r->acct[i + 1], &r->acct[i], (n - i) * sizeof *r->acct);
        memmove(&r->ids[i + 1], &r->ids[i], (n - i) * sizeof *r->ids);
        memmove(&r->pix[i + 1], &r->pix[i], (n - i) * sizeof *r->pix);
        r->h.n++;
    }
    r->acct[i] = *l;
    r->ids[i] = l->account;
    if (r->n_prof == PROFILES_CAP) /* at most one profile per account stays in use */
        profiles_rebuild(r);
    r->pix[i] = profile_add(r, l);
    reindex(r);
    return 0;
}

static uint32_t killed_at(const tfv_risk *r, uint64_t account)
{
    uint32_t i = 0;
    while (i < r->h.n_killed && r->killed[i] < account)
        i++;
    return i;
}

int tfv_risk_killed(const tfv_risk *r, uint64_t account)
{
    if (!r || !r->h.n_killed)
        return 0;
    uint32_t i = killed_at(r, account);
    return i < r->h.n_killed && r->killed[i] == account;
}

int tfv_risk_kill(tfv_risk *r, uint64_t command_seq, uint64_t account, int on, tf_engine_sink *sink)
{
    uint32_t i = killed_at(r, account);
    int is_on = i < r->h.n_killed && r->killed[i] == account;
    if (on && !is_on) {
        if (r->h.n_killed == r->cap_killed) {
            uint32_t cap = r->cap_killed ? r->cap_killed * 2 : 16;
            uint64_t *k = realloc(r->killed, cap * sizeof *k);
            if (!k)
                return TF_E_NOMEM;
            r->killed = k;
            r->cap_killed = cap;
        }
        memmove(&r->killed[i + 1], &r->killed[i], (r->h.n_killed - i) * sizeof *r->killed);
        r->killed[i] = account;
        r->h.n_killed++;
    } else if (!on && is_on) {
        memmove(&r->killed[i], &r->killed[i + 1], (r->h.n_killed - i - 1) * sizeof *r->killed);
        r->h.n_killed--;
    }
    if (!on)
        return TF_ENGINE_APPLIED;
    return tf_engine_cancel_account(r->e, command_seq, account, sink);
}

int tfv_risk_apply_record(tfv_risk *r, int kind, const uint8_t *p, size_t n, tf_engine_sink *sink)
{
    tfv_limits l;
    uint64_t seq, account;
    int on, rc;
    if (kind == TFV_RISK_LIMITS) {
        if ((rc = tfv_limits_decode(p, n, &l)))
            return rc;
        rc = tfv_risk_apply_limits(r, &l);
        return rc ? rc : TF_ENGINE_APPLIED;
    }
    if (kind == TFV_KILL_SWITCH) {
        if ((rc = tfv_kill_decode(p, n, &seq, &account, &on)))
            return rc;
        return tfv_risk_kill(r, seq, account, on, sink);
    }
    return TF_E_OFL_UNKNOWN_KIND;
}

/* ---- checks ----------------------------------------------------------------------------- */

/* The kill switch's verdict alone: for a command the limits do not look at (the engine rejects
 * it anyway) or an account with the switch on. Off the common path. */
static __attribute__((noinline)) int kill_rule(const tfv_risk *r, uint64_t account)
{
    return tfv_risk_killed(r, account) ? TFV_REASON_KILL_SWITCH : 0;
}

/* qty * price > max_notional, exactly (a product past 2^64 is past every limit); price > 0. */
static inline __attribute__((always_inline)) int over_notional(const profile *l, uint64_t qty,
                                                               int64_t price)
{
    uint64_t v;
    if (!l->max_notional)
        return 0;
    if (__builtin_mul_overflow(qty, (uint64_t)price, &v)) /* the flag of the multiply: a jump */
        return 1;
    return v > l->max_notional;
}

/* diff * 10000 > ref * bps in 128 bits: off the common path (a product past 2^64). */
static __attribute__((noinline)) int outside_band_wide(uint64_t diff, uint64_t ref, uint64_t bps)
{
    return (u128)diff * 10000 > (u128)ref * bps;
}

/* |price - ref| beyond the band around ref (> 0), in ticks or basis points: 1 or 0 (or BAIL with
 * fast, for a product past 2^64). */
static inline __attribute__((always_inline)) int outside_band(const profile *l, int64_t ref,
                                                              int64_t price, const int fast)
{
    /* both are in (0, INT64_MAX], so the difference fits; a select, not a branch on the side of
     * the reference the price is on (a coin toss in a flow of buys and sells) */
    int64_t s = price - ref;
    uint64_t diff = s < 0 ? 0 - (uint64_t)s : (uint64_t)s;
    if (!l->bps)
        return diff > l->band;
    uint64_t a, b; /* the exact 64-bit products when both fit (nearly always), else 128-bit */
    if (!__builtin_mul_overflow(diff, (uint64_t)10000, &a) &&
        !__builtin_mul_overflow((uint64_t)ref, l->band, &b))
        return a > b;
    return fast ? BAIL : outside_band_wide(diff, (uint64_t)ref, l->band);
}

static int qty_valid(tf_ofl_qty q)
{
    return q.hi == 0 && q.lo - 1 < (uint64_t)INT64_MAX; /* 1..INT64_MAX (0 wraps) */
}

/* The limits for a Replace or ReplaceByClient of the live order o to (price, q), a valid quantity
 * and price > 0 that does not only reduce the order: quantity, notional, band (its reference is
 * o's book's, read only when the profile has a band that needs it). A replace adds no order, so
 * max_open does not apply. With fast: BAIL where a call would be made. */
static inline __attribute__((always_inline)) int
replace_limits(const tfv_risk *r, const eng_order *o, int64_t price, uint64_t qty, const int fast)
{
    const profile *l;
    if (limits_of(r, o->account, fast, &l))
        return BAIL;
    if (qty > l->max_qty)
        return TFV_REASON_MAX_QUANTITY;
    if (over_notional(l, qty, price))
        return TFV_REASON_MAX_NOTIONAL;
    if (l->ref == REF_NONE)
        return 0;
    /* the book's reference first: the usual band, one test */
    int64_t ref = __builtin_expect(l->ref == REF_BOOK, 1) ? eng_risk_ref(r->e, o->tree, 0)
                  : l->ref == REF_LAST                    ? eng_risk_ref(r->e, o->tree, 1)
                                                          : l->ref_price;
    int out = ref > 0 ? outside_band(l, ref, price, fast) : 0;
    return fast && out == BAIL ? BAIL : out ? TFV_REASON_PRICE_BAND : 0;
}

/* The same while some kill switch is on: the account's switch first. A function of its own, so
 * that the common path (no switch on) makes no call and needs no frame. */
static __attribute__((noinline)) int replace_killed(const tfv_risk *r, const eng_order *o,
                                                    int64_t price, uint64_t qty)
{
    if (tfv_risk_killed(r, o->account))
        return TFV_REASON_KILL_SWITCH;
    return replace_limits(r, o, price, qty, 0);
}

/* A Replace or ReplaceByClient of the live order o to (price, q), in the rules' order (kill
 * switch, then the limits). One that only reduces what is there (same price, a valid quantity not
 * above the remaining) always passes; one the engine will reject (a bad quantity or price) meets
 * the kill switch alone. With fast: no call, BAIL where one would be made (a switch on). */
static inline __attribute__((always_inline)) int
replace_rules(const tfv_risk *r, const eng_order *o, int64_t price, tf_ofl_qty q, const int fast)
{
    int killed = __builtin_expect(r->h.n_killed != 0, 0);
    if (!qty_valid(q) || price <= 0)
        return !killed ? 0 : fast ? BAIL : kill_rule(r, o->account);
    if (price == o->price && q.lo <= o->remaining)
        return 0;
    if (killed)
        return fast ? BAIL : replace_killed(r, o, price, q.lo);
    return replace_limits(r, o, price, q.lo, fast);
}

/* A new order of an account, in the rules' order: kill switch, quantity, then for a limit order
 * (price != NULL) notional, band (around the instrument's book, read only when needed) and, for
 * one that may rest (adds_order), open orders. One the engine will reject anyway (a bad quantity,
 * price or side) meets the kill switch alone. With fast: no call, BAIL where one would be made (a
 * switch on, accounts that are not consecutive ids, an engine without its direct instrument
 * table, a product past 2^64). */
static inline __attribute__((always_inline)) int new_rules(const tfv_risk *r, uint64_t account,
                                                           uint64_t instrument, int side,
                                                           const int64_t *price, tf_ofl_qty q,
                                                           int adds_order, const int fast)
{
    if (__builtin_expect(r->h.n_killed != 0, 0)) {
        if (fast)
            return BAIL;
        if (tfv_risk_killed(r, account))
            return TFV_REASON_KILL_SWITCH;
    }
    if (!qty_valid(q) || (price && *price <= 0) || side > TF_OFL_SELL)
        return 0;
    const profile *l;
    if (limits_of(r, account, fast, &l))
        return BAIL;
    if (q.lo > l->max_qty)
        return TFV_REASON_MAX_QUANTITY;
    if (!price)
        return 0; /* a market order: quantity only */
    if (over_notional(l, q.lo, *price))
        return TFV_REASON_MAX_NOTIONAL;
    if (l->ref != REF_NONE) {
        int64_t ref = l->ref_price;
        if (l->ref != REF_FIXED) {
            int book = eng_risk_book(r->e, instrument);
            if (book == ENG_BOOK_SEARCH) {
                if (fast)
                    return BAIL;
                book = eng_book_of(r->e, instrument);
            }
            ref = eng_band_ref(r->e, book, side, l->ref == REF_LAST);
        }
        int out = ref > 0 ? outside_band(l, ref, *price, fast) : 0;
        if (out)
            return fast && out == BAIL ? BAIL : TFV_REASON_PRICE_BAND;
    }
    if (adds_order && l->max_open) {
        uint64_t open = eng_risk_open_at(r->e, account);
        if (open == ENG_OPEN_SEARCH) {
            if (fast)
                return BAIL;
            open = eng_account_open(r->e, account);
        }
        if (open >= l->max_open)
            return TFV_REASON_MAX_OPEN_ORDERS;
    }
    return 0;
}

/* A Replace whose fast check bailed out (BAIL): the rules with their calls, on its order, which
 * the check found and left as the engine's hint (not passed: one value fewer kept live across
 * the fast check costs it no frame). */
static __attribute__((noinline)) int replace_full(const tfv_risk *r, const tf_ofl_replace *c)
{
    return replace_rules(r, eng_risk_order(r->e, eng_risk_hint(r->e)), c->price, c->quantity, 0);
}

/* A Replace: its order found once (not live: the engine's OrderNotFound), which leaves the
 * engine its hint, and read in place. Inline in tfv_risk_check_on's first test: the most
 * frequent order command (82 % of the exchange-core flow) pays neither a call of its own nor the
 * frame of the others, nor a frame for the rare calls (a kill switch on, accounts that are not
 * consecutive ids, a product past 2^64: replace_full, a tail call). */
static inline __attribute__((always_inline)) int replace_check(const tfv_risk *r,
                                                               const tf_ofl_replace *c)
{
    uint32_t oi = eng_risk_find(r->e, c->order_id);
    if (!oi)
        return 0;
    int reason = replace_rules(r, eng_risk_order(r->e, oi), c->price, c->quantity, 1);
    return __builtin_expect(reason == BAIL, 0) ? replace_full(r, c) : reason;
}

static __attribute__((noinline)) int client_replace_check(const tfv_risk *r,
                                                          const tf_ofx_replace_by_client *c)
{
    uint32_t oi = eng_risk_find_client(r->e, c->account_id, c->client_order_id);
    if (!oi)
        return 0; /* the engine's OrderNotFound */
    return replace_rules(r, eng_risk_order(r->e, oi), c->price, (tf_ofl_qty){c->quantity, 0}, 0);
}

/* The new orders, one function each: the most frequent (NewLimit) without the others' frame
 * (new_limit_fast first, this on a BAIL). */
static __attribute__((noinline)) int new_limit_check(const tfv_risk *r, const tf_ofl_new_limit *c)
{
    return new_rules(r, c->account_id, c->instrument_id, c->side, &c->price, c->quantity, 1, 0);
}

/* A NewLimit without a call (and so without a frame), new_limit_check on a BAIL. */
static __attribute__((noinline)) int new_limit_fast(const tfv_risk *r, const tf_ofl_new_limit *c)
{
    int reason =
        new_rules(r, c->account_id, c->instrument_id, c->side, &c->price, c->quantity, 1, 1);
    return __builtin_expect(reason == BAIL, 0) ? new_limit_check(r, c) : reason;
}

static __attribute__((noinline)) int new_market_check(const tfv_risk *r, const tf_ofl_new_market *c)
{
    return new_rules(r, c->account_id, 0, c->side, NULL, c->quantity, 0, 0);
}

static __attribute__((noinline)) int gateway_order_check(const tfv_risk *r, const tf_ofx_order *c)
{
    int limit = c->type == TF_OFX_LIMIT;
    return new_rules(r, c->account_id, c->instrument_id, c->side, limit ? &c->price : NULL,
                     (tf_ofl_qty){c->quantity, 0}, limit && c->tif == TF_OFX_GTC, 0);
}

/* The checks while limits or a kill switch are in force (tfv_risk_check, risk.h, tests that
 * first): a dispatch without a frame. Tests of the kind in the order of their frequency in a
 * typical flow (a switch's jump table cost a mispredicted indirect jump whenever the kind
 * changed). */
int tfv_risk_check_on(const tfv_risk *r, const tf_ofl_msg *cmd)
{
    int kind = cmd->kind;
    if (kind == TF_OFL_REPLACE)
        return replace_check(r, &cmd->replace);
    if (kind == TF_OFL_NEW_LIMIT)
        return new_limit_fast(r, &cmd->new_limit);
    if (kind == TF_OFL_NEW_MARKET)
        return new_market_check(r, &cmd->new_market);
    if (kind == TF_OFX_ORDER)
        return gateway_order_check(r, &cmd->order);
    if (kind == TF_OFX_REPLACE_BY_CLIENT)
        return client_replace_check(r, &cmd->replace_by_client);
    return 0; /* cancels always pass, even under a kill switch */
}
