/* Internal: the writing file I/O of the journal (src/orderflow/journal.c) and of the engine's
 * snapshots (src/engine/snapshot.c) goes through one table of operations, so that a test can
 * make the Nth write, fsync or fdatasync fail (ENOSPC, EIO, a short write) the way SQLite's test
 * VFS does (tests/unit/test_journal_fault.c). The table is the real system calls unless a test
 * installs another: a release build pays one indirect call per system call, nothing else. */
#ifndef TF_ORDERFLOW_FIO_H
#define TF_ORDERFLOW_FIO_H

#include <stddef.h>
#include <sys/types.h>

/* Each operation behaves like the system call of its name: -1 with errno set on failure. */
typedef struct tfo_fio_ops {
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
    ssize_t (*write)(int fd, const void *buf, size_t n);
    int (*fsync)(int fd);
    int (*fdatasync)(int fd);
    int (*ftruncate)(int fd, off_t len);
} tfo_fio_ops;

/* The table in use; never NULL. */
extern const tfo_fio_ops *tfo_fio;

/* Installs ops (NULL: the real system calls) and returns the table it replaces. For tests: set
 * it while no journal or snapshot I/O runs on another thread. */
const tfo_fio_ops *tfo_fio_set(const tfo_fio_ops *ops);

/* Writes p[0..n) at fd's offset through tfo_fio->write, on through short writes and EINTR. 0, or
 * -errno (-EIO for a write that returns 0). */
int tfo_write_all(int fd, const void *p, size_t n);

/* fsyncs the directory holding path, so that a file just created or renamed there is durable
 * too. 0 or -errno; a file system that refuses fsync on a directory (EINVAL) counts as done:
 * the file itself is synced by its writer. */
int tfo_sync_parent_dir(const char *path);

/* Replaces path with p[0..n) whole or not at all: written to PATH.tmp, fsynced, renamed over
 * path, the directory synced. 0 or -errno (-ENAMETOOLONG for a path of 4 KiB or more); on failure
 * the temporary is removed and path is as it was. */
int tfo_replace_file(const char *path, const void *p, size_t n);

/* A walk over records of a journal file read in pieces (SCAN_PIECE bytes at a time, into one
 * buffer), for a second pass over a prefix that tf_journal_open has checked: each record is
 * found by its length field alone. Why not a mapping: walking a mapping of a large file costs a
 * page fault and a TLB miss per page on first touch, the copy out of the page cache does not. */
typedef struct tfo_pieces {
    int fd;
    unsigned char *buf;
    size_t cap, have, pos; /* buf[pos..have) not yet walked */
    unsigned long long at; /* the file offset of buf[0] */
    unsigned long long end;
    int short_file; /* the file ended before `end` */
} tfo_pieces;

/* Opens the walk over path's records from byte `from` (a record's start) to byte `to`. 0 or
 * -errno / TF_E_NOMEM (nothing to close then). */
int tfo_pieces_open(tfo_pieces *w, const char *path, unsigned long long from,
                    unsigned long long to);
/* The next record: 1 (*frame views its frame, *len its size without the CRC, both valid until
 * the next call; *off is its file offset), 0 at `to`, TF_E_OFL_TORN_RECORD (a record runs past
 * `to` or the file: not a checked prefix), or -errno. */
int tfo_pieces_next(tfo_pieces *w, const unsigned char **frame, size_t *len,
                    unsigned long long *off);
void tfo_pieces_close(tfo_pieces *w);

#endif
