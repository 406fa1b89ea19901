/* Internal to the sweep service (`tollfree serve`): configuration, shared state, the
 * transport-independent request executor, datasets, sessions, and the transports.
 *
 * Threads: one event-loop thread owns every socket connection; a worker pool runs heavy requests
 * of parked connections; the connection layer runs a thread per shared-memory ring; one stdio
 * thread. Shared state (datasets, memory budget, stats) is locked or atomic; sessions belong to
 * one connection and are only touched by the thread that serves it.
 */
#ifndef TF_SERVER_H
#define TF_SERVER_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "net/net.h"
#include "tollfree/kernel.h"
#include "tollfree/strategy.h"
#include "tollfree/wire.h"
#include "wire/wire_internal.h"

#define TF_SERVER_MAX_SESSIONS 1024     /* per connection */
#define TF_SERVER_MAX_SHM TFN_MAX_RINGS /* shared-memory rings (src/net/ring.c) */
#define TF_SERVER_MAX_FDS 4             /* received fds kept per connection */
#define TF_SERVER_MAX_DATASETS_LIMIT 65536
/* Work (n_bars x n_combos) above which a sweep goes to the worker pool; LOAD bytes likewise. */
#define TF_SERVER_INLINE_WORK 65536
#define TF_SERVER_INLINE_LOAD (64 << 10)
/* Strategies a server offers: "hma" and up to this many given with --strategy. */
#define TF_SERVER_MAX_STRATEGIES 32

typedef struct srv_config {
    tfn_listeners listen; /* --unix, --tcp (src/net/: the engine service's too) */
    const char *shm_paths[TFN_MAX_LISTENERS];
    int n_shm;
    int stdio;
    int threads; /* kernel threads per worker sweep; 0 = all cores */
    uint64_t max_frame;
    uint64_t
        dataset_cache; /* per-dataset first-stage cache (tf_series), reserved from max_memory */
    uint32_t max_datasets;
    int spin;
    /* The connection limits, --max-memory and --quiet: the options and meanings the engine
     * service has too (src/net/net.h, tfn_limits). net.max_memory bounds datasets, sessions,
     * caches and request/reply buffers here. */
    tfn_limits net;
    const char *strategies[TF_SERVER_MAX_STRATEGIES]; /* --strategy NAME|PATH.so */
    int n_strategies;
} srv_config;

/* Fills the defaults of docs/protocol.md. */
void srv_config_init(srv_config *cfg);
/* Runs the server until SIGINT/SIGTERM (or EOF on stdio when it is the only transport).
 * Returns 0 after a clean shutdown, or a negative code if it could not start (printed). */
int srv_run(const srv_config *cfg);

/* ---- shared server state ---- */

typedef struct srv_dataset {
    uint64_t handle;
    uint64_t n_bars;
    const double *close;
    size_t bytes;      /* 8 x n_bars: what counts against --max-memory */
    size_t map_len;    /* mmap'ed (LOAD_FD) when > 0, else heap */
    tf_series *series; /* the kernel's prepared series: caches first-stage WMAs across calls */
    uint64_t cache_reserved; /* bytes of --max-memory reserved for that cache */
    int refs;                /* the table's reference + users; guarded by the store's lock */
} srv_dataset;

typedef struct srv_datasets {
    pthread_mutex_t lock;
    srv_dataset **slots; /* open addressing by handle, linear probing, cap a power of two */
    uint32_t cap;
    uint32_t count;
    uint64_t bytes;
} srv_datasets;

typedef struct srv {
    srv_config cfg;
    int kernel_threads; /* resolved --threads */
    int64_t start_ns;
    srv_datasets ds;
    uint64_t mem_used;       /* datasets + sessions + dataset caches (atomic) */
    uint64_t cache_reserved; /* dataset caches' share of mem_used (atomic) */
    /* stats (atomic) */
    uint64_t st[TF_STAT_COUNT];
    uint64_t next_conn_id; /* atomic */
    /* The strategies offered (strategies.c): "hma" first, then --strategy's in their order.
     * Fixed at start, read by every thread without a lock. */
    const tf_strategy_def *strat[1 + TF_SERVER_MAX_STRATEGIES];
    tf_strategy_lib *strat_lib[1 + TF_SERVER_MAX_STRATEGIES];
    int n_strat;
    char *strat_text; /* the STRATEGIES reply text: "name param ...\n" per strategy */
    uint32_t strat_text_len;
} srv;

void srv_stat_add(srv *s, int which, uint64_t n);
/* One line on stderr ("tollfree serve: ...") through the connection layer's logger (tfn_logv):
 * one write(2); `always` lines are printed even with --quiet, the others pass the process-wide
 * gate and the throttle of the connection bound to the thread (srv_log_bind). */
void srv_log(srv *s, int always, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The shared memory budget (--max-memory) for datasets and sessions. 0 or TF_E_LIMIT. */
int srv_mem_reserve(srv *s, uint64_t bytes);
void srv_mem_release(srv *s, uint64_t bytes);
/* Binds the calling thread's srv_log lines to a connection (NULL: none): its lines that are not
 * `always` are rate-limited per connection (TFN_CONN_LOG_BURST, then one a second), the rest
 * counted and said in its close line. */
struct srv_ctx;
void srv_log_bind(struct srv_ctx *c);

/* ---- strategies (strategies.c) ---- */
/* Resolves "hma" and cfg.strategies (built-in names or plugin paths, tf_strategy_resolve) and
 * builds the STRATEGIES text. 0, or TF_E_STRATEGY / TF_E_NOMEM with msg naming the --strategy
 * value and the reason (a plugin that cannot be loaded, a name offered twice). */
int srv_strategies_init(srv *s, char *msg, size_t cap);
void srv_strategies_fini(srv *s);
/* The strategy offered under that name (name_len bytes, no NUL), or NULL. */
const tf_strategy_def *srv_strategy_find(const srv *s, const char *name, size_t name_len);
/* "a, b, c": the names offered, for error messages. */
void srv_strategy_names(const srv *s, char *out, size_t cap);

/* ---- datasets (datasets.c) ---- */
int srv_ds_init(srv *s);
void srv_ds_fini(srv *s);
/* Registers a dataset of n_bars closes. `close` is either a heap block the store may adopt
 * (*adopted set to 1 when it did: the caller must forget it), or, with map_len > 0, a read-only
 * mapping of map_len bytes (adopted likewise; else the caller unmaps it). Returns 0 with *handle
 * and *created, TF_E_DATASET_LIMIT, or TF_E_NOMEM. heap_copy: the store must copy the bytes
 * (they live in a shared ring). */
int srv_ds_add(srv *s, const double *close, uint64_t n_bars, size_t map_len, int heap_copy,
               uint64_t *handle, int *created, int *adopted);
/* A reference to a dataset (NULL if unknown); release it with srv_ds_put. */
srv_dataset *srv_ds_get(srv *s, uint64_t handle);
void srv_ds_put(srv *s, srv_dataset *d);
/* 0 or TF_E_UNKNOWN_DATASET. */
int srv_ds_drop(srv *s, uint64_t handle);

/* ---- per-connection execution context ---- */

typedef struct srv_session {
    uint64_t id;
    tf_strategy *st;
    size_t bytes;
    int pos; /* position after the last bar (the strategy API returns it only from step) */
} srv_session;

/* A reusable, 64-byte-aligned buffer. It counts against --max-memory while it is held (s set
 * by srv_ctx_init): request and reply buffers are bounded for the whole server, not per
 * connection, and a connection at rest gives them back (conn.c, on_idle). */
typedef struct srv_buf {
    uint8_t *p;
    size_t cap;
    srv *s;           /* whose --max-memory it counts against (NULL: not counted) */
    uint64_t charged; /* bytes it counts now */
} srv_buf;

/* Buffers above this are freed after their request instead of being kept for the next one
 * (and above half of --max-memory in use, every counted buffer is). */
#define TF_SERVER_KEEP_BYTES ((size_t)16 << 20)
/* Grows b to n bytes; counts it against --max-memory even past the limit (the request was
 * admitted already). 0 or TF_E_NOMEM. */
int srv_buf_reserve(srv_buf *b, size_t n);
/* The same, but TF_E_LIMIT (nothing allocated) when --max-memory would be passed. */
int srv_buf_reserve_limited(srv_buf *b, size_t n);
/* After a request: returns the count of a buffer that was handed over (p set to NULL). */
void srv_buf_settle(srv_buf *b);
void srv_buf_trim(srv_buf *b);
void srv_buf_free(srv_buf *b);

/* A reply: a small header block (prefix, v2 header, fixed payload or an error frame) and up to
 * two arrays sent after it without copying. */
#define TF_SERVER_REPLY_HEAD 512
typedef struct srv_reply {
    uint8_t head[TF_SERVER_REPLY_HEAD];
    uint32_t head_len;
    struct iovec seg[2];
    int nseg;
    int error;       /* the code of an error frame, 0 for a success */
    int close_after; /* the connection closes once this reply is out */
} srv_reply;

static inline uint64_t srv_reply_len(const srv_reply *r)
{
    uint64_t n = r->head_len;
    for (int i = 0; i < r->nseg; i++)
        n += r->seg[i].iov_len;
    return n;
}

typedef struct srv_ctx {
    srv *s;
    const char *transport; /* "unix", "tcp", "stdio", "shm" */
    uint64_t conn_id;
    uint32_t caps;
    int sweep_threads;     /* kernel threads for a sweep run by this context right now */
    srv_session *sessions; /* TF_SERVER_MAX_SESSIONS slots, allocated on first use */
    uint32_t n_sessions;
    uint64_t session_gen;
    int fds[TF_SERVER_MAX_FDS]; /* received fds, oldest first */
    int n_fds;
    srv_buf payload; /* the variable part of the current request */
    srv_buf result;  /* sweep results */
    srv_buf scratch; /* shm: private copies of params / misaligned arrays */
    int64_t opened_ns;
    uint64_t requests, errors;
    tfn_log_throttle log; /* srv_log_bind */
} srv_ctx;

void srv_ctx_init(srv_ctx *c, srv *s, const char *transport, uint32_t caps);
/* Closes sessions (returning their memory) and fds, frees buffers. */
void srv_ctx_fini(srv_ctx *c);
/* Keeps a received fd (closes it when TF_SERVER_MAX_FDS are already held). */
void srv_ctx_push_fd(srv_ctx *c, int fd);

/* The variable part of a request as the executor sees it. Arrays are 8-byte aligned and private
 * to the server (params are never read from memory the peer can still write). */
typedef struct srv_req_data {
    const double *close;   /* n_bars (v1, SWEEP, LOAD) */
    const int64_t *params; /* n_combos x 6 */
    const double *fparams; /* SWEEP_WITH, SESSION_OPEN_WITH: n_combos x n_params (same bytes) */
    const uint8_t *bytes;  /* ECHO payload (v2) */
    srv_buf *owner;        /* the buffer holding `close` when the store may adopt it (LOAD) */
    int in_ring;           /* close lives in a shared ring: LOAD must copy */
} srv_req_data;

/* 1 if this request should run on a worker (long sweep, big LOAD, LOAD_FD). */
int srv_is_heavy(const tf_wire_request *rq);
/* Executes one decoded request and fills the reply. Never fails: errors become error frames. */
void srv_exec(srv_ctx *c, const tf_wire_request *rq, const srv_req_data *d, srv_reply *rep);
/* An error frame (request_id from rq, 0 for v1), logged. */
void srv_reply_error(srv_ctx *c, srv_reply *rep, const tf_wire_request *rq, int code,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Counts a finished request in the stats. */
void srv_count_reply(srv_ctx *c, const srv_reply *rep);
/* The one log line of a connection, at its end. */
void srv_log_close(srv_ctx *c, const char *why);

/* ---- the request pipeline (pipeline.c): one for every transport ---- */

/* How a transport sends a reply. */
typedef struct srv_sink {
    uint64_t max_reply; /* the longest reply (u32 prefix included) it can carry; 0: any */
    int too_big;        /* the error code that replaces a longer reply */
    const char *what;   /* what bounds it, for that error's message ("65536-byte ring") */
    /* Sends or queues the reply: 0, or a negative code that ends the connection. */
    int (*emit)(void *ud, srv_reply *rep);
    void *ud;
} srv_sink;

/* Step 1: decodes a request's fixed part from the first `avail` bytes of its body. >0: that many
 * body bytes are needed first; 0: decoded (*err = 0), or malformed (*err = the code: srv_serve
 * answers it with an error frame; rq holds what could be read, for the request_id). */
int srv_decode(const uint8_t *body, size_t avail, uint32_t body_len, tf_wire_request *rq, int *err);
/* Step 2: answers one request: an error frame for err (a malformed request, or TF_E_LIMIT /
 * TF_E_NOMEM when its buffers were refused), else srv_exec with the variable part in d; a reply
 * the sink cannot carry becomes its too_big error; then it is counted and emitted. Returns what
 * emit returns. */
int srv_serve(srv_ctx *c, const tf_wire_request *rq, int err, const srv_req_data *d, srv_reply *rep,
              const srv_sink *out);

/* ---- shared memory (shm_server.c) ---- */
/* A handshake on ctl, a shm control socket (its loop thread): the ring is opened by the
 * connection layer (tfn_ring_open: checks, limits, its thread) and each of its requests answered
 * through the request pipeline; the ring's close line names conn_id. 0, or the status for the
 * client. */
int srv_shm_start(srv *s, tfn_conn *ctl, int memfd, const uint8_t hello[TF_SHM_HELLO_BYTES],
                  uint64_t conn_id);

#endif
