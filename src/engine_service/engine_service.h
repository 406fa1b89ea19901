/* The order engine as a durable service (internal): `tollfree engine serve`
 * (docs/engine-service.md).
 *
 * One thread, the connection layer's loop (src/net/), runs the sequencer: it takes OFL1 command
 * frames from every connection, assigns command_seq, appends each command to DIR/commands.ofl,
 * applies it to the engine, appends its events to DIR/events.ofl and holds the replies; once per
 * loop turn (when no connection has more input, or a batch is full; with --durability every,
 * after each command's own fdatasync) it makes the commands durable at the configured level and
 * only then releases the held replies, the unsolicited Trades and the feed datagrams. On start it
 * rebuilds the engine from the journal (from the newest snapshot when there is one) and brings
 * events.ofl in line with it.
 */
#ifndef TF_ENGINE_SERVICE_H
#define TF_ENGINE_SERVICE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"

/* The default --snapshot-every: a start replays at most about this many commands (a tenth of a
 * second or so), and a clean stop writes one, so a clean restart replays none. */
#define TFES_SNAPSHOT_EVERY 1000000

typedef struct tfes_config {
    const char *dir;         /* --journal DIR (created when missing) */
    const char *instruments; /* --instruments LIST (NULL: "1-16") */
    tfn_listeners listen;    /* --unix, --tcp (src/net/net.h: the sweep service's too) */
    int durability;          /* tf_journal_durability: NONE, GROUP (default), EVERY */
    const char *feed;        /* "udp:HOST:PORT" or NULL */
    uint32_t max_orders;     /* 0: TF_ENGINE_DEFAULT_MAX_ORDERS */
    uint64_t snapshot_every; /* commands between snapshots, and one at a clean stop (0: never) */
    /* The connection limits, --max-memory (replies held and queued for all connections; 0:
     * 1 GiB), --max-output (one connection's replies held; 0: 4 MiB) and --quiet: the options
     * and meanings the sweep service has too (src/net/net.h, tfn_limits). */
    tfn_limits net;
    const char *sessions; /* --sessions FILE (NULL: no logon, plain commands) */
    const char *risk;     /* --risk FILE (docs/venue.md "Risk"; NULL: no limits) */
    int repair_journal;   /* --repair-journal: cut commands.ofl at damage that is not a torn tail */
    /* --tls-cert / --tls-key (PEM): TLS on every TCP listener (docs/venue.md "TLS"). The CLI
     * loads them (src/net/tls.h: tfn_tls_open) into `tls` before tfes_run, which hands `tls` to
     * the connection layer; NULL: plain TCP. The context must outlive tfes_run. */
    const char *tls_cert;
    const char *tls_key;
    struct tfn_tls *tls;
} tfes_config;

/* What a run ends with (the JSON line of the CLI). */
typedef struct tfes_summary {
    uint64_t commands;         /* records in commands.ofl */
    uint64_t events;           /* records in events.ofl */
    uint64_t last_command_seq; /* the engine's */
    uint64_t state_hash;
} tfes_summary;

void tfes_config_init(tfes_config *cfg);
/* Recovers, serves until SIGINT/SIGTERM, makes everything durable. Returns 0 (and *out) after a
 * clean shutdown, or a negative code (already printed) when it could not start or a journal
 * write failed. */
int tfes_run(const tfes_config *cfg, tfes_summary *out);

/* ---- recovery (recover.c) ---- */

typedef struct tfes_recovered {
    tf_engine *engine;
    struct tfv_venue *venue; /* the venue layer over the engine (src/venue/) */
    tf_journal *commands;    /* open for appending, valid prefix kept */
    tf_journal *events;      /* the same, in line with the commands */
    uint64_t session_id;
    uint64_t replayed; /* commands applied on start (after the snapshot, if one was used) */
    int from_snapshot;
    uint64_t snapshot_records; /* records of commands.ofl the snapshot used covers (0: none) */
    /* Keyed records (sessions' commands) among the records the snapshot covers. Only they can
     * name the owner of an order live at the snapshot (from snapshot.tfs.owners, else
     * tfv_rebuild_owners); with none, no such order has an owner to find. */
    uint64_t keyed_covered;
} tfes_recovered;

/* Where recovery's lines go: the caller's logger (the service's, which prefixes its name), one
 * line per call without the newline. The library never prints. */
enum {
    TFES_LOG_ERROR = 0, /* why the start stops */
    TFES_LOG_WARN = 1,  /* something was cut, rebuilt, regenerated or not used */
    TFES_LOG_INFO = 2
};
typedef struct tfes_log {
    void (*logv)(void *ctx, int level, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
    void *ctx;
} tfes_log;

/* Opens DIR's journals (creating them), loads the snapshot when it is usable, replays the
 * commands after it, cuts or completes events.ofl, and says what it did through log (NULL: says
 * nothing). Returns 0 or a negative code (said). */
int tfes_recover(const tfes_config *cfg, const tfes_log *log, tfes_recovered *out);
void tfes_recovered_fini(tfes_recovered *r);

/* DIR/NAME into buf (4096 bytes). */
void tfes_path(char *buf, size_t cap, const char *dir, const char *name);

/* ---- damage in commands.ofl (recover.c) ---- */

/* Where a journal's valid prefix ends and what kind of damage ends it. A torn tail is what a
 * crash during an append leaves: after the first invalid record comes nothing, or nothing but
 * zero bytes, and no record with a good CRC; the invalid record ends where its length field
 * says, or, when that field is impossible, TF_JOURNAL_MAX_RECORD bytes on (at the latest). So
 * the file ends inside that record or right after it. Anything else (a bad record with more data
 * after it) is damage a restart must not repair by itself. */
typedef struct tfes_damage {
    int reason;         /* 0: whole; else why the record at `offset` is not valid (a tf_error) */
    int torn;           /* 1: a torn tail (reason != 0) */
    uint64_t record;    /* journal_seq of the first invalid record = valid records before it */
    uint64_t offset;    /* its byte offset = where the valid prefix ends */
    uint64_t following; /* records with a good CRC after it (found by their length fields) */
    uint64_t file_bytes;
} tfes_damage;

/* Examines the journal at path (read only; a missing or empty file is whole). 0 or -errno or a
 * header error (the file cannot be read as a journal at all). */
int tfes_journal_check(const char *path, tfes_damage *d);
/* The same for a journal image d[0..len) whose walk stopped at `offset` (record `record`) for
 * `reason` (0: whole). */
void tfes_damage_at(const uint8_t *d, size_t len, uint64_t offset, uint64_t record, int reason,
                    tfes_damage *dmg);

/* ---- snapshots bound to the journal (recover.c) ---- */

/* The last command record a snapshot covers: its journal_seq, byte offset and CRC32C in
 * commands.ofl, and the journal's session_id. */
typedef struct tfes_snap_bind {
    uint64_t session_id;
    uint64_t journal_seq;
    uint64_t offset;
    uint32_t crc;
} tfes_snap_bind;

/* The binding of the last record of `commands` (flushed: the file at `path` ends with it). 0,
 * -errno, or TF_E_OFL_SEQ_GAP when the file does not end with that record. */
int tfes_snap_bind_last(tf_journal *commands, const char *path, tfes_snap_bind *b);
/* Writes PATH.owners (the venue's owners of the engine's live orders, bound like the snapshot;
 * v NULL: none written), then the engine's snapshot followed by the binding block to path; each
 * an atomic replace (recover.c has the layouts). */
int tfes_snapshot_save(const tf_engine *e, const struct tfv_venue *v, const char *path,
                       const tfes_snap_bind *b);

#endif
