/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edit.h - Edit on filesystem.Filesystem: exact-text replacements in one
 * file, all or none, through the atomic write of uploads (docs/protocol.md,
 * "Edit").
 *
 * A call is one worker job, as the request's user (base/fsid.h), keyed by
 * the path's mount and bounded by the call's deadline. Under the path's
 * replacement lock (fs/fguard.h) it reads the file whole, applies the
 * edits in order to that snapshot (fs_edit_apply), and writes the result
 * with fs/fwrite.h: a temporary beside the file, with its mode, owner and
 * extended attributes (user.e2b.* among them), renamed over it after one
 * last look that the file is still the snapshot. A file that changed
 * meanwhile (a writer outside envd) is read again and the edits applied
 * anew, up to FS_EDIT_TRIES times; with ifVersion, any change is the
 * call's failure. Every failure leaves the file as it was.
 *
 * Bounds: files and results up to FS_EDIT_MAX_BYTES; all edits in flight
 * hold at most FS_EDIT_MEM_MAX bytes of buffers.
 *
 * Errors: the handler answers the call itself (rpc_fail): invalid_argument
 * (no edits, a malformed ifVersion, a path that is not a file),
 * not_found (no file and a non-empty oldText), failed_precondition
 * (oldText not found, found more than once without replaceAll, an empty
 * oldText on a file that is not empty, a file or result over the bound),
 * aborted (ifVersion is not the file's version, or the file kept changing),
 * permission_denied, resource_exhausted (the memory budget, no disk space),
 * deadline_exceeded, internal. fs_edit_apply returns negative errno values,
 * listed there.
 */
#ifndef FS_EDIT_H
#define FS_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/rpc.h"

#define FS_EDIT_MAX_BYTES (16u * 1024 * 1024)
#define FS_EDIT_MEM_MAX (64u * 1024 * 1024)
#define FS_EDIT_MAX_EDITS 1000
#define FS_EDIT_TRIES 3

/* One replacement: borrowed bytes, valid for the call. */
struct fs_edit_op {
	const char *old_text;
	size_t old_len;
	const char *new_text;
	size_t new_len;
	bool replace_all;
};

struct fs_edit_result {
	char *buf;             /* the new content, fs_edit_result_free() */
	size_t len;
	uint32_t replacements; /* occurrences replaced (creating or filling a file counts one) */
	bool changed;          /* the content differs from the source (or the file is new) */
};

/*
 * Apply ops[0..n) in order to src[0..len), the file's content (`present`
 * false: there is no file; len is then 0), each to the result of the ones
 * before. An empty old_text creates the file, or fills it when it is
 * empty, with new_text. `name` names the file in messages (NULL: "the
 * file"). Returns 0 with *out set, or, with the reason in msg (naming
 * the file and, of several, the edit):
 *   -ENOENT    there is no file and the edit's old_text is not empty;
 *   -ESRCH     old_text not found;
 *   -ENOTUNIQ  old_text found more than once without replace_all (msg:
 *              the count and the first lines where it is);
 *   -EEXIST    an empty old_text, and the file is not empty;
 *   -EFBIG     a result over `max` bytes;
 *   -EAGAIN    the edits in flight hold FS_EDIT_MEM_MAX already;
 *   -ENOMEM.
 * Any thread. Nothing is allocated on failure.
 */
int fs_edit_apply(const char *src, size_t len, bool present, const struct fs_edit_op *ops, size_t n, size_t max,
		  const char *name, struct fs_edit_result *out, char *msg, size_t msglen);
void fs_edit_result_free(struct fs_edit_result *r);

/*
 * Buffers of an edit, counted against FS_EDIT_MEM_MAX for all edits in
 * flight. NULL when the budget (errno EAGAIN) or memory (ENOMEM) is out.
 * fs_edit_buf_free takes the size given to fs_edit_buf_alloc. Buffers of
 * up to 32 KiB are kept for the next edits, four at most (128 KiB, outside
 * the budget). Any thread.
 */
char *fs_edit_buf_alloc(size_t n);
void fs_edit_buf_free(char *p, size_t n);
/* Bytes held now (for tests). */
size_t fs_edit_mem_held(void);

/* The Edit RPC (fs/fs_service.c registers it). */
void fs_edit(struct rpc_call *call, const ProtobufCMessage *req);

#endif
