/* Pre-trade risk per account (docs/venue.md, "Risk"): the config file of `engine serve --risk`,
 * its journal records, the checks a command passes before the engine, and the kill switch.
 *
 * Replay: a config is journaled when it is loaded or reloaded as RiskLimits records (0x11): one
 * reset (account 0), then one per account. Applying those records (tfv_risk_apply_limits) is the
 * only way limits change, live or in a replay, so `tollfree engine run` makes the same checks.
 * The kill switch (0x12) and cancel-on-disconnect (0x13) are journaled the same way.
 */
#ifndef TF_VENUE_RISK_H
#define TF_VENUE_RISK_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/engine.h"
#include "tollfree/orderflow.h"

/* Extension kinds (docs/venue.md has the payloads). */
#define TFV_RISK_LIMITS 0x11          /* one account's limits, or the reset that starts a config */
#define TFV_KILL_SWITCH 0x12          /* an admin's kill switch on/off for an account */
#define TFV_CANCEL_ON_DISCONNECT 0x13 /* cancel every live order a session placed */
#define TFV_RISK_LIMITS_LEN 48
#define TFV_KILL_SWITCH_LEN 17
#define TFV_CANCEL_ON_DISCONNECT_LEN 16

#define TFV_RISK_PAYLOAD_MAX 48

/* 1 for the risk records' kinds (0x11-0x13). */
int tfv_risk_kind(int kind);
/* Their payload sizes (TF_E_OFL_UNKNOWN_KIND for another kind) and names. */
int tfv_risk_payload_size(int kind);
const char *tfv_risk_kind_name(int kind);
/* 0 when p[0..n) is a valid payload of kind, else TF_E_OFL_PAYLOAD_LENGTH or TF_E_PROTOCOL. */
int tfv_risk_payload_check(int kind, const uint8_t *p, size_t n);

/* The venue's reject reasons for the risk rules (VenueRejected 0x90). */
#define TFV_REASON_MAX_QUANTITY 17
#define TFV_REASON_MAX_NOTIONAL 18
#define TFV_REASON_PRICE_BAND 19
#define TFV_REASON_MAX_OPEN_ORDERS 20
#define TFV_REASON_KILL_SWITCH 21

#define TFV_BAND_TICKS 0
#define TFV_BAND_BPS 1 /* basis points: 1/100 of a percent */

#define TFV_RISK_MAX_ACCOUNTS TF_ENGINE_STP_ACCOUNTS
#define TFV_RISK_MAX_SESSIONS 1024

/* One account's limits (0 = no limit), as the 0x11 payload carries them. */
typedef struct tfv_limits {
    uint64_t account; /* 0: the reset record that starts a config */
    uint64_t max_qty;
    uint64_t max_notional; /* price * quantity, in ticks * lots */
    uint64_t band;         /* ticks or basis points (band_unit) around the reference */
    int64_t ref_price; /* the band's reference; 0: ref_last's, else the book's (docs/venue.md) */
    uint32_t max_open; /* live orders at once */
    uint8_t band_unit; /* TFV_BAND_* */
    uint8_t stp;       /* tf_engine_stp */
    uint8_t ref_last;  /* 1 (ref_price 0): the last trade price, the book's before any trade */
} tfv_limits;

/* A parsed config file. */
typedef struct tfv_risk_config {
    tfv_limits *acct; /* ascending by account, no duplicates */
    uint32_t n;
    uint64_t *admins; /* session ids (tfv_session_id of the names) allowed the kill switch */
    uint32_t n_admins;
    uint64_t *cod; /* session ids whose orders are canceled when their last connection closes */
    uint32_t n_cod;
} tfv_risk_config;

/* Parses the config at path. On error writes "PATH: line N: what" into err and returns
 * TF_E_BAD_INPUT, or -errno when the file cannot be read. */
int tfv_risk_load(const char *path, tfv_risk_config *out, char *err, size_t errcap);
/* The same over text[0..len) (name is what err lines start with). */
int tfv_risk_parse(const char *text, size_t len, const char *name, tfv_risk_config *out, char *err,
                   size_t errcap);
void tfv_risk_config_free(tfv_risk_config *c);
int tfv_risk_is_admin(const tfv_risk_config *c, uint64_t session);
int tfv_risk_cancels_on_disconnect(const tfv_risk_config *c, uint64_t session);

/* 0x11 / 0x12 / 0x13 payloads. Encoders return the length; decoders 0 or TF_E_PROTOCOL (a
 * length other than the kind's, a unit, mode or flag out of range). */
int tfv_limits_encode(const tfv_limits *l, uint8_t out[TFV_RISK_LIMITS_LEN]);
int tfv_limits_decode(const uint8_t *p, size_t n, tfv_limits *out);
int tfv_kill_encode(uint64_t command_seq, uint64_t account, int on,
                    uint8_t out[TFV_KILL_SWITCH_LEN]);
int tfv_kill_decode(const uint8_t *p, size_t n, uint64_t *command_seq, uint64_t *account, int *on);
int tfv_cod_encode(uint64_t command_seq, uint64_t session,
                   uint8_t out[TFV_CANCEL_ON_DISCONNECT_LEN]);
int tfv_cod_decode(const uint8_t *p, size_t n, uint64_t *command_seq, uint64_t *session);

/* The limits in force and the kill switches: built only from records. */
typedef struct tfv_risk tfv_risk;
int tfv_risk_open(tf_engine *e, tfv_risk **out);
void tfv_risk_close(tfv_risk *r);
/* Applies one 0x11 record: the reset clears every limit (and the STP modes and counts the
 * previous config set in the engine); an account's record sets its limits, its STP mode and,
 * with max_open, starts counting its live orders. 0, TF_E_LIMIT (too many accounts), TF_E_NOMEM. */
int tfv_risk_apply_limits(tfv_risk *r, const tfv_limits *l);
/* The kill switch of an account: on cancels its live orders (tf_engine_cancel_account with
 * command_seq: a Canceled to sink for an order an OFL1 command placed, a CanceledEx reason
 * ACCOUNT for one a gateway command placed) and refuses its new orders until off. Returns the
 * engine's outcome, or an error. */
int tfv_risk_kill(tfv_risk *r, uint64_t command_seq, uint64_t account, int on,
                  tf_engine_sink *sink);
int tfv_risk_killed(const tfv_risk *r, uint64_t account);
/* The start of the state, read inline by tfv_risk_check (risk.c keeps the rest). */
struct tfv_risk_head {
    uint32_t n;        /* accounts with limits */
    uint32_t n_killed; /* accounts with the kill switch on */
};
/* tfv_risk_check while some limit or kill switch is in force. */
int tfv_risk_check_on(const tfv_risk *r, const tf_ofl_msg *cmd);
/* The first rule cmd breaks (a TFV_REASON_*), or 0. Cancels always pass; a command the engine
 * will reject anyway (bad quantity or price, unknown instrument or order) passes, so the engine
 * gives its own reason. O(1) for accounts with consecutive ids (else one hash probe), plus one
 * order lookup for a Replace or ReplaceByClient (which leaves the engine the order's slot as its
 * hint: the engine applying that command next skips its own lookup; the order is read in place)
 * and one book read for a band; a rule the account's limits lack costs one test. Inline, and no
 * call at all, while no limits and no kill switch are in force. */
/* 1 when no rule is in force (no limits, no kill switch on; r NULL too): every command passes. */
static inline int tfv_risk_idle(const tfv_risk *r)
{
    const struct tfv_risk_head *h = (const struct tfv_risk_head *)(const void *)r;
    return !r || !(h->n | h->n_killed);
}
static inline int tfv_risk_check(const tfv_risk *r, const tf_ofl_msg *cmd)
{
    if (tfv_risk_idle(r))
        return 0;
    return tfv_risk_check_on(r, cmd); /* a Replace first there, without a second call */
}
/* Applies a decoded risk record (kind 0x11 or 0x12; 0x13 needs the venue's owners and is
 * applied by tfv_apply): the outcome (TF_ENGINE_APPLIED, or the engine's for a kill switch) or
 * an error. */
int tfv_risk_apply_record(tfv_risk *r, int kind, const uint8_t *p, size_t n, tf_engine_sink *sink);
/* Accounts with limits. */
uint32_t tfv_risk_accounts(const tfv_risk *r);

#endif
