/* SPDX-License-Identifier: Apache-2.0 */
/*
 * archive.h - whole directories as tar, tar.gz or zip, both ways (the
 * blocking half; transfer/files_archive.c is the HTTP edge).
 *
 * Formats are read and written by libarchive. Everything here blocks on
 * the filesystem and runs on the worker pool, never on the event loop.
 *
 * Creating: arch_writer walks a directory tree with one open directory
 * per level (memory O(depth)) and produces the archive a piece at a time:
 * bytes in its own buffer, or (identity tar only) a range of an open file
 * that the caller sends zero-copy.
 *
 * Extracting: arch_extract reads an archive from a file descriptor into an
 * empty temporary directory, validating every entry first (no absolute
 * names, no "..", never through a symlink, hard links only to earlier
 * entries, limits on entries, bytes and compression ratio);
 * arch_merge_check and arch_merge then move the result into place.
 */
#ifndef TRANSFER_ARCHIVE_H
#define TRANSFER_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum arch_format { ARCH_TAR = 0, ARCH_TGZ = 1, ARCH_ZIP = 2 };

/* "tar", "tgz" (also "tar.gz") or "zip". Returns the format or -EINVAL. */
int arch_format_parse(const char *s);
/* File name extension: "tar", "tar.gz", "zip". */
const char *arch_format_ext(enum arch_format f);
/* Response media type. */
const char *arch_format_mime(enum arch_format f);

/*
 * Normalise an entry name from an archive into a path relative to the
 * extraction root: "./" and empty components are dropped, a trailing "/"
 * is removed. Pure. Returns 0 with the result in out; -EINVAL for an
 * empty name (or only "." components), -EPERM for an absolute name,
 * -EXDEV for a ".." component, -ENAMETOOLONG.
 */
int arch_name_normalize(const char *name, char *out, size_t outlen);

/* The message for an arch_name_normalize error ("absolute path", ...). */
const char *arch_name_error(int rc);

/* ---- creating ---- */

/* One piece of archive output. */
struct arch_piece {
	const uint8_t *p;   /* bytes (in the writer's buffer), or NULL */
	size_t n;
	int fd;             /* file piece: borrowed until the next arch_writer_fill */
	off_t off;
	uint64_t len;
};

#define ARCH_MAX_PIECES 64

struct arch_writer;

/*
 * Start archiving the tree under `dir` (a symlink as `dir` itself is
 * followed; none below it is). `zero_copy` asks for file pieces
 * for large regular files on the same device as `dir` (identity tar
 * only; ignored otherwise): the caller passes it only for a mount that
 * cannot hang, since the pieces are sent from the event loop.
 * Returns the writer or NULL with a message in err.
 */
struct arch_writer *arch_writer_new(const char *dir, enum arch_format f, bool zero_copy, char *err,
				    size_t errlen);

/*
 * Produce the next pieces: at least `want` bytes worth, or the rest of the
 * archive. Pieces stay valid until the next call. Returns 1 with *n pieces
 * when more follows, 0 when this was the end, -errno on failure (message
 * in err; the archive cannot be completed).
 */
int arch_writer_fill(struct arch_writer *w, size_t want, struct arch_piece *pieces, size_t *n, char *err,
		     size_t errlen);

/* Entries archived and skipped so far. */
void arch_writer_counts(const struct arch_writer *w, uint64_t *entries, uint64_t *skipped);

void arch_writer_free(struct arch_writer *w);

/* ---- extracting ---- */

struct arch_limits {
	uint64_t max_entries;
	uint64_t max_bytes;   /* total size of the extracted entries */
	uint64_t max_ratio;   /* extracted bytes per archive byte (beyond ARCH_RATIO_FLOOR) */
};

/* Expansion always allowed whatever the ratio, so tiny archives work. */
#define ARCH_RATIO_FLOOR (16ull << 20)

extern struct arch_limits arch_limits;

struct arch_extract {
	/* in */
	int archive_fd;         /* positioned anywhere; read from 0 */
	uint64_t archive_size;
	enum arch_format format;
	int root_fd;            /* the empty temporary directory */
	const char *final_dir;  /* where entries end up: names in the list */
	uid_t uid;
	gid_t gid;
	bool keep_setid;        /* keep setuid/setgid bits (root only) */
	int list_fd;            /* JSON entry objects, comma-separated, go here */
	/* out */
	int status;             /* HTTP status on failure */
	char msg[8192];
	uint64_t entries, bytes, list_len;
};

/*
 * Extract the archive into root_fd. Returns 0, or -errno with status and
 * msg set: 400 for an invalid or unsafe archive (naming the entry), 413
 * over a limit, 507 out of space, 500 otherwise. On failure the caller
 * removes the temporary directory.
 */
int arch_extract_run(struct arch_extract *x);

/*
 * Can the extracted tree under src_fd be moved into dst_fd? Walks both
 * without following symlinks. Returns 0, or -errno with status/msg: 400
 * when an entry would pass through an existing symlink in the target, 409
 * when it would put a file where a directory is or the other way round,
 * or when a directory of the target is on another filesystem than
 * src_fd (rename cannot cross it).
 */
int arch_merge_check(int src_fd, int dst_fd, int *status, char *msg, size_t msglen);

/*
 * Move every entry of src_fd into dst_fd: a missing name is renamed in;
 * a directory present on both sides is merged recursively (the existing
 * one keeps its mode, owner and mtime); anything else replaces the target
 * name (rename(2), atomic per name). Returns 0 or -errno (message in msg).
 */
int arch_merge(int src_fd, int dst_fd, char *msg, size_t msglen);

/* Remove `name` under dirfd recursively, never following symlinks. */
int arch_remove_tree(int dirfd, const char *name);

#endif
