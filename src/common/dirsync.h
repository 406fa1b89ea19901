/* Making a rename or a new file durable: fsync of the directory that holds it. One helper for
 * every writer (the journal and snapshots in src/orderflow/, the CLI's output files). Not
 * installed. */
#ifndef TF_COMMON_DIRSYNC_H
#define TF_COMMON_DIRSYNC_H

/* fsyncs the directory holding path (".", for a path without a slash; "/" for "/name"), so that
 * a file just created or renamed there is durable too. fsync_fn is the fsync to call on the
 * directory's descriptor (NULL: fsync(2)); the journal passes its fault-injectable one.
 * Returns 0 or -errno: -ENAMETOOLONG when the directory part is 4 KiB or more, the error of
 * open(2) or of fsync_fn. A file system that refuses fsync on a directory (EINVAL: it cannot
 * sync one, as some FUSE and network file systems) counts as done, since the file itself was
 * synced by its writer; any other failure (EIO, ENOSPC) is returned. */
int tfu_sync_parent_dir(const char *path, int (*fsync_fn)(int fd));

#endif
