/* The sweep service runs any strategy (docs/protocol.md, "Strategies"): the real `tollfree serve`
 * started with every built-in (--strategy), over unix, tcp and shm.
 *  - STRATEGIES lists them with their parameter names; HELLO announces TF_CAP_STRATEGIES;
 *  - SWEEP_WITH (inline closes and a loaded dataset, statistics and a fee) equals the in-process
 *    tf_sweep_with bit for bit, for every built-in and "hma";
 *  - a SESSION_OPEN_WITH session equals the in-process stream (tf_strategy_open_with) bar by bar;
 *  - hostile frames (an unknown name, a wrong k, k = 0, lying lengths, a huge n_combos, a name
 *    length of 4 GiB, a combo init refuses) get their error frame and the connection and the
 *    server go on serving (an echo on the same connection, a sweep from another client);
 *  - a --strategy that cannot be loaded keeps the server from starting (exit 2, the file and the
 *    reason on stderr). */
#include "harness.h"
#include "test_server_util.h"
#include "tollfree/client.h"
#include "tollfree/strategy.h"

static tserver ts;
static double *g_close;
static int64_t g_n;

#define N_BARS 3000

/* A small grid per strategy, in its parameter order (a few combos init refuses are not here:
 * the hostile part sends those). */
static int grid_of(const char *name, double *p, int cap)
{
    int n = 0;
    if (!strcmp(name, "hma")) {
        for (int L = 10; L <= 60 && n + 1 <= cap; L += 10) {
            int64_t c[6];
            tf_combo_from_length(L, c);
            for (int k = 0; k < 6; k++)
                p[6 * n + k] = (double)c[k];
            n++;
        }
        return n;
    }
    if (!strcmp(name, "sma_cross") || !strcmp(name, "ema_cross") || !strcmp(name, "plugin_sma")) {
        for (int f = 2; f <= 12; f += 5)
            for (int s = f + 3; s <= 40; s += 9) {
                p[2 * n] = f;
                p[2 * n + 1] = s;
                n++;
            }
        return n;
    }
    if (!strcmp(name, "donchian")) {
        for (int w = 1; w <= 60; w += 7)
            p[n++] = w;
        return n;
    }
    if (!strcmp(name, "rsi")) {
        for (int per = 2; per <= 20; per += 6)
            for (int lo = 20; lo <= 35; lo += 15) {
                p[3 * n] = per;
                p[3 * n + 1] = lo;
                p[3 * n + 2] = 100 - lo;
                n++;
            }
        return n;
    }
    if (!strcmp(name, "bollinger")) {
        for (int w = 2; w <= 40; w += 9)
            for (int k = 0; k < 3; k++) {
                p[2 * n] = w;
                p[2 * n + 1] = 0.5 + k * 0.75;
                n++;
            }
        return n;
    }
    return 0;
}

static const char *const NAMES[] = {"hma", "sma_cross", "ema_cross", "donchian",
                                    "rsi", "bollinger", "plugin_sma"};
#define N_NAMES 7

/* The sample plugin (examples/plugin_sma.c, built as tests/plugins/tfplug_sma.so), offered by
 * the server as "plugin_sma"; and a plugin built for another ABI. */
static char g_plugin[1024], g_bad_plugin[1024];
static const tf_strategy_def *g_plugin_def;

static void plugin_paths(void)
{
    const char *b = getenv("TF_BUILD_DIR");
    snprintf(g_plugin, sizeof g_plugin, "%s/tests/plugins/tfplug_sma.so", b ? b : "build");
    snprintf(g_bad_plugin, sizeof g_bad_plugin, "%s/tests/plugins/tfplug_bad_abi.so",
             b ? b : "build");
}

/* The strategy of that name as the server has it: a built-in, or the plugin. */
static const tf_strategy_def *def_of(const char *name)
{
    return strcmp(name, "plugin_sma") ? tf_strategy_builtin(name) : g_plugin_def;
}

/* Every built-in over the service equals tf_sweep_with in process: pnl, trades, statistics. */
static void check_sweeps(tf_client *c, const char *kind)
{
    double close[N_BARS];
    memcpy(close, g_close, sizeof close);
    close[100] = NAN; /* the booking's NaN rules on every path */
    close[2000] = INFINITY;
    uint64_t handle = 0;
    CHECK_RC(tf_client_load(c, close, N_BARS, &handle, NULL), 0);
    for (int s = 0; s < N_NAMES; s++) {
        const tf_strategy_def *def = def_of(NAMES[s]);
        CHECK(def != NULL);
        if (!def)
            continue;
        double params[64 * 6];
        int n = grid_of(NAMES[s], params, 64);
        CHECK(n > 0);
        double fee = 0.05;
        double rp[64], sp[64], dp[64];
        int64_t rt[64], st[64], dt[64];
        tf_stats rs[64], ss[64], dsr[64];
        tf_sweep_opts o = {.threads = 1, .fee = &fee, .stats = rs};
        CHECK_RC(tf_sweep_with(def, close, N_BARS, params, n, rp, rt, &o), 0);
        CHECK_RC(tf_client_sweep_with(c, NAMES[s], 0, close, N_BARS, params, def->n_params,
                                      (uint32_t)n, &fee, sp, st, ss),
                 0);
        CHECK_RC(tf_client_sweep_with(c, NAMES[s], handle, NULL, 0, params, def->n_params,
                                      (uint32_t)n, &fee, dp, dt, dsr),
                 0);
        int same = !memcmp(rp, sp, 8 * (size_t)n) && !memcmp(rt, st, 8 * (size_t)n) &&
                   !memcmp(rs, ss, sizeof(tf_stats) * (size_t)n) &&
                   !memcmp(rp, dp, 8 * (size_t)n) && !memcmp(rt, dt, 8 * (size_t)n) &&
                   !memcmp(rs, dsr, sizeof(tf_stats) * (size_t)n);
        if (!same)
            fprintf(stderr, "%s: %s over the service differs from tf_sweep_with\n", kind, NAMES[s]);
        CHECK(same);
        /* No statistics, the default fee. */
        tf_sweep_opts o2 = {.threads = 1};
        CHECK_RC(tf_sweep_with(def, close, N_BARS, params, n, rp, rt, &o2), 0);
        CHECK_RC(tf_client_sweep_with(c, NAMES[s], 0, close, N_BARS, params, def->n_params,
                                      (uint32_t)n, NULL, sp, st, NULL),
                 0);
        CHECK(!memcmp(rp, sp, 8 * (size_t)n) && !memcmp(rt, st, 8 * (size_t)n));
    }
    /* No combos: an empty reply. */
    double one = 0;
    int64_t onet = 0;
    double p0[2] = {2, 5};
    CHECK_RC(
        tf_client_sweep_with(c, "sma_cross", handle, NULL, 0, p0, 2, 0, NULL, &one, &onet, NULL),
        0);
    CHECK_RC(tf_client_drop(c, handle), 0);
}

/* A session of each built-in equals the in-process stream, bar by bar. */
static void check_sessions(tf_client *c, const char *kind)
{
    for (int s = 0; s < N_NAMES; s++) {
        const tf_strategy_def *def = def_of(NAMES[s]);
        if (!def)
            continue;
        double params[64 * 6];
        grid_of(NAMES[s], params, 64);
        const double *p = params + def->n_params; /* the second combo */
        tf_strategy *ref = NULL;
        CHECK_RC(tf_strategy_open_with(&ref, def, p), 0);
        uint64_t sid = 0;
        CHECK_RC(tf_client_session_open_with(c, NAMES[s], p, def->n_params, &sid), 0);
        if (!ref || !sid) {
            tf_strategy_close(ref);
            continue;
        }
        int bad = 0;
        for (int i = 0; i < 1500; i++) {
            int pos = tf_strategy_step(ref, g_close[i]);
            tf_session_state st;
            if (tf_client_session_bar(c, sid, g_close[i], &st) || st.position != pos ||
                st.trades != tf_strategy_trades(ref)) {
                bad = 1;
                break;
            }
        }
        tf_session_state fin;
        CHECK_RC(tf_client_session_close(c, sid, &fin), 0);
        double rp = tf_strategy_pnl(ref);
        if (bad || memcmp(&fin.pnl, &rp, 8) || fin.trades != tf_strategy_trades(ref) ||
            fin.bars != 1500)
            fprintf(stderr, "%s: a %s session differs from the stream\n", kind, NAMES[s]);
        CHECK(!bad && !memcmp(&fin.pnl, &rp, 8) && fin.trades == tf_strategy_trades(ref));
        CHECK_EQ(fin.bars, 1500);
        tf_strategy_close(ref);
    }
}

static void check_transport(const char *kind)
{
    char url[256];
    t_url(&ts, kind, url, sizeof url);
    tf_client *c = NULL;
    CHECK_RC(t_client_open(&c, url), 0);
    if (!c)
        return;
    tf_server_info info;
    CHECK_RC(tf_client_hello(c, &info), 0);
    CHECK(info.caps & TF_CAP_STRATEGIES);
    char text[4096];
    size_t len = 0;
    CHECK_RC(tf_client_strategies(c, text, sizeof text, &len), N_NAMES);
    CHECK_EQ(len, strlen(text));
    CHECK(!strncmp(text, "hma ", 4));
    CHECK(strstr(text, "\nsma_cross fast slow\n") != NULL);
    CHECK(strstr(text, "\nrsi period lower upper\n") != NULL);
    CHECK(strstr(text, "\nbollinger window k\n") != NULL);
    CHECK(strstr(text, "\nplugin_sma fast slow\n") != NULL);
    /* cut to the caller's buffer, still NUL-terminated, the whole length told */
    char small[8];
    CHECK_RC(tf_client_strategies(c, small, sizeof small, &len), N_NAMES);
    CHECK_EQ(strlen(small), 7);
    CHECK_EQ(len, strlen(text));
    check_sweeps(c, kind);
    check_sessions(c, kind);
    /* The client's own checks, before anything is sent. */
    double p[2] = {2, 5};
    double pnl;
    int64_t tr;
    CHECK_RC(tf_client_sweep_with(c, "sma_cross", 0, g_close, 10, p, 0, 1, NULL, &pnl, &tr, NULL),
             TF_E_INVALID_ARG);
    CHECK_RC(tf_client_sweep_with(c, "", 0, g_close, 10, p, 2, 1, NULL, &pnl, &tr, NULL),
             TF_E_INVALID_ARG);
    CHECK_RC(tf_client_sweep_with(c, "sma_cross", 7, g_close, 10, p, 2, 1, NULL, &pnl, &tr, NULL),
             TF_E_INVALID_ARG);
    CHECK_RC(
        tf_client_sweep_with(NULL, "sma_cross", 0, g_close, 10, p, 2, 1, NULL, &pnl, &tr, NULL),
        TF_E_NULL_ARG);
    /* Server refusals through the client: the code and a message naming what is wrong. */
    CHECK_RC(tf_client_sweep_with(c, "nosuch", 0, g_close, 10, p, 2, 1, NULL, &pnl, &tr, NULL),
             TF_E_STRATEGY);
    CHECK(strstr(tf_client_error_message(c), "nosuch") != NULL);
    CHECK(strstr(tf_client_error_message(c), "sma_cross") != NULL); /* the list offered */
    double p3[3] = {2, 5, 7};
    CHECK_RC(tf_client_sweep_with(c, "sma_cross", 0, g_close, 10, p3, 3, 1, NULL, &pnl, &tr, NULL),
             TF_E_STRATEGY);
    CHECK(strstr(tf_client_error_message(c), "takes 2 parameters") != NULL);
    double bad[4] = {2, 5, 9, 3}; /* combo 1: fast >= slow */
    double pnl2[2];
    int64_t tr2[2];
    CHECK_RC(tf_client_sweep_with(c, "sma_cross", 0, g_close, 10, bad, 2, 2, NULL, pnl2, tr2, NULL),
             TF_E_STRATEGY);
    CHECK(strstr(tf_client_error_message(c), "combo 1") != NULL);
    uint64_t sid;
    CHECK_RC(tf_client_session_open_with(c, "sma_cross", bad + 2, 2, &sid), TF_E_STRATEGY);
    CHECK_RC(tf_client_session_open_with(c, "nosuch", p, 2, &sid), TF_E_STRATEGY);
    CHECK_RC(tf_client_sweep_with(c, "sma_cross", 0x1234, NULL, 0, p, 2, 1, NULL, &pnl, &tr, NULL),
             TF_E_UNKNOWN_DATASET);
    /* still in sync */
    uint64_t v = 42, back = 0;
    CHECK_RC(tf_client_echo(c, &v, 8, &back), 0);
    CHECK_EQ(back, 42);
    tf_client_close(c);
}

/* ---- hostile frames on a raw socket ---- */

/* A SWEEP_WITH frame: fixed part, name padded, closes, params (lengths as given, not checked). */
static size_t sweep_with_frame(uint8_t *f, uint64_t id, uint64_t handle, uint64_t n_bars,
                               uint32_t n_combos, uint32_t k, uint32_t name_len, const char *name,
                               const double *close, size_t close_n, const double *params,
                               size_t params_n)
{
    size_t off = 16;
    tf_put64(f + off, handle);
    tf_put64(f + off + 8, n_bars);
    tf_put32(f + off + 16, n_combos);
    tf_put32(f + off + 20, 0);
    tf_put32(f + off + 24, k);
    tf_put32(f + off + 28, name_len);
    off += 32;
    size_t nl = strlen(name), pad = (nl + 7) & ~(size_t)7;
    memset(f + off, 0, pad);
    memcpy(f + off, name, nl);
    off += pad;
    if (close_n)
        memcpy(f + off, close, 8 * close_n);
    off += 8 * close_n;
    if (params_n)
        memcpy(f + off, params, 8 * params_n);
    off += 8 * params_n;
    tf_wire_put_header(f, (uint32_t)(off - 4), TF_OP_SWEEP_WITH, id);
    return off;
}

/* The decoder alone (tf_wire_decode_request): offsets, "need more", and lengths compared by
 * division. */
static void check_decoder(void)
{
    static uint8_t f[4096];
    double close[5] = {1, 2, 3, 4, 5}, p[6] = {2, 3, 2, 4, 3, 4};
    tf_wire_request rq;
    size_t n = sweep_with_frame(f, 7, 0, 5, 3, 2, 9, "sma_cross", close, 5, p, 6);
    uint32_t body = (uint32_t)(n - 4);
    CHECK_RC(tf_wire_decode_request(f + 4, body, body, &rq), 0);
    CHECK_EQ(rq.opcode, TF_OP_SWEEP_WITH);
    CHECK_EQ(rq.request_id, 7);
    CHECK_EQ(rq.fixed_len, 12 + 32);
    CHECK_EQ(rq.var_len, 16 + 40 + 48);
    CHECK_EQ(rq.n_params, 2);
    CHECK_EQ(rq.name_len, 9);
    CHECK_EQ(rq.name_off, 0);
    CHECK_EQ(rq.close_off, 16);
    CHECK_EQ(rq.params_off, 56);
    CHECK_EQ(rq.params_len, 48);
    CHECK_EQ(rq.n_bars, 5);
    CHECK_EQ(rq.n_combos, 3);
    CHECK_RC(tf_wire_decode_request(f + 4, 20, body, &rq), 44); /* need the fixed part */
    /* with a fee: the fixed part grows by 8, asked for in turn */
    uint8_t g[4096];
    memcpy(g, f, 48);
    tf_put32(g + 16 + 20, TF_SWEEP_FEE | TF_SWEEP_STATS);
    double fee = 0.25;
    memcpy(g + 48, &fee, 8);
    memcpy(g + 56, f + 48, n - 48);
    tf_put32(g, body + 8);
    CHECK_RC(tf_wire_decode_request(g + 4, 44, body + 8, &rq), 52);
    CHECK_RC(tf_wire_decode_request(g + 4, body + 8, body + 8, &rq), 0);
    CHECK_EQ(rq.fixed_len, 52);
    CHECK(rq.fee == 0.25);
    CHECK_EQ(rq.flags, TF_SWEEP_FEE | TF_SWEEP_STATS);
    /* a dataset sweep: no closes */
    n = sweep_with_frame(f, 8, 99, 0, 1, 3, 3, "rsi", NULL, 0, p, 3);
    CHECK_RC(tf_wire_decode_request(f + 4, n - 4, n - 4, &rq), 0);
    CHECK_EQ(rq.id, 99);
    CHECK_EQ(rq.params_off, 8);
    CHECK_EQ(rq.params_len, 24);
    /* one byte short, one too many */
    CHECK_RC(tf_wire_decode_request(f + 4, n - 4, n - 5, &rq), TF_E_LENGTH_MISMATCH);
    CHECK_RC(tf_wire_decode_request(f + 4, n - 4, n - 3, &rq), TF_E_LENGTH_MISMATCH);
    /* SESSION_OPEN_WITH */
    uint8_t so[64] = {0};
    tf_put32(so + 16, 2);
    tf_put32(so + 20, 9);
    memcpy(so + 24, "sma_cross", 9);
    memcpy(so + 40, p, 16);
    so[4] = TF_OP_SESSION_OPEN_WITH;
    CHECK_RC(tf_wire_decode_request(so + 4, 52, 52, &rq), TF_E_BAD_HEADER); /* version 0 */
    tf_wire_put_header(so, 52, TF_OP_SESSION_OPEN_WITH, 3);
    CHECK_RC(tf_wire_decode_request(so + 4, 52, 52, &rq), 0);
    CHECK_EQ(rq.n_combos, 1);
    CHECK_EQ(rq.params_off, 16);
    CHECK_EQ(rq.params_len, 16);
    CHECK_RC(tf_wire_decode_request(so + 4, 52, 44, &rq), TF_E_LENGTH_MISMATCH);
    /* STRATEGIES: empty, and nothing may follow */
    uint8_t li[32];
    size_t ln = t_v2_frame(li, TF_OP_STRATEGIES, 4, NULL, 0);
    CHECK_RC(tf_wire_decode_request(li + 4, ln - 4, ln - 4, &rq), 0);
    ln = t_v2_frame(li, TF_OP_STRATEGIES, 4, "x", 1);
    CHECK_RC(tf_wire_decode_request(li + 4, ln - 4, ln - 4, &rq), TF_E_LENGTH_MISMATCH);
}

/* Sends a frame, reads one reply: its error code (0: a success) with the message in msg. */
static int send_expect(int fd, const uint8_t *f, size_t n, uint64_t id, char *msg, size_t cap)
{
    static uint8_t rb[1 << 16];
    if (t_send_all(fd, f, n))
        return 1;
    long bl = t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS);
    if (bl < 12)
        return 2;
    CHECK_EQ(tf_le64(rb + 4), id);
    int code = t_error_code(rb, bl);
    if (code && msg) {
        size_t m = tf_le32(rb + 16);
        if (m >= cap)
            m = cap - 1;
        memcpy(msg, rb + 20, m);
        msg[m] = 0;
    }
    return code;
}

/* Another client is served all along. */
static void other_client_ok(void)
{
    char url[256];
    t_url(&ts, "tcp", url, sizeof url);
    tf_client *c = NULL;
    CHECK_RC(t_client_open(&c, url), 0);
    double p[2] = {3, 9}, pnl, rp;
    int64_t tr, rt;
    const tf_strategy_def *def = tf_strategy_builtin("sma_cross");
    tf_sweep_opts o = {.threads = 1};
    CHECK_RC(tf_sweep_with(def, g_close, 500, p, 1, &rp, &rt, &o), 0);
    CHECK_RC(tf_client_sweep_with(c, "sma_cross", 0, g_close, 500, p, 2, 1, NULL, &pnl, &tr, NULL),
             0);
    CHECK(!memcmp(&pnl, &rp, 8) && tr == rt);
    tf_client_close(c);
    CHECK(t_alive(&ts));
}

static void check_hostile(int tcp)
{
    int fd = tcp ? t_connect_tcp(ts.tcp_port) : t_connect_unix(ts.unix_path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    static uint8_t f[1 << 16];
    char msg[1100];
    double p2[4] = {3, 9, 4, 12}, p3[3] = {3, 9, 1};
    size_t n;
    uint64_t id = 100;

    /* unknown name */
    n = sweep_with_frame(f, ++id, 0, 50, 1, 2, 6, "nosuch", g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "'nosuch'") != NULL && strstr(msg, "hma") != NULL);
    CHECK(t_echo_ok(fd, ++id));
    /* wrong k: sma_cross takes 2 */
    n = sweep_with_frame(f, ++id, 0, 50, 1, 3, 9, "sma_cross", g_close, 50, p3, 3);
    CHECK_EQ(send_expect(fd, f, n, id, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "takes 2 parameters (fast, slow)") != NULL);
    CHECK(t_echo_ok(fd, ++id));
    /* k = 0 (and k above the maximum): the lengths cannot be read */
    n = sweep_with_frame(f, ++id, 0, 50, 1, 0, 9, "sma_cross", g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    n = sweep_with_frame(f, ++id, 0, 50, 1, 65, 9, "sma_cross", g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    CHECK(t_echo_ok(fd, ++id));
    /* lengths lying: more combos than the frame carries; a huge n_combos; huge n_bars */
    n = sweep_with_frame(f, ++id, 0, 50, 1000, 2, 9, "sma_cross", g_close, 50, p2, 4);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    n = sweep_with_frame(f, ++id, 0, 50, 0xFFFFFFFFu, 2, 9, "sma_cross", g_close, 50, p2, 4);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    n = sweep_with_frame(f, ++id, 0, UINT64_MAX / 4, 1, 2, 9, "sma_cross", g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    /* a name length of 4 GiB - 1 */
    n = sweep_with_frame(f, ++id, 0, 50, 1, 2, 0xFFFFFFFFu, "sma_cross", g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    /* a dataset sweep that also carries closes */
    n = sweep_with_frame(f, ++id, 77, 50, 1, 2, 9, "sma_cross", g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    CHECK(t_echo_ok(fd, ++id));
    /* a name longer than any the server looks up (the lengths agree) */
    char longname[200];
    memset(longname, 'a', 199);
    longname[199] = 0;
    n = sweep_with_frame(f, ++id, 0, 50, 1, 2, 199, longname, g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "199 bytes") != NULL);
    /* a name with a NUL and bytes that are not text */
    n = sweep_with_frame(f, ++id, 0, 50, 1, 2, 9, "sma\001cross", g_close, 50, p2, 2);
    CHECK_EQ(send_expect(fd, f, n, id, msg, sizeof msg), TF_E_STRATEGY);
    /* init refusing combo 1 */
    double bad[4] = {3, 9, 12, 4};
    n = sweep_with_frame(f, ++id, 0, 50, 2, 2, 9, "sma_cross", g_close, 50, bad, 4);
    CHECK_EQ(send_expect(fd, f, n, id, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "combo 1") != NULL);
    /* an unknown flag */
    n = sweep_with_frame(f, ++id, 0, 50, 1, 2, 9, "sma_cross", g_close, 50, p2, 2);
    tf_put32(f + 16 + 20, 4);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), TF_E_PROTOCOL);
    /* a good one on the same connection */
    n = sweep_with_frame(f, ++id, 0, 50, 2, 2, 9, "sma_cross", g_close, 50, p2, 4);
    CHECK_EQ(send_expect(fd, f, n, id, NULL, 0), 0);
    /* SESSION_OPEN_WITH: wrong k, lying lengths, unknown name */
    uint8_t so[256];
    size_t off = 16;
    tf_put32(so + off, 3);
    tf_put32(so + off + 4, 9);
    memcpy(so + off + 8, "sma_cross\0\0\0\0\0\0\0", 16);
    memcpy(so + off + 24, p3, 24);
    tf_wire_put_header(so, (uint32_t)(12 + 8 + 16 + 24), TF_OP_SESSION_OPEN_WITH, ++id);
    CHECK_EQ(send_expect(fd, so, 16 + 8 + 16 + 24, id, msg, sizeof msg), TF_E_STRATEGY);
    tf_put32(so + off, 2); /* k = 2 but 3 values follow */
    tf_wire_put_header(so, (uint32_t)(12 + 8 + 16 + 24), TF_OP_SESSION_OPEN_WITH, ++id);
    CHECK_EQ(send_expect(fd, so, 16 + 8 + 16 + 24, id, NULL, 0), TF_E_LENGTH_MISMATCH);
    memcpy(so + off + 8, "sma_crosz", 9);
    tf_wire_put_header(so, (uint32_t)(12 + 8 + 16 + 16), TF_OP_SESSION_OPEN_WITH, ++id);
    CHECK_EQ(send_expect(fd, so, 16 + 8 + 16 + 16, id, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(t_echo_ok(fd, ++id));
    close(fd);
    other_client_ok();
}

/* A --strategy that cannot be loaded: the server does not start, naming the file and why. */
static void check_refused_start(void)
{
    const char *cases[][3] = {{"/nonexistent/plugin.so", NULL, "/nonexistent/plugin.so"},
                              {"nosuch_strategy", NULL, "nosuch_strategy"},
                              {"sma_cross", "sma_cross", "offered already"},
                              {g_bad_plugin, NULL, "tfplug_bad_abi.so"}};
    for (int i = 0; i < 4; i++) {
        tserver t2;
        memset(&t2, 0, sizeof t2);
        CHECK_EQ(t_mkdtemp(t2.dir, sizeof t2.dir), 0);
        snprintf(t2.log, sizeof t2.log, "%s/log", t2.dir);
        snprintf(t2.unix_path, sizeof t2.unix_path, "%s/s.sock", t2.dir);
        const char *argv[12];
        int a = 0;
        argv[a++] = t_bin();
        argv[a++] = "serve";
        argv[a++] = "--unix";
        argv[a++] = t2.unix_path;
        for (int k = 0; k < 2 && cases[i][k]; k++) {
            argv[a++] = "--strategy";
            argv[a++] = cases[i][k];
        }
        argv[a] = NULL;
        pid_t pid = t_spawn(argv, t2.log, NULL);
        CHECK(pid > 0);
        CHECK_EQ(t_wait_exit(pid, T_DEADLINE_MS), 2);
        char log[4096];
        t_read_file(t2.log, log, sizeof log);
        if (!strstr(log, cases[i][2]))
            fprintf(stderr, "log of a refused start: %s\n", log);
        CHECK(strstr(log, cases[i][2]) != NULL);
        CHECK(strstr(log, "--strategy") != NULL);
        CHECK(access(t2.unix_path, F_OK) != 0); /* never bound */
        t_cleanup(&t2);
    }
}

int main(void)
{
    g_close = t_default_close(&g_n);
    CHECK(g_close && g_n >= N_BARS);
    if (!g_close)
        return tf_test_report();
    plugin_paths();
    tf_strategy_lib *lib = NULL;
    char why[512];
    CHECK_RC(tf_strategy_load(g_plugin, &lib, why, sizeof why), 0);
    if (!lib) {
        fprintf(stderr, "%s: %s (build the tfplug_sma target)\n", g_plugin, why);
        return tf_test_report();
    }
    g_plugin_def = tf_strategy_lib_def(lib);
    check_decoder();
    check_refused_start();
    const char *extra[] = {"--strategy", "sma_cross",  "--strategy", "ema_cross",  "--strategy",
                           "donchian",   "--strategy", "rsi",        "--strategy", "bollinger",
                           "--strategy", g_plugin,     "--threads",  "2",          NULL};
    CHECK_EQ(t_start(&ts, extra), 0);
    check_transport("unix");
    check_transport("tcp");
    check_transport("shm");
    check_hostile(0);
    check_hostile(1);
    CHECK_EQ(t_stop(&ts), 0);
    t_cleanup(&ts);
    free(g_close);
    tf_strategy_unload(lib);
    return tf_test_report();
}
