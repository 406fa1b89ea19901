/* tollfree journal: an append-only file of OFL1 records with CRC32C, durability policies, and a
 * zero-copy reader that finds where the valid prefix ends (docs/orderflow.md).
 *
 * File format:
 *     journal header (23 bytes: the 15-byte OFL1 header, tf_ofl_journal_header, then "TFH",
 *                    u8 1, u32 LE CRC32C of bytes 0..18; journals written before the header
 *                    was protected have the 15 bytes alone and are still read)
 *     record*        record = OFL1 stream frame (11 + payload bytes) + u32 LE CRC32C(frame)
 * journal_seq is contiguous from 0. A record is valid when its whole length is present, its CRC
 * matches, the frame decodes, and its journal_seq is the next one. The valid prefix ends at the
 * first record that is not valid; recovery truncates the file there.
 *
 * A tf_journal handle and a tf_journal_reader are used by one thread at a time; different
 * handles and readers are independent (readers of one image may run in parallel).
 */
#ifndef TOLLFREE_JOURNAL_H
#define TOLLFREE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

#define TF_JOURNAL_CRC_LEN 4
/* The header a new journal gets: the OFL1 header + its protection block (see above). A journal
 * with the 15-byte header alone (TF_OFL_JOURNAL_HEADER_LEN) is read and appended to as it is. */
#define TF_JOURNAL_HEADER_LEN 23
#define TF_JOURNAL_MAX_RECORD (TF_OFL_MAX_FRAME + TF_JOURNAL_CRC_LEN)
/* Extension records (docs/venue.md): kinds 0x10-0x1F and 0x90-0x9F are outside the closed OFL1
 * set, and the journal carries them whole. Appending one (tf_journal_append_frame) checks its
 * envelope only; the reader checks its length, CRC and journal_seq and returns it with msg->kind
 * and msg->journal_seq set and the payload left undecoded (the venue layer decodes r->frame). A
 * batch read ends after an extension record, so r->frame views it. Any other byte outside the
 * OFL1 set is still a record that does not decode. */
#define TF_JOURNAL_EXT_KIND(k) (((k) >= 0x10 && (k) <= 0x1F) || ((k) >= 0x90 && (k) <= 0x9F))

/* When appended records become durable (fdatasync'd). Nothing is reported durable before. */
typedef enum tf_journal_durability {
    /* Never synced by the journal: records reach the kernel when the staging buffer fills or on
     * tf_journal_flush(); durable only after an explicit tf_journal_sync() or tf_journal_close().
     */
    TF_JOURNAL_NONE = 0,
    /* Group commit: one write + fdatasync once group_max_frames records are pending, or at the
     * first append or tf_journal_poll() after the oldest pending record is group_max_us old.
     * The caller's loop must call tf_journal_poll() when idle for the time bound to hold. */
    TF_JOURNAL_GROUP = 1,
    /* Every append writes and fdatasyncs before it returns. */
    TF_JOURNAL_EVERY = 2,
} tf_journal_durability;

/* tf_journal_opts.flags */
#define TF_JOURNAL_NO_TRUNCATE 1u /* open fails with the reason instead of cutting a bad tail */

/* Options of tf_journal_open. `size` makes the struct extensible: 0 or sizeof(tf_journal_opts) =
 * this layout; a caller built against an older, shorter layout passes its own sizeof and the
 * fields it lacks take their defaults; a longer one is accepted only if the bytes this library
 * does not know are all zero. A size that does not reach the end of flags, or unknown non-zero
 * bytes, is TF_E_INVALID_ARG. */
typedef struct tf_journal_opts {
    size_t size; /* 0, or sizeof(tf_journal_opts) as the caller knows it */
    tf_journal_durability durability;
    uint32_t group_max_frames; /* GROUP: 0 = 4096 */
    uint32_t group_max_us;     /* GROUP: 0 = 1000 */
    uint64_t session_id;       /* new journal: its header's; existing: must match unless 0 */
    uint8_t clock_kind;        /* new journal: tf_ofl_clock_kind */
    uint32_t flags;            /* TF_JOURNAL_NO_TRUNCATE */
} tf_journal_opts;

/* What tf_journal_open found. */
typedef struct tf_journal_recovery {
    int created;          /* 1: the file was missing or empty and got a fresh header */
    int reason;           /* 0: the file was whole; else why its tail was cut (a tf_error) */
    uint64_t records;     /* valid records kept = the journal_seq the next append gets */
    uint64_t valid_bytes; /* where the valid prefix ends = the file's size after recovery */
    uint64_t file_bytes;  /* the file's size before recovery */
} tf_journal_recovery;

typedef struct tf_journal tf_journal;

/* Opens path for appending, creating it (mode 0644, header written and synced, directory synced)
 * when missing or empty; when that fails the file is cut back to empty. An existing journal is
 * checked (header errors are returned and the file is left alone), its valid prefix found, any tail
 * after it truncated (unless TF_JOURNAL_NO_TRUNCATE) and the kept records fdatasync'd: they are all
 * durable, and appends continue after the last valid record. Takes an exclusive flock: a second
 * appender gets -EWOULDBLOCK. opts may be NULL (GROUP defaults, session 0, logical clock). rec may
 * be NULL. Returns 0 or an error (-errno, TF_E_OFL_*, TF_E_OFL_SESSION_MISMATCH, TF_E_NOMEM;
 * TF_E_INVALID_ARG for bad opts: size, durability or clock_kind out of range). */
TF_API int tf_journal_open(const char *path, const tf_journal_opts *opts, tf_journal **out,
                           tf_journal_recovery *rec);

/* Flushes, fdatasyncs (every policy) and closes. Returns 0 or the first error; the handle is
 * freed either way. NULL is a no-op. */
TF_API int tf_journal_close(tf_journal *j);

/* Appends msg (kind and payload; msg->journal_seq is ignored) as the next record and stores its
 * journal_seq in *seq (may be NULL). It is durable once tf_journal_durable_end() > *seq; under
 * EVERY that is true when this returns 0. Codec errors leave the journal unchanged. After an I/O
 * error the journal is failed: every later call returns TF_E_OFL_JOURNAL_FAILED (a failed
 * fdatasync leaves the page cache in an unknown state; reopen to recover). No allocation. */
TF_API int tf_journal_append(tf_journal *j, const tf_ofl_msg *msg, uint64_t *seq);

/* Appends an already encoded stream frame: it must decode and carry journal_seq ==
 * tf_journal_next_seq() (else TF_E_OFL_SEQ_GAP). */
TF_API int tf_journal_append_frame(tf_journal *j, const void *frame, size_t len);

/* Hands staged records to the kernel (readers see them; they survive a process crash, not a
 * power loss). */
TF_API int tf_journal_flush(tf_journal *j);
/* Flush + fdatasync: every appended record is durable when this returns 0. */
TF_API int tf_journal_sync(tf_journal *j);
/* GROUP: syncs when the oldest pending record is group_max_us old. Returns the number of
 * records made durable (0 when nothing was due) or an error. Other policies: 0. */
TF_API int tf_journal_poll(tf_journal *j);

/* For a NULL j the int calls above return TF_E_NULL_ARG, and the getters below 0, NULL or zeroed
 * stats. */
/* The journal_seq the next append gets (= the number of records). */
TF_API uint64_t tf_journal_next_seq(const tf_journal *j);
/* Every record with journal_seq < this is durable (0: none yet). */
TF_API uint64_t tf_journal_durable_end(const tf_journal *j);
/* 1 when the record journal_seq is durable, else 0. */
TF_API int tf_journal_is_durable(const tf_journal *j, uint64_t journal_seq);
/* The first extension record (TF_JOURNAL_EXT_KIND) among the records the open kept: its byte
 * offset and journal_seq. Returns 1 (found), 0 (none: *offset = UINT64_MAX; a new journal has
 * none), TF_E_NULL_ARG. Records appended since the open are not looked at. A replay that starts
 * from a snapshot uses it to skip the covered prefix when no venue record is in it. */
TF_API int tf_journal_first_ext(const tf_journal *j, uint64_t *offset, uint64_t *journal_seq);
/* The journal's header (valid until close). */
TF_API const tf_ofl_journal_header *tf_journal_header(const tf_journal *j);

typedef struct tf_journal_stats {
    uint64_t appended; /* records appended through this handle */
    uint64_t bytes;    /* file size including staged bytes */
    uint64_t writes;   /* write system calls */
    uint64_t syncs;    /* fdatasync calls */
} tf_journal_stats;
TF_API void tf_journal_get_stats(const tf_journal *j, tf_journal_stats *out);

/* ---- reading -------------------------------------------------------------------------------- */

/* A zero-copy walk over a journal image in memory (a mapped file, a buffer). The reader keeps
 * pointers into buf: buf must stay valid and unchanged while the reader is used. */
typedef struct tf_journal_reader {
    const uint8_t *base;
    size_t len;
    size_t pos;        /* offset of the next record = end of the valid prefix so far */
    uint64_t next_seq; /* journal_seq the next record must carry = valid records so far */
    tf_ofl_journal_header header;
    const uint8_t *frame; /* view of the last record's stream frame, into buf */
    size_t frame_len;     /* its length (without the CRC) */
    int error;            /* 0, or why the walk stopped */
} tf_journal_reader;

/* Checks the header. Returns 0 or its error (TF_E_OFL_BUFFER_TOO_SHORT, WRONG_MAGIC,
 * TF_E_OFL_HEADER_DAMAGED, ...), which is also kept in r->error; then r->pos is 0. On success
 * r->pos is the header's length, where the first record starts: TF_JOURNAL_HEADER_LEN, or
 * TF_OFL_JOURNAL_HEADER_LEN for a journal written before the header was protected. */
TF_API int tf_journal_reader_init(tf_journal_reader *r, const void *buf, size_t len);

/* Decodes the next record into *msg. Returns 1 (a record; r->frame views it), 0 (the end: the
 * image is whole up to here), or a negative reason the record at r->pos is not valid:
 * TF_E_OFL_TORN_RECORD (the image ends inside it), TF_E_OFL_FRAME_LENGTH_TOO_SMALL /
 * FRAME_TOO_LARGE (its length field is impossible), TF_E_OFL_CRC_MISMATCH, a decode error
 * (UNKNOWN_KIND, PAYLOAD_LENGTH, INVALID_SIDE, ...), TF_E_OFL_SEQ_GAP. On a negative return the
 * valid prefix ends at byte r->pos with journal_seq r->next_seq; calling again returns the same.
 * Never allocates; never reads outside buf. TF_E_NULL_ARG for a NULL r or msg (and from every
 * reader call for a NULL r). */
TF_API int tf_journal_reader_next(tf_journal_reader *r, tf_ofl_msg *msg);

/* The same for up to max records at once into msgs[0..max): the walk's fast path (the position
 * stays in registers across records, and one record's CRC overlaps the next one's). Returns how
 * many were decoded (> 0), else 0 at the end or the reason the next record is not valid. A batch
 * that meets an invalid record returns the records before it; the next call returns the reason.
 * r->frame views the last record decoded. */
TF_API int tf_journal_reader_next_batch(tf_journal_reader *r, tf_ofl_msg *msgs, int max);

/* Steps over the record at r->pos when the walk stopped there only because its payload does not
 * decode (UNKNOWN_KIND, RESERVED_KIND, PAYLOAD_LENGTH, INVALID_SIDE, INVALID_REASON) while its
 * length, CRC and journal_seq are good: a whole record that an engine counts as malformed and
 * goes past. Returns 1 (r->frame views the skipped record; the walk may go on), or the reason
 * the record cannot be skipped (it is not a whole record: the valid prefix ends there). */
TF_API int tf_journal_reader_skip(tf_journal_reader *r);

/* Moves the walk to byte `offset`, where a record with journal_seq `journal_seq` starts (a
 * position an earlier walk found, e.g. just after the last record a snapshot covers): the walk
 * goes on from there as if it had read every record before it. The caller vouches that a record
 * starts there; if none does, the next call reports it as damage (CRC, length or SEQ_GAP).
 * Returns 0, or TF_E_INVALID_ARG (offset before the first record or past the end), or the
 * reader's error when its header was bad. Clears a stop: r->error is 0 after it. */
TF_API int tf_journal_reader_seek(tf_journal_reader *r, uint64_t offset, uint64_t journal_seq);

/* ---- the walk a batch ahead, on a second thread --------------------------------------------- */

/* A pump splits the walk across two threads: a thread of its own checks each record's length
 * and CRC32C (the costly part, and the first touch of every mapped page) and runs ahead over the
 * image; tf_journal_pump_next, on the caller's thread, decodes the checked records (journal_seq,
 * payload, extension records: tf_journal_reader_next_batch's code, the CRC comparison left to
 * the other thread) and, with TF_JOURNAL_PUMP_SKIP, steps over a whole record that does not
 * decode as tf_journal_reader_skip does. The records come in the order and with the contents a
 * single-threaded walk from the same reader gives, with the same stop at the same record for the
 * same reason and the same reader state there; only the batch boundaries may differ (a batch
 * may end early where the checked prefix ends; an extension record still ends its batch, so
 * r.frame views it). The image must stay mapped and unchanged until tf_journal_pump_close. */
#define TF_JOURNAL_PUMP_SKIP 1u /* step over whole records that do not decode (see _skip) */

typedef struct tf_journal_batch {
    const tf_ofl_msg *msgs; /* msgs[0..n): the records (valid until the next pump call) */
    int n;                  /* > 0 records; else 0 (the end) or the reason the walk stopped */
    int skipped;            /* 1: no records: one whole record that does not decode was stepped
                               over (r.frame views it; TF_JOURNAL_PUMP_SKIP only) */
    tf_journal_reader r;    /* the reader after this batch (r.frame views its last record; at a
                               stop r.pos/r.next_seq say where the valid prefix ends) */
} tf_journal_batch;

typedef struct tf_journal_pump tf_journal_pump;

/* Starts a pump that walks on from `from` (a reader after tf_journal_reader_init, perhaps
 * moved by _seek; copied: the caller's reader is not used again by the pump) in batches of up
 * to `batch` records (1..65536). Allocates its batch and starts its thread here (never later;
 * none for a reader that has already stopped).
 * Returns 0, TF_E_NULL_ARG, TF_E_INVALID_ARG (batch or flags), TF_E_NOMEM, or -errno from
 * pthread_create. */
TF_API int tf_journal_pump_open(const tf_journal_reader *from, int batch, unsigned flags,
                                tf_journal_pump **out);
/* The next batch into *out (valid until the next call or close); waits for the checking thread
 * when the caller has caught up with it. Returns 1 (a batch: out->n records, or out->skipped), else
 * what the walk ended with: 0 (the image is whole up to its end) or the negative reason, with *out
 * describing the stop (out->n the same code, out->r where it is); later calls return the same. No
 * allocation. */
TF_API int tf_journal_pump_next(tf_journal_pump *p, const tf_journal_batch **out);
/* Stops the checking thread (it may be far ahead) and frees. Accepts NULL. */
TF_API void tf_journal_pump_close(tf_journal_pump *p);

/* Walks a whole image. */
typedef struct tf_journal_scan_result {
    int error;            /* 0: whole; else the reason the valid prefix ends */
    uint64_t records;     /* valid records = journal_seq where the prefix ends */
    uint64_t valid_bytes; /* byte offset where the valid prefix ends (0 for a bad header) */
    uint64_t total_bytes;
    tf_ofl_journal_header header;
} tf_journal_scan_result;
/* Returns res->error. */
TF_API int tf_journal_scan(const void *buf, size_t len, tf_journal_scan_result *res);

/* ---- the instruments of a command journal -------------------------------------------------- */

/* A command journal does not name the instruments of the engine that applied it, and the state
 * hash depends on them (an engine holds a book per listed instrument; a command for another one
 * is Rejected). Whoever writes a command journal for an engine stores its list beside it, in
 * JOURNAL_PATH + TF_JOURNAL_INSTRUMENTS_SUFFIX, a small text file:
 *     tollfree-instruments 1
 *     session_id <the journal header's session_id, decimal>
 *     instruments <ascending ids and ranges, e.g. 1-16,42>
 *     crc32c <8 hex digits: CRC32C of the lines above, newlines included>
 * Journals written before it have none; a reader then uses its own default. */
#define TF_JOURNAL_INSTRUMENTS_SUFFIX ".instruments"
#define TF_JOURNAL_INSTRUMENTS_MAX 65536 /* TF_ENGINE_MAX_INSTRUMENTS */

/* Writes the list of the journal at journal_path: session_id (its header's) and ids[0..n) (any
 * order, stored ascending). Written to the file's name + ".tmp", fsync'd, renamed over it, the
 * directory synced: a crash leaves the old file or the new one, whole. Returns 0, or -errno,
 * TF_E_NULL_ARG, TF_E_INVALID_ARG (n 0 or above TF_JOURNAL_INSTRUMENTS_MAX, an id 0, an id
 * twice), TF_E_NOMEM. */
TF_API int tf_journal_instruments_save(const char *journal_path, uint64_t session_id,
                                       const uint64_t *ids, uint32_t n);

/* Reads the list of the journal at journal_path: the ids ascending into ids[0..cap), their
 * number in *n, the session_id it was written for in *session_id (compare it with the
 * journal's header: another session's list is not this journal's). Returns 0, -ENOENT when
 * there is none (a journal from before, or one no engine wrote), another -errno, TF_E_NULL_ARG,
 * TF_E_LIMIT (more ids than cap), TF_E_BAD_INPUT (not this format, or damaged: its CRC does
 * not match). session_id and n may be NULL. */
TF_API int tf_journal_instruments_load(const char *journal_path, uint64_t *session_id,
                                       uint64_t *ids, uint32_t cap, uint32_t *n);

/* The ids of ids[0..n) (ascending) as "1-16,42" into buf[0..cap): the text the file stores and
 * `tollfree engine run` prints. Returns the length (without the NUL), or TF_E_LIMIT when it
 * does not fit (buf then holds a NUL-terminated prefix when cap > 0), TF_E_NULL_ARG. */
TF_API int tf_journal_instruments_format(const uint64_t *ids, uint32_t n, char *buf, size_t cap);

/* A read-only mapping of a journal file for the reader. An empty file maps to data NULL, len 0. */
typedef struct tf_journal_map {
    const uint8_t *data;
    size_t len;
} tf_journal_map;
TF_API int tf_journal_map_open(const char *path, tf_journal_map *m);
/* Accepts a zeroed or NULL map. */
TF_API void tf_journal_map_close(tf_journal_map *m);

#endif
