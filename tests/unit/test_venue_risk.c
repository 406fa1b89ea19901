/* Pre-trade risk (src/venue/risk.c, risk_config.c; docs/venue.md "Risk"): the config file and
 * its refusals (each naming the line), the 0x11-0x13 payloads, every rule at its boundary
 * (exactly at the limit accepted, one over refused), a reload that replaces the limits, the
 * kill switch, and that limits applied from decoded records decide as the parsed ones do; the
 * band around the last trade (before any trade, at its boundary, after a snapshot); the account
 * lookups with ids that are not consecutive; limits shared between accounts, and the notional and
 * the band at their 64-bit edges; every rule a Replace meets, at its boundary. */
#include <stdlib.h>

#include "harness.h"
#include "tollfree/engine.h"
#include "venue/risk.h"
#include "venue/venue.h"

static tf_ofl_msg ev[64];
static tf_engine_sink sink = {.ev = ev, .cap = 64};
static uint64_t seq;

static tf_engine *make(void)
{
    static const uint64_t ids[] = {1, 2};
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = ids, .n_instruments = 2, .max_orders = 100};
    tf_engine *e = NULL;
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    seq = 0;
    return e;
}

static tf_ofl_msg nl(uint64_t account, uint64_t coid, uint64_t ins, int side, int64_t px,
                     uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.command_seq = ++seq,
                                     .account_id = account,
                                     .client_order_id = coid,
                                     .instrument_id = ins,
                                     .price = px,
                                     .quantity = {qty, 0},
                                     .side = (uint8_t)side};
    return m;
}

static tf_ofl_msg nm(uint64_t account, uint64_t coid, int side, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_MARKET};
    m.new_market = (tf_ofl_new_market){.command_seq = ++seq,
                                       .account_id = account,
                                       .client_order_id = coid,
                                       .instrument_id = 1,
                                       .quantity = {qty, 0},
                                       .side = (uint8_t)side};
    return m;
}

static int chk(const tfv_risk *r, tf_ofl_msg m)
{
    return tfv_risk_check(r, &m);
}

static void apply(tf_engine *e, tf_ofl_msg m)
{
    sink.n = 0;
    CHECK_RC(tf_engine_apply(e, &m, &sink), TF_ENGINE_APPLIED);
}

/* Parses text and applies it as the service does: a reset, then every account's record. */
static int load(tfv_risk *r, const char *text, tfv_risk_config *c)
{
    char err[512];
    int rc = tfv_risk_parse(text, strlen(text), "risk.conf", c, err, sizeof err);
    if (rc) {
        fprintf(stderr, "unexpected refusal: %s\n", err);
        return rc;
    }
    tfv_limits reset = {0};
    rc = tfv_risk_apply_limits(r, &reset);
    for (uint32_t i = 0; !rc && i < c->n; i++)
        rc = tfv_risk_apply_limits(r, &c->acct[i]);
    return rc;
}

static void refused(const char *text, const char *want)
{
    char err[512] = "";
    tfv_risk_config c;
    int rc = tfv_risk_parse(text, strlen(text), "risk.conf", &c, err, sizeof err);
    CHECK_RC(rc, TF_E_BAD_INPUT);
    if (!strstr(err, want)) {
        fprintf(stderr, "refusal '%s' lacks '%s'\n", err, want);
        CHECK(0);
    }
}

static void config_file(void)
{
    tfv_risk_config c;
    char err[256];
    const char *text = "# limits\n"
                       "account 7 max_qty 100 max_notional 5000 band 5 max_open 2 stp "
                       "cancel-oldest\n"
                       "\n"
                       "account 3 band 2.5% ref 1000\n"
                       "admin ops\n"
                       "cancel-on-disconnect alice\n";
    CHECK_RC(tfv_risk_parse(text, strlen(text), "x", &c, err, sizeof err), 0);
    CHECK_EQ(c.n, 2u);
    CHECK_EQ(c.acct[0].account, 3u); /* sorted */
    CHECK_EQ(c.acct[0].band, 250u);
    CHECK_EQ(c.acct[0].band_unit, TFV_BAND_BPS);
    CHECK_EQ(c.acct[0].ref_price, 1000);
    CHECK_EQ(c.acct[1].max_qty, 100u);
    CHECK_EQ(c.acct[1].max_notional, 5000u);
    CHECK_EQ(c.acct[1].band, 5u);
    CHECK_EQ(c.acct[1].band_unit, TFV_BAND_TICKS);
    CHECK_EQ(c.acct[1].max_open, 2u);
    CHECK_EQ(c.acct[1].stp, TF_ENGINE_STP_CANCEL_OLDEST);
    CHECK(tfv_risk_is_admin(&c, tfv_session_id("ops", 3)));
    CHECK(!tfv_risk_is_admin(&c, tfv_session_id("alice", 5)));
    CHECK(tfv_risk_cancels_on_disconnect(&c, tfv_session_id("alice", 5)));
    tfv_risk_config_free(&c);

    refused("account 1\naccount 0\n", "line 2: account '0'");
    refused("\n\naccount 1 max_qty -5\n", "line 3: max_qty '-5'");
    refused("account 1 max_qty 18446744073709551616\n", "line 1: max_qty");
    refused("account 1 band 2.555%\n", "line 1: band '2.555%'");
    refused("account 1 stp sometimes\n", "line 1: stp 'sometimes'");
    refused("account 1 colour blue\n", "line 1: unknown key 'colour'");
    refused("account 1 max_qty\n", "line 1: 'max_qty' needs a value");
    refused("account 1\naccount 1\n", "line 2: account 1 appears twice");
    refused("admin\n", "line 1: a session name");
    refused("admin a b\n", "line 1: one session name a line");
    refused("limit 5\n", "line 1: 'limit'");
    refused("account 1 max_open 4294967296\n", "line 1: max_open 4294967296: too large");
    refused("account 1 band 5 ref latest\n", "line 1: ref 'latest': an unsigned decimal or 'last'");

    /* ref last; the later of ref last and ref PRICE holds */
    text = "account 1 band 5 ref last\naccount 2 ref 9 ref last\naccount 3 ref last ref 9\n";
    CHECK_RC(tfv_risk_parse(text, strlen(text), "x", &c, err, sizeof err), 0);
    CHECK(c.acct[0].ref_last == 1 && c.acct[0].ref_price == 0 && c.acct[0].band == 5);
    CHECK(c.acct[1].ref_last == 1 && c.acct[1].ref_price == 0);
    CHECK(c.acct[2].ref_last == 0 && c.acct[2].ref_price == 9);
    tfv_risk_config_free(&c);
}

static void payloads(void)
{
    tfv_limits l = {.account = 9,
                    .max_qty = 1,
                    .max_notional = UINT64_MAX,
                    .band = 77,
                    .ref_price = INT64_MAX,
                    .max_open = UINT32_MAX,
                    .band_unit = 1,
                    .stp = 3},
               back;
    uint8_t p[TFV_RISK_LIMITS_LEN];
    CHECK_EQ(tfv_limits_encode(&l, p), TFV_RISK_LIMITS_LEN);
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), 0);
    /* field by field: memcmp would read the struct's padding */
    CHECK(back.account == 9 && back.max_qty == 1 && back.max_notional == UINT64_MAX &&
          back.band == 77 && back.ref_price == INT64_MAX && back.max_open == UINT32_MAX &&
          back.band_unit == 1 && back.stp == 3 && back.ref_last == 0);
    CHECK_RC(tfv_limits_decode(p, sizeof p - 1, &back), TF_E_PROTOCOL);
    p[45] = 4;
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), TF_E_PROTOCOL);
    p[45] = 3;
    p[44] = 2;
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), TF_E_PROTOCOL);
    /* ref_last at byte 46: 0 (every record from before it) or 1, and 1 only without ref_price */
    l = (tfv_limits){.account = 9, .band = 5, .ref_last = 1};
    CHECK_EQ(tfv_limits_encode(&l, p), TFV_RISK_LIMITS_LEN);
    CHECK_EQ(p[46], 1);
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), 0);
    CHECK(back.ref_last == 1 && back.ref_price == 0 && back.band == 5);
    p[46] = 2;
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), TF_E_PROTOCOL);
    p[46] = 1;
    p[32] = 7; /* ref_price 7 and ref_last */
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), TF_E_PROTOCOL);
    p[46] = 0;
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), 0);
    CHECK(back.ref_last == 0 && back.ref_price == 7);
    uint8_t k[TFV_KILL_SWITCH_LEN];
    uint64_t s, a;
    int on;
    tfv_kill_encode(5, 6, 1, k);
    CHECK_RC(tfv_kill_decode(k, sizeof k, &s, &a, &on), 0);
    CHECK(s == 5 && a == 6 && on == 1);
    k[16] = 2;
    CHECK_RC(tfv_kill_decode(k, sizeof k, &s, &a, &on), TF_E_PROTOCOL);
    CHECK_RC(tfv_kill_decode(k, 16, &s, &a, &on), TF_E_PROTOCOL);
    uint8_t d[TFV_CANCEL_ON_DISCONNECT_LEN];
    tfv_cod_encode(8, 9, d);
    CHECK_RC(tfv_cod_decode(d, sizeof d, &s, &a), 0);
    CHECK(s == 8 && a == 9);
    CHECK_RC(tfv_cod_decode(d, 17, &s, &a), TF_E_PROTOCOL);
}

static void rules(void)
{
    tf_engine *e = make();
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    tfv_risk_config c;
    CHECK_RC(load(r,
                  "account 7 max_qty 100 max_notional 5000 max_open 2\n"
                  "account 8 band 5\n"
                  "account 9 band 10% ref 1000\n",
                  &c),
             0);
    tfv_risk_config_free(&c);
    /* max_qty: 100 accepted, 101 refused; a market order too */
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, 10, 100)), 0);
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, 10, 101)), TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(chk(r, nm(7, 1, 0, 101)), TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(chk(r, nm(7, 1, 0, 100)), 0);
    /* max_notional: 50 * 100 = 5000 accepted, 5001 refused (51 * 99 = 5049) */
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, 50, 100)), 0);
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, 51, 99)), TFV_REASON_MAX_NOTIONAL);
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, 5001, 1)), TFV_REASON_MAX_NOTIONAL);
    /* overflow-safe: INT64_MAX * 100 does not wrap below the limit */
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, INT64_MAX, 100)), TFV_REASON_MAX_NOTIONAL);
    /* the engine's own refusals keep their reasons: bad quantity or price pass the venue */
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, 0, 100000)), 0);
    CHECK_EQ(chk(r, nl(7, 1, 1, 0, 10, 0)), 0);
    /* max_open: two resting orders, the third refused; a market order is not counted */
    apply(e, nl(7, 1, 1, 0, 10, 5));
    apply(e, nl(7, 2, 2, 1, 90, 5));
    CHECK_EQ(chk(r, nl(7, 3, 1, 0, 10, 5)), TFV_REASON_MAX_OPEN_ORDERS);
    CHECK_EQ(chk(r, nm(7, 3, 0, 5)), 0);
    apply(e, nl(1, 1, 1, 1, 10, 5)); /* another account fills order 1 */
    CHECK_EQ(chk(r, nl(7, 3, 1, 0, 10, 5)), 0);
    /* band in ticks around the opposite best: asks at 20 -> buys 15..25 */
    apply(e, nl(1, 2, 1, 1, 20, 5));
    CHECK_EQ(chk(r, nl(8, 1, 1, 0, 15, 1)), 0);
    CHECK_EQ(chk(r, nl(8, 1, 1, 0, 25, 1)), 0);
    CHECK_EQ(chk(r, nl(8, 1, 1, 0, 14, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(8, 1, 1, 0, 26, 1)), TFV_REASON_PRICE_BAND);
    /* a sell: no bids, so its own side's best (20) is the reference */
    CHECK_EQ(chk(r, nl(8, 1, 1, 1, 26, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(8, 1, 1, 1, 25, 1)), 0);
    /* an empty book (instrument 2 has only account 7's ask at 90 -> reference 90) */
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 95, 1)), 0);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 96, 1)), TFV_REASON_PRICE_BAND);
    /* band in percent around a configured reference: 10% of 1000 = 900..1100 */
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 1100, 1)), 0);
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 900, 1)), 0);
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 1101, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 899, 1)), TFV_REASON_PRICE_BAND);
    /* a replace: checked as the order's account; reducing in place always passes */
    apply(e, nl(8, 5, 1, 0, 18, 10)); /* order id 5 */
    tf_ofl_msg rp = {.kind = TF_OFL_REPLACE};
    rp.replace = (tf_ofl_replace){.command_seq = ++seq,
                                  .order_id = 5,
                                  .client_order_id = 6,
                                  .price = 26,
                                  .quantity = {10, 0}};
    CHECK_EQ(tfv_risk_check(r, &rp), TFV_REASON_PRICE_BAND);
    rp.replace.price = 25;
    CHECK_EQ(tfv_risk_check(r, &rp), 0);
    /* an account without limits passes everything */
    CHECK_EQ(chk(r, nl(4, 1, 1, 0, INT64_MAX, 1000000)), 0);

    /* a reload replaces the whole config: account 7 loses its limits, 4 gains some */
    CHECK_RC(load(r, "account 4 max_qty 1 stp cancel-newest\n", &c), 0);
    tfv_risk_config_free(&c);
    CHECK_EQ(tfv_risk_accounts(r), 1u);
    CHECK_EQ(chk(r, nl(7, 9, 1, 0, 10, 101)), 0);
    CHECK_EQ(chk(r, nl(4, 1, 1, 0, 10, 2)), TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(tf_engine_get_stp(e, 4), TF_ENGINE_STP_CANCEL_NEWEST);
    CHECK_EQ(tf_engine_account_orders(e, 7), -1); /* no longer counted */
    /* an empty config clears everything, STP modes included (also one the venue never set, as
     * a snapshot of an earlier config may hold): the hash is the engine's alone */
    tf_engine_set_stp(e, 50, TF_ENGINE_STP_CANCEL_BOTH);
    CHECK_RC(load(r, "# nothing\n", &c), 0);
    tfv_risk_config_free(&c);
    CHECK_EQ(tf_engine_stp_count(e), 0u);
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

static void kill_switch(void)
{
    tf_engine *e = make();
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    apply(e, nl(7, 1, 1, 0, 10, 5)); /* order 1 */
    apply(e, nl(8, 1, 1, 0, 10, 5)); /* order 2 */
    apply(e, nl(7, 2, 2, 1, 90, 5)); /* order 3 */
    tf_ofl_msg cx = {.kind = TF_OFL_CANCEL_BY_CLIENT};
    sink.n = 0;
    CHECK_RC(tfv_risk_kill(r, ++seq, 7, 1, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(sink.n, 2u);
    CHECK(ev[0].kind == TF_OFL_CANCELED && ev[0].canceled.order_id == 1);
    CHECK(ev[1].kind == TF_OFL_CANCELED && ev[1].canceled.order_id == 3);
    CHECK(tfv_risk_killed(r, 7));
    CHECK_EQ(chk(r, nl(7, 3, 1, 0, 10, 1)), TFV_REASON_KILL_SWITCH);
    CHECK_EQ(chk(r, nm(7, 3, 0, 1)), TFV_REASON_KILL_SWITCH);
    CHECK_EQ(tfv_risk_check(r, &cx), 0); /* cancels pass */
    CHECK_EQ(chk(r, nl(8, 3, 1, 0, 10, 1)), 0);
    sink.n = 0;
    CHECK_RC(tfv_risk_kill(r, 0, 7, 0, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(sink.n, 0u);
    CHECK(!tfv_risk_killed(r, 7));
    CHECK_EQ(chk(r, nl(7, 3, 1, 0, 10, 1)), 0);
    tf_engine_order o;
    CHECK_EQ(tf_engine_find_order(e, 2, &o), 1);
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

static tf_ofl_msg gw(uint64_t account, uint64_t coid, int side, int64_t px, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFX_ORDER};
    m.order = (tf_ofx_order){.command_seq = ++seq,
                             .account_id = account,
                             .client_order_id = coid,
                             .instrument_id = 1,
                             .price = px,
                             .quantity = qty,
                             .side = (uint8_t)side,
                             .type = TF_OFX_LIMIT,
                             .tif = TF_OFX_GTC};
    return m;
}

/* The kill switch's cancel of each order, as its placer understands it: a Canceled for the
 * order a NewLimit placed, a CanceledEx (reason ACCOUNT, the order's state) for the one a gateway
 * Order placed, in hash order; the same from an engine read back from a snapshot, which keeps
 * who placed each order. (The kill switch used to answer every order with an OFL1 Canceled.) */
static void kill_switch_reports(void)
{
    for (int from_snapshot = 0; from_snapshot < 2; from_snapshot++) {
        tf_engine *e = make();
        apply(e, nl(7, 1, 1, 0, 10, 5));  /* order 1: OFL1, bid 10 */
        apply(e, gw(7, 2, 0, 11, 9));     /* order 2: gateway, bid 11 */
        apply(e, gw(8, 1, 1, 11, 4));     /* order 3: sells 4 to order 2 (5 left, 4 filled) */
        apply(e, nl(8, 2, 1, 0, 500, 1)); /* order 4: another account's */
        if (from_snapshot) {
            uint64_t cap = tf_engine_snapshot_size(e), len = 0;
            uint8_t *img = malloc(cap);
            CHECK(img != NULL);
            CHECK_RC(tf_engine_snapshot_write(e, img, cap, &len), 0);
            tf_engine *e2 = NULL;
            CHECK_RC(tf_engine_snapshot_read(img, len, NULL, &e2), 0);
            free(img);
            CHECK_EQ(tf_engine_state_hash(e2), tf_engine_state_hash(e));
            tf_engine_destroy(e);
            e = e2;
        }
        tfv_risk *r = NULL;
        CHECK_RC(tfv_risk_open(e, &r), 0);
        sink.n = 0;
        CHECK_RC(tfv_risk_kill(r, 100, 7, 1, &sink), TF_ENGINE_APPLIED);
        CHECK_EQ(sink.n, 2u);
        /* hash order: bids best first, so order 2 (11) before order 1 (10) */
        CHECK(ev[0].kind == TF_OFX_CANCELED);
        const tf_ofx_canceled *x = &ev[0].canceled_ex;
        CHECK_EQ(x->order_id, 2u);
        CHECK_EQ(x->client_order_id, 2u);
        CHECK_EQ(x->account_id, 7u);
        CHECK_EQ(x->instrument_id, 1u);
        CHECK_EQ(x->price, 11);
        CHECK_EQ(x->remaining, 5u);
        CHECK_EQ(x->filled, 4u);
        CHECK_EQ(x->side, 0u);
        CHECK_EQ(x->reason, TF_OFX_CANCEL_ACCOUNT);
        CHECK_EQ(x->command_seq, 100u);
        CHECK(ev[1].kind == TF_OFL_CANCELED && ev[1].canceled.order_id == 1);
        tf_engine_order o;
        CHECK_EQ(tf_engine_find_order(e, 4, &o), 1);
        /* the same order kinds again after the cancel: the flag follows the pool slot's new
         * order, never the old one's */
        seq = 100;
        apply(e, nl(8, 3, 1, 0, 20, 1)); /* slot of order 1 or 2, placed by NewLimit */
        sink.n = 0;
        CHECK_RC(tf_engine_cancel_account(e, ++seq, 8, &sink), TF_ENGINE_APPLIED);
        CHECK_EQ(sink.n, 2u);
        CHECK(ev[0].kind == TF_OFL_CANCELED && ev[1].kind == TF_OFL_CANCELED);
        /* a listed cancel (cancel-on-disconnect) reports alike, in the list's order */
        apply(e, gw(9, 1, 1, 600, 2));    /* order 6 */
        apply(e, nl(9, 2, 1, 1, 601, 2)); /* order 7 */
        const uint64_t ids[] = {7, 6};
        sink.n = 0;
        CHECK_RC(tf_engine_cancel_orders(e, ++seq, ids, 2, &sink), TF_ENGINE_APPLIED);
        CHECK_EQ(sink.n, 2u);
        CHECK(ev[0].kind == TF_OFL_CANCELED && ev[0].canceled.order_id == 7);
        CHECK(ev[1].kind == TF_OFX_CANCELED && ev[1].canceled_ex.order_id == 6 &&
              ev[1].canceled_ex.reason == TF_OFX_CANCEL_ACCOUNT &&
              ev[1].canceled_ex.remaining == 2);
        tfv_risk_close(r);
        tf_engine_destroy(e);
    }
}

/* The hint a check leaves the engine (risk_view.h) is checked before it is used: a Replace
 * after the checked order left the book (canceled, or filled) is OrderNotFound, a Replace of
 * another order finds that one, and a ReplaceByClient whose order was replaced by a new one
 * with the same client id finds the new one. */
static void stale_hint(void)
{
    tf_engine *e = make();
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    tfv_risk_config c = {0};
    CHECK_RC(load(r, "account 7 max_qty 100\n", &c), 0);
    tfv_risk_config_free(&c);
    apply(e, nl(7, 1, 1, 0, 10, 5)); /* order 1 */
    apply(e, nl(7, 2, 1, 0, 11, 5)); /* order 2 */
    tf_ofl_msg rp = {.kind = TF_OFL_REPLACE};
    rp.replace =
        (tf_ofl_replace){.order_id = 1, .client_order_id = 9, .price = 12, .quantity = {3, 0}};
    CHECK_EQ(chk(r, rp), 0); /* leaves the hint on order 1's slot */
    tf_ofl_msg cx = {.kind = TF_OFL_CANCEL_BY_ORDER};
    cx.cancel_by_order = (tf_ofl_cancel_by_order){.command_seq = ++seq, .order_id = 1};
    apply(e, cx);
    rp.replace.command_seq = ++seq;
    apply(e, rp);
    CHECK_EQ(sink.n, 1u);
    CHECK(ev[0].kind == TF_OFL_REJECTED && ev[0].rejected.reason == TF_OFL_ORDER_NOT_FOUND);
    CHECK_EQ(chk(r, rp), 0); /* not live: passes, no hint */
    rp.replace.order_id = 2;
    rp.replace.command_seq = ++seq;
    CHECK_EQ(chk(r, rp), 0);
    rp.replace.order_id = 3; /* no such order, the hint on order 2's slot */
    apply(e, rp);
    CHECK(ev[0].kind == TF_OFL_REJECTED && ev[0].rejected.reason == TF_OFL_ORDER_NOT_FOUND);
    rp.replace.order_id = 2;
    rp.replace.command_seq = ++seq;
    apply(e, rp);
    CHECK(ev[0].kind == TF_OFL_REPLACED && ev[0].replaced.order_id == 2);
    /* filled away: order 2 (now 3 at 12) trades whole against a sell */
    CHECK_EQ(chk(r, rp), 0);
    apply(e, nl(8, 1, 1, 1, 12, 3));
    rp.replace.command_seq = ++seq;
    apply(e, rp);
    CHECK(ev[0].kind == TF_OFL_REJECTED && ev[0].rejected.reason == TF_OFL_ORDER_NOT_FOUND);
    /* by client id: gateway order (7, 5) checked, canceled, placed again as a new order */
    apply(e, gw(7, 5, 0, 10, 5));
    tf_ofl_msg rb = {.kind = TF_OFX_REPLACE_BY_CLIENT};
    rb.replace_by_client = (tf_ofx_replace_by_client){.account_id = 7,
                                                      .client_order_id = 5,
                                                      .new_client_order_id = 6,
                                                      .price = 10,
                                                      .quantity = 7};
    CHECK_EQ(chk(r, rb), 0);
    tf_ofl_msg gc = {.kind = TF_OFX_CANCEL};
    gc.cancel = (tf_ofx_cancel){.command_seq = ++seq, .account_id = 7, .client_order_id = 5};
    apply(e, gc);
    rb.replace_by_client.command_seq = ++seq;
    apply(e, rb);
    CHECK(ev[0].kind == TF_OFX_REJECTED && ev[0].rejected_ex.reason == TF_OFL_ORDER_NOT_FOUND);
    apply(e, nl(9, 1, 1, 0, 5, 1)); /* takes the free slot */
    apply(e, gw(7, 5, 0, 10, 5));   /* (7, 5) again, a new order id in another slot */
    rb.replace_by_client.command_seq = ++seq;
    apply(e, rb);
    tf_engine_counters k;
    tf_engine_get_counters(e, &k);
    CHECK(ev[0].kind == TF_OFX_REPLACED && ev[0].replaced_ex.order_id == k.next_order_id - 1);
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

/* The band around the last trade (`ref last`): the book's reference before the instrument's
 * first trade, the last trade's price after it (ticks and basis points, exactly at the band
 * accepted, one over refused), for a Replace too, and the same decisions from an engine rebuilt
 * from a snapshot. */
static void band_last_trade(void)
{
    tf_engine *e = make();
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    tfv_risk_config c;
    CHECK_RC(load(r,
                  "account 8 band 5 ref last\n"
                  "account 9 band 2.5% ref last\n"
                  "account 10 band 5\n",
                  &c),
             0);
    tfv_risk_config_free(&c);
    int64_t px;
    /* before any trade: the book's best, as without ref last (ask at 60 on instrument 2) */
    apply(e, nl(1, 1, 2, 1, 60, 5));
    CHECK_EQ(tf_engine_last_trade(e, 2, &px), 0);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 65, 1)), 0);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 66, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 55, 1)), 0);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 54, 1)), TFV_REASON_PRICE_BAND);
    /* and with an empty book no band at all */
    CHECK_EQ(chk(r, nl(8, 1, 1, 0, 1, 1)), 0);
    CHECK_EQ(chk(r, nl(9, 1, 1, 1, INT64_MAX, 1)), 0);
    /* a trade at 50 on instrument 2 (a bid at 50 meets a sell); the ask at 60 stays */
    apply(e, nl(2, 1, 2, 0, 50, 5));
    apply(e, nl(3, 1, 2, 1, 50, 1));
    CHECK_EQ(tf_engine_last_trade(e, 2, &px), 1);
    CHECK_EQ(px, 50);
    /* ticks around 50: 45..55, although the opposite best is the ask at 60 */
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 55, 1)), 0);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 56, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 45, 1)), 0);
    CHECK_EQ(chk(r, nl(8, 1, 2, 0, 44, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(8, 1, 2, 1, 56, 1)), TFV_REASON_PRICE_BAND); /* a sell alike */
    /* the book's reference (account 10) is the ask at 60 for a buy: 56 passes there */
    CHECK_EQ(chk(r, nl(10, 1, 2, 0, 56, 1)), 0);
    CHECK_EQ(chk(r, nl(10, 1, 2, 0, 54, 1)), TFV_REASON_PRICE_BAND);
    /* instrument 1 still has no trade: its own book (empty) -> no band */
    CHECK_EQ(chk(r, nl(8, 1, 1, 0, 1000, 1)), 0);
    /* basis points around a trade at 1000 on instrument 1: 2.5% = 975..1025 */
    apply(e, nl(2, 2, 1, 0, 1000, 5));
    apply(e, nl(3, 2, 1, 1, 1000, 1));
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 1025, 1)), 0);
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 1026, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(9, 1, 1, 1, 975, 1)), 0);
    CHECK_EQ(chk(r, nl(9, 1, 1, 1, 974, 1)), TFV_REASON_PRICE_BAND);
    /* a Replace of account 8's order: around its book's last trade (50) */
    apply(e, nl(8, 7, 2, 0, 48, 3));
    tf_engine_order o;
    uint64_t id = 0;
    for (uint64_t i = 1; i < 20; i++)
        if (tf_engine_find_order(e, i, &o) == 1 && o.account_id == 8)
            id = i;
    CHECK(id != 0);
    tf_ofl_msg rp = {.kind = TF_OFL_REPLACE};
    rp.replace = (tf_ofl_replace){.command_seq = ++seq,
                                  .order_id = id,
                                  .client_order_id = 8,
                                  .price = 55,
                                  .quantity = {3, 0}};
    CHECK_EQ(tfv_risk_check(r, &rp), 0);
    rp.replace.price = 56;
    CHECK_EQ(tfv_risk_check(r, &rp), TFV_REASON_PRICE_BAND);
    /* a later trade moves the reference: 1010 -> 985..1035 for 2.5% */
    apply(e, nl(2, 3, 1, 0, 1010, 1));
    apply(e, nl(3, 3, 1, 1, 1010, 1));
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 1035, 1)), 0);
    CHECK_EQ(chk(r, nl(9, 1, 1, 0, 1036, 1)), TFV_REASON_PRICE_BAND);

    /* a snapshot keeps the last trades: an engine read back decides every price alike, where an
     * engine with the same book but no trade would not (the ask at 60 would be the reference) */
    uint64_t cap = tf_engine_snapshot_size(e), len = 0;
    uint8_t *img = malloc(cap);
    CHECK(img != NULL);
    CHECK_RC(tf_engine_snapshot_write(e, img, cap, &len), 0);
    tf_engine *e2 = NULL;
    CHECK_RC(tf_engine_snapshot_read(img, len, NULL, &e2), 0);
    free(img);
    tfv_risk *r2 = NULL;
    CHECK_RC(tfv_risk_open(e2, &r2), 0);
    CHECK_RC(load(r2,
                  "account 8 band 5 ref last\n"
                  "account 9 band 2.5% ref last\n"
                  "account 10 band 5\n",
                  &c),
             0);
    tfv_risk_config_free(&c);
    int same = 1, refusals = 0;
    for (uint64_t a = 8; a <= 10; a++)
        for (uint64_t ins = 1; ins <= 2; ins++)
            for (int side = 0; side <= 1; side++)
                for (int64_t p = 1; p <= 1100; p++) {
                    int x = chk(r, nl(a, 1, ins, side, p, 1)),
                        y = chk(r2, nl(a, 1, ins, side, p, 1));
                    same &= x == y;
                    refusals += x != 0;
                }
    CHECK(same);
    CHECK(refusals > 0);
    CHECK_EQ(chk(r2, nl(8, 1, 2, 0, 55, 1)), 0);
    CHECK_EQ(chk(r2, nl(8, 1, 2, 0, 56, 1)), TFV_REASON_PRICE_BAND);
    tfv_risk_close(r2);
    tf_engine_destroy(e2);
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

/* Account ids that are not one run from the first (gaps, ids below the first, huge ids): the
 * lookups' shortcut for consecutive ids must miss and fall back exactly (limits, live-order
 * counts and STP modes of the right account). */
static void sparse_accounts(void)
{
    tf_engine *e = make();
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    tfv_risk_config c;
    CHECK_RC(load(r,
                  "account 5 max_qty 5 max_open 1\n"
                  "account 6 max_qty 6 max_open 2\n"
                  "account 9 max_qty 9 max_open 3\n"
                  "account 1000 max_qty 1000 max_open 4 stp cancel-newest\n"
                  "account 18446744073709551615 max_qty 77 max_open 5\n",
                  &c),
             0);
    tfv_risk_config_free(&c);
    static const uint64_t acc[] = {5, 6, 9, 1000, UINT64_MAX};
    static const uint64_t cap[] = {5, 6, 9, 1000, 77};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(chk(r, nl(acc[i], 1, 1, 0, 10, cap[i])), 0);
        CHECK_EQ(chk(r, nl(acc[i], 1, 1, 0, 10, cap[i] + 1)), TFV_REASON_MAX_QUANTITY);
    }
    /* accounts without limits around and between them */
    static const uint64_t none[] = {1, 4, 7, 8, 10, 999, 1001, UINT64_MAX - 1};
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(chk(r, nl(none[i], 1, 1, 0, 10, 100000)), 0);
        CHECK_EQ(tf_engine_account_orders(e, none[i]), -1);
    }
    /* every account rests orders up to its max_open: each count is its own */
    for (int i = 0; i < 5; i++)
        for (uint64_t k = 0; k <= (uint64_t)i; k++)
            apply(e, nl(acc[i], 10 + k, 1, 0, 10, 1));
    apply(e, nl(7, 1, 1, 0, 10, 1)); /* not counted */
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(tf_engine_account_orders(e, acc[i]), (int64_t)i + 1);
        CHECK_EQ(chk(r, nl(acc[i], 99, 1, 0, 10, 1)), TFV_REASON_MAX_OPEN_ORDERS);
    }
    CHECK_EQ(tf_engine_get_stp(e, 1000), TF_ENGINE_STP_CANCEL_NEWEST);
    CHECK_EQ(tf_engine_get_stp(e, 999), TF_ENGINE_STP_NONE);
    CHECK_EQ(tf_engine_get_stp(e, 5), TF_ENGINE_STP_NONE);
    /* a sell of 1 fills account 5's oldest bid (the first in time at 10): its count drops */
    apply(e, nl(2, 1, 1, 1, 10, 1));
    CHECK_EQ(tf_engine_account_orders(e, 5), 0);
    CHECK_EQ(tf_engine_account_orders(e, 6), 2);
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

/* Limits that went through the 0x11 payload decide exactly as the parsed ones. */
static void through_records(void)
{
    tf_engine *e1 = make(), *e2 = make();
    tfv_risk *r1 = NULL, *r2 = NULL;
    tfv_risk_open(e1, &r1);
    tfv_risk_open(e2, &r2);
    tfv_risk_config c;
    CHECK_RC(
        load(r1, "account 7 max_qty 50 max_notional 900 band 3% max_open 1 stp cancel-both\n", &c),
        0);
    tfv_limits reset = {0}, back;
    tfv_risk_apply_limits(r2, &reset);
    uint8_t p[TFV_RISK_LIMITS_LEN];
    tfv_limits_encode(&c.acct[0], p);
    CHECK_RC(tfv_limits_decode(p, sizeof p, &back), 0);
    CHECK_RC(tfv_risk_apply_limits(r2, &back), 0);
    tfv_risk_config_free(&c);
    uint64_t rng = 1;
    for (int i = 0; i < 2000; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        tf_ofl_msg m = nl(6 + (rng >> 60) % 3, (uint64_t)i + 1, 1, (int)(rng >> 40) & 1,
                          (int64_t)(95 + (rng >> 20) % 10), 1 + (rng >> 8) % 60);
        int a = tfv_risk_check(r1, &m), b = tfv_risk_check(r2, &m);
        CHECK_EQ(a, b);
        if (!a) {
            apply(e1, m);
            apply(e2, m);
        }
    }
    CHECK_EQ(tf_engine_state_hash(e1), tf_engine_state_hash(e2));
    tfv_risk_close(r1);
    tfv_risk_close(r2);
    tf_engine_destroy(e1);
    tf_engine_destroy(e2);
}

/* The records through the venue codec and tfv_apply, on plain (un-keyed) commands: a RiskLimits
 * record sets the limits, a refused command is numbered and answered VenueRejected, a
 * KillSwitch cancels, a CancelOnDisconnect of a session without orders takes its number. */
static tfv_msg roundtrip(const tfv_msg *in)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    tfv_msg out;
    memset(&out, 0, sizeof out);
    int n = tfv_encode(f, sizeof f, in);
    CHECK(n > 0);
    CHECK_EQ(tfv_decode(f, (size_t)n, &out), n);
    CHECK_EQ(out.kind, in->kind);
    CHECK_EQ(out.risk_len, in->risk_len);
    CHECK(!memcmp(out.risk, in->risk, in->risk_len));
    f[2] = 0x11; /* a kind with another length than the frame's payload */
    if (in->kind != 0x11)
        CHECK(tfv_decode(f, (size_t)n, &out) < 0);
    return out;
}

static void through_venue(void)
{
    tf_engine *e = make();
    tfv_venue *v = NULL;
    CHECK_RC(tfv_open(e, &v), 0);
    tfv_msg rec = {.kind = TFV_RISK_LIMITS, .risk_len = TFV_RISK_LIMITS_LEN};
    tfv_limits l = {.account = 7, .max_qty = 10};
    tfv_limits_encode(&l, rec.risk);
    tfv_msg got = roundtrip(&rec);
    sink.n = 0;
    CHECK_RC(tfv_apply(v, &got, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(sink.n, 0u);
    tfv_msg cmd = {.kind = TF_OFL_NEW_LIMIT, .ofl = nl(7, 5, 1, 0, 100, 11)};
    sink.n = 0;
    CHECK_RC(tfv_apply(v, &cmd, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(sink.n, 1u);
    CHECK_EQ(ev[0].kind, TFV_VENUE_REJECTED);
    CHECK_EQ(ev[0].rejected.reason, TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(ev[0].rejected.client_order_id, 5u);
    CHECK_EQ(ev[0].rejected.command_seq, seq);
    cmd.ofl = nl(7, 6, 1, 0, 100, 10);
    sink.n = 0;
    CHECK_RC(tfv_apply(v, &cmd, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    uint64_t live = ev[0].accepted.order_id;

    tfv_msg k = {.kind = TFV_KILL_SWITCH, .risk_len = TFV_KILL_SWITCH_LEN};
    tfv_kill_encode(++seq, 7, 1, k.risk);
    got = roundtrip(&k);
    sink.n = 0;
    CHECK_RC(tfv_apply(v, &got, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(sink.n, 1u);
    CHECK(ev[0].kind == TF_OFL_CANCELED && ev[0].canceled.order_id == live);
    cmd.ofl = nl(7, 7, 1, 0, 100, 1);
    sink.n = 0;
    tfv_apply(v, &cmd, &sink);
    CHECK(ev[0].kind == TFV_VENUE_REJECTED && ev[0].rejected.reason == TFV_REASON_KILL_SWITCH);

    tfv_msg d = {.kind = TFV_CANCEL_ON_DISCONNECT, .risk_len = TFV_CANCEL_ON_DISCONNECT_LEN};
    tfv_cod_encode(++seq, 12345, d.risk);
    got = roundtrip(&d);
    sink.n = 0;
    CHECK_RC(tfv_apply(v, &got, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(sink.n, 0u);
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    CHECK_EQ(c.last_command_seq, seq);
    tfv_close(v);
    tf_engine_destroy(e);
}

/* Limits shared between accounts (one profile for alike limits): each account keeps its own
 * after another's change, after many changes of one account (the profiles compacted), with
 * consecutive ids and without; the notional at the 2^32 and 2^64 edges and the band in basis
 * points where ref * bp passes 2^64, each exactly at the limit accepted and one over refused. */
static void limits_of(tfv_risk *r, uint64_t account, uint64_t max_qty)
{
    tfv_limits l = {.account = account, .max_qty = max_qty};
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
}

static void qty_limits(tfv_risk *r, const uint64_t *acct, const uint64_t *max, int n)
{
    for (int i = 0; i < n; i++) {
        CHECK_EQ(chk(r, nm(acct[i], 1, 0, max[i])), 0);
        CHECK_EQ(chk(r, nm(acct[i], 1, 0, max[i] + 1)), TFV_REASON_MAX_QUANTITY);
    }
}

static void shared_limits(void)
{
    tf_engine *e = make();
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    for (uint64_t a = 1; a <= 5; a++)
        limits_of(r, a, a == 3 ? 20 : 10);
    const uint64_t acct[] = {1, 2, 3, 4, 5};
    qty_limits(r, acct, (const uint64_t[]){10, 10, 20, 10, 10}, 5);
    limits_of(r, 2, 5); /* its profile was 1's, 4's and 5's: theirs stay */
    qty_limits(r, acct, (const uint64_t[]){10, 5, 20, 10, 10}, 5);
    for (uint64_t i = 0; i < 3 * TFV_RISK_MAX_ACCOUNTS; i++) /* a new profile each time */
        limits_of(r, 4, 100 + i);
    qty_limits(r, acct, (const uint64_t[]){10, 5, 20, 100 + 3 * TFV_RISK_MAX_ACCOUNTS - 1, 10}, 5);
    limits_of(r, 1000, 7); /* ids no longer consecutive */
    const uint64_t acct6[] = {1, 2, 3, 5, 1000};
    qty_limits(r, acct6, (const uint64_t[]){10, 5, 20, 10, 7}, 5);
    CHECK_EQ(chk(r, nm(999, 1, 0, UINT64_MAX >> 1)), 0); /* no limits */
    CHECK_EQ(chk(r, nm(6, 1, 0, UINT64_MAX >> 1)), 0);

    /* the notional: exact at 2^32 and at 2^64 - 2 (INT64_MAX * 2), past 2^64 refused */
    tfv_limits l = {.account = 6, .max_notional = 1ull << 32};
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 1 << 16, 1 << 16)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, (1 << 16) + 1, 1 << 16)), TFV_REASON_MAX_NOTIONAL);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 1ll << 32, 1)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, (1ll << 32) + 1, 1)), TFV_REASON_MAX_NOTIONAL);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 1, 1ull << 32)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 1, (1ull << 32) + 1)), TFV_REASON_MAX_NOTIONAL);
    l.max_notional = UINT64_MAX - 1;
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, INT64_MAX, 2)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, INT64_MAX, 3)), TFV_REASON_MAX_NOTIONAL);
    l.max_notional = UINT64_MAX - 2;
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, INT64_MAX, 2)), TFV_REASON_MAX_NOTIONAL);
    l.max_notional = UINT64_MAX;
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, INT64_MAX, 2)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 2, INT64_MAX)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 3, INT64_MAX)), TFV_REASON_MAX_NOTIONAL); /* past 2^64 */

    /* the band in basis points where ref * bp passes 2^64: 50 % of 4e18 is 2e18 either side */
    l = (tfv_limits){
        .account = 6, .band = 5000, .band_unit = TFV_BAND_BPS, .ref_price = 4000000000000000000};
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 6000000000000000000, 1)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 6000000000000000001, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(6, 1, 1, 1, 2000000000000000000, 1)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 1, 1999999999999999999, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, INT64_MAX, 1)), TFV_REASON_PRICE_BAND);
    l.band = 10000; /* 100 %: every price up to twice the reference */
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 8000000000000000000, 1)), 0);
    CHECK_EQ(chk(r, nl(6, 1, 1, 0, 8000000000000000001, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(6, 1, 1, 1, 1, 1)), 0);
    qty_limits(r, acct6, (const uint64_t[]){10, 5, 20, 10, 7}, 5); /* the others untouched */
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

/* Places m (no check) and returns its order id. */
static uint64_t place(tf_engine *e, tf_ofl_msg m)
{
    apply(e, m);
    CHECK(sink.n >= 1 && ev[0].kind == TF_OFL_ACCEPTED);
    return ev[0].accepted.order_id;
}

static int rep(const tfv_risk *r, uint64_t order_id, int64_t px, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_REPLACE};
    ++seq;
    m.replace = (tf_ofl_replace){.command_seq = seq,
                                 .order_id = order_id,
                                 .client_order_id = 1000 + seq,
                                 .price = px,
                                 .quantity = {qty, 0}};
    return chk(r, m);
}

static int rep_client(const tfv_risk *r, uint64_t account, uint64_t coid, int64_t px, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFX_REPLACE_BY_CLIENT};
    m.replace_by_client = (tf_ofx_replace_by_client){.command_seq = ++seq,
                                                     .account_id = account,
                                                     .client_order_id = coid,
                                                     .new_client_order_id = coid,
                                                     .price = px,
                                                     .quantity = qty};
    return chk(r, m);
}

/* Every rule a Replace meets, at its boundary, read from the live order in place: the quantity,
 * the notional, the band around the opposite best (asks for a bid, bids for an ask), around its
 * own side's best when the other is empty, around a configured price and around the last trade;
 * a replace that only reduces; the kill switch beside other accounts' limits; the same through
 * the index when the accounts stop being consecutive ids, and for accounts without limits. */
static void replace_boundaries(void)
{
    tf_engine *e = make();
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    tfv_risk_config c;
    CHECK_RC(load(r,
                  "account 7 max_qty 100 max_notional 2500 band 5\n"
                  "account 8 band 10%\n"
                  "account 9 band 10 ref 1000\n"
                  "account 10 band 5 ref last\n",
                  &c),
             0);
    tfv_risk_config_free(&c);
    /* instrument 1: asks at 22 (account 1), account 7 bids at 20 and at 10 (outside its band) */
    place(e, nl(1, 1, 1, 1, 22, 5));
    uint64_t a = place(e, nl(7, 1, 1, 0, 20, 10));
    uint64_t b = place(e, nl(7, 2, 1, 0, 10, 10));
    /* the quantity: 100 accepted, 101 refused */
    CHECK_EQ(rep(r, a, 20, 100), 0);
    CHECK_EQ(rep(r, a, 20, 101), TFV_REASON_MAX_QUANTITY);
    /* the notional: 25 * 100 = 2500 accepted, 26 * 100 refused (26 is inside the band) */
    CHECK_EQ(rep(r, a, 25, 100), 0);
    CHECK_EQ(rep(r, a, 26, 100), TFV_REASON_MAX_NOTIONAL);
    /* the band around the best ask (22): 17..27 */
    CHECK_EQ(rep(r, a, 27, 1), 0);
    CHECK_EQ(rep(r, a, 28, 1), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, a, 17, 1), 0);
    CHECK_EQ(rep(r, a, 16, 1), TFV_REASON_PRICE_BAND);
    /* the rules' order: the quantity before the band */
    CHECK_EQ(rep(r, a, 28, 101), TFV_REASON_MAX_QUANTITY);
    /* only reducing (same price, up to the remaining 10) passes outside the band */
    CHECK_EQ(rep(r, b, 10, 10), 0);
    CHECK_EQ(rep(r, b, 10, 1), 0);
    CHECK_EQ(rep(r, b, 10, 11), TFV_REASON_PRICE_BAND);
    /* a bad quantity or price passes: the engine rejects it with its own reason */
    CHECK_EQ(rep(r, a, 20, 0), 0);
    CHECK_EQ(rep(r, a, 0, 1), 0);
    CHECK_EQ(rep(r, a, -5, 1), 0);
    CHECK_EQ(rep(r, 999, 1000, 1000), 0); /* not live: the engine's OrderNotFound */
    /* a ReplaceByClient decides alike */
    CHECK_EQ(rep_client(r, 7, 1, 27, 1), 0);
    CHECK_EQ(rep_client(r, 7, 1, 28, 1), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep_client(r, 7, 1, 20, 101), TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(rep_client(r, 7, 2, 10, 10), 0);
    /* instrument 2 in percent: a bid alone is measured against its own side (100: 90..110) */
    uint64_t cb = place(e, nl(8, 1, 2, 0, 100, 10));
    CHECK_EQ(rep(r, cb, 110, 10), 0);
    CHECK_EQ(rep(r, cb, 111, 10), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, cb, 90, 10), 0);
    CHECK_EQ(rep(r, cb, 89, 10), TFV_REASON_PRICE_BAND);
    /* an ask is measured against the best bid (100), not against its own side (200) */
    uint64_t d = place(e, nl(8, 2, 2, 1, 200, 10));
    CHECK_EQ(rep(r, d, 110, 10), 0);
    CHECK_EQ(rep(r, d, 111, 10), TFV_REASON_PRICE_BAND);
    /* a configured reference (1000, 10 ticks) whatever the book */
    uint64_t f = place(e, nl(9, 1, 1, 1, 1000, 10));
    CHECK_EQ(rep(r, f, 1010, 10), 0);
    CHECK_EQ(rep(r, f, 1011, 10), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, f, 990, 10), 0);
    CHECK_EQ(rep(r, f, 989, 10), TFV_REASON_PRICE_BAND);
    /* ref last: the book's (best bid 20: 15..25) before a trade, then the last trade's (22) */
    uint64_t g = place(e, nl(10, 1, 1, 1, 30, 10));
    CHECK_EQ(rep(r, g, 25, 10), 0);
    CHECK_EQ(rep(r, g, 26, 10), TFV_REASON_PRICE_BAND);
    apply(e, nl(2, 1, 1, 0, 22, 1)); /* trades at 22 */
    CHECK_EQ(rep(r, g, 27, 10), 0);
    CHECK_EQ(rep(r, g, 28, 10), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, g, 17, 10), 0);
    CHECK_EQ(rep(r, g, 16, 10), TFV_REASON_PRICE_BAND);
    /* accounts without limits: below the first, past the last */
    uint64_t h1 = place(e, nl(1, 2, 1, 1, 500, 10));
    uint64_t h2 = place(e, nl(11, 1, 1, 1, 500, 10));
    CHECK_EQ(rep(r, h1, INT64_MAX, 1000000), 0);
    CHECK_EQ(rep(r, h2, INT64_MAX, 1000000), 0);

    /* a kill switch on account 9: its increases are refused, its reductions pass; the other
     * accounts keep their limits, every rule of them */
    sink.n = 0;
    CHECK_RC(tfv_risk_kill(r, ++seq, 9, 1, &sink), TF_ENGINE_APPLIED);
    f = place(e, nl(9, 2, 1, 1, 1000, 10)); /* placed past the venue */
    CHECK_EQ(rep(r, f, 1000, 10), 0);
    CHECK_EQ(rep(r, f, 1000, 11), TFV_REASON_KILL_SWITCH);
    CHECK_EQ(rep(r, f, 1001, 1), TFV_REASON_KILL_SWITCH);
    CHECK_EQ(rep(r, f, 1000, 0), TFV_REASON_KILL_SWITCH); /* a bad quantity meets the switch */
    CHECK_EQ(rep_client(r, 9, 2, 1001, 1), TFV_REASON_KILL_SWITCH);
    CHECK_EQ(rep(r, a, 20, 0), 0);
    CHECK_EQ(rep(r, a, 20, 100), 0);
    CHECK_EQ(rep(r, a, 20, 101), TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(rep(r, a, 26, 100), TFV_REASON_MAX_NOTIONAL);
    CHECK_EQ(rep(r, cb, 111, 10), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, h2, INT64_MAX, 1000000), 0);
    sink.n = 0;
    CHECK_RC(tfv_risk_kill(r, 0, 9, 0, &sink), TF_ENGINE_APPLIED);
    CHECK_EQ(rep(r, f, 1011, 10), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, f, 1010, 10), 0);

    /* account 1000 joins: the ids are no longer consecutive, the index finds them */
    tfv_limits l = {.account = 1000, .max_qty = 3};
    CHECK_RC(tfv_risk_apply_limits(r, &l), 0);
    uint64_t k = place(e, nl(1000, 1, 1, 1, 500, 3));
    CHECK_EQ(rep(r, k, 500, 4), TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(rep(r, k, 501, 3), 0);
    CHECK_EQ(rep(r, a, 20, 101), TFV_REASON_MAX_QUANTITY);
    CHECK_EQ(rep(r, a, 26, 100), TFV_REASON_MAX_NOTIONAL);
    CHECK_EQ(rep(r, a, 28, 1), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, cb, 111, 10), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, f, 1011, 10), TFV_REASON_PRICE_BAND);
    CHECK_EQ(rep(r, h1, INT64_MAX, 1000000), 0);
    CHECK_EQ(rep(r, h2, INT64_MAX, 1000000), 0);
    /* an empty config: no rule at all */
    CHECK_RC(load(r, "# nothing\n", &c), 0);
    tfv_risk_config_free(&c);
    CHECK_EQ(rep(r, a, 28, 101), 0);
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

/* An engine whose instrument ids are too far apart for its direct table (it searches them): a
 * new order's band finds its book by the engine's search, not the inline table read (risk.c
 * falls back to the full check), and decides as for any book. */
static void sparse_instruments(void)
{
    static const uint64_t ids[] = {1, 1000000000};
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = ids, .n_instruments = 2, .max_orders = 100};
    tf_engine *e = NULL;
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    seq = 0;
    tfv_risk *r = NULL;
    CHECK_RC(tfv_risk_open(e, &r), 0);
    tfv_risk_config c;
    CHECK_RC(load(r,
                  "account 1 band 10 max_open 1\n"
                  "account 2 band 10 max_open 2\n",
                  &c),
             0);
    tfv_risk_config_free(&c);
    apply(e, nl(3, 1, 1000000000, 1, 100, 5)); /* account 3 (no limits) offers at 100 */
    CHECK_EQ(chk(r, nl(1, 1, 1000000000, 0, 111, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(1, 1, 1000000000, 0, 89, 1)), TFV_REASON_PRICE_BAND);
    CHECK_EQ(chk(r, nl(1, 1, 1000000000, 0, 110, 1)), 0);
    CHECK_EQ(chk(r, nl(2, 1, 1000000000, 0, 90, 1)), 0);
    CHECK_EQ(chk(r, nl(1, 1, 1, 0, 5000, 1)), 0); /* instrument 1's book is empty: no band */
    CHECK_EQ(chk(r, nl(1, 1, 7, 0, 5000, 1)), 0); /* not traded: the engine's reject */
    apply(e, nl(1, 2, 1000000000, 0, 95, 1));     /* account 1 rests its one order */
    CHECK_EQ(chk(r, nl(1, 3, 1000000000, 0, 95, 1)), TFV_REASON_MAX_OPEN_ORDERS);
    CHECK_EQ(chk(r, nl(2, 3, 1000000000, 0, 95, 1)), 0);
    tfv_risk_close(r);
    tf_engine_destroy(e);
}

int main(void)
{
    config_file();
    payloads();
    rules();
    kill_switch();
    kill_switch_reports();
    stale_hint();
    through_records();
    through_venue();
    band_last_trade();
    sparse_accounts();
    sparse_instruments();
    shared_limits();
    replace_boundaries();
    return tf_test_report();
}
