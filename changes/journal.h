/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.h - the change journal's core (docs/protocol.md, "Changes"): a
 * bounded record of which paths changed, coalesced per path, with
 * sequence-number checkpoints. Pure: no I/O, no clock, no loop; the feeder
 * (changes/changes.c) hands it resolved events and asks it questions.
 *
 * Every recorded change takes the next sequence number. A checkpoint
 * (token) is a sequence number: "since T" lists every path whose last
 * change is after T, once, with its state now and what happened to it
 * after T (created / modified / deleted relative to T, and the kinds of
 * event seen). The journal keeps at most `max_paths` paths; when it must
 * forget one (the least recently changed), or when the feeder reports
 * lost events (journal_gap), every checkpoint before that point answers
 * "resync" instead of an incomplete list.
 *
 * Tokens are opaque strings "c1-<epoch>-<base>-<cursor>" (hex): epoch
 * names one journal (a token of another answers resync), base is the
 * checkpoint the types are relative to, cursor where the listing resumes
 * (equal to base except when a reply was cut by its limit).
 *
 * Ownership: the journal owns its entries; pointers returned in a
 * journal_result stay valid until the next journal_record / journal_gap /
 * journal_free (the caller copies what it keeps). Errors are negative
 * errno values.
 */
#ifndef CHANGES_JOURNAL_H
#define CHANGES_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kinds of event, as bits. */
enum {
	JK_CREATE = 1u << 0,
	JK_WRITE = 1u << 1,
	JK_REMOVE = 1u << 2,
	JK_RENAME = 1u << 3,
	JK_ATTRIB = 1u << 4,
};
#define JK_N 5

/* What a path's change is relative to a checkpoint. */
enum journal_type {
	JT_CREATED = 1,  /* absent at the checkpoint, present now */
	JT_MODIFIED = 2, /* present at the checkpoint and now */
	JT_DELETED = 3,  /* present at the checkpoint, absent now */
};

/* Who made the change (attribution). */
enum journal_attr {
	JA_UNKNOWN = 0, /* no process information (inotify, or not looked up) */
	JA_BY = 1,      /* by command `cmd`'s process tree */
	JA_GONE = 2,    /* the process was gone before it could be looked up */
	JA_OTHER = 3,   /* a live process outside every command */
	JA_ENVD = 4,    /* envd itself (uploads, MakeDir, ...) */
};

enum journal_ftype { JF_UNKNOWN = 0, JF_FILE = 1, JF_DIR = 2, JF_SYMLINK = 3, JF_OTHER = 4 };

/* One resolved event, as the feeder hands it over. */
struct journal_event {
	const char *path;  /* absolute, clean */
	unsigned kinds;    /* JK_* seen for this path */
	bool exists;       /* present after the event (the feeder's stat) */
	bool was_absent;   /* the event made the path appear (create, moved in) */
	uint8_t ftype;     /* enum journal_ftype of what is there now (or was) */
	int64_t size;      /* after; -1 unknown */
	int64_t time_ns;   /* wall clock of the event */
	uint8_t attr;      /* enum journal_attr */
	uint32_t cmd;      /* with JA_BY: the command's serial */
};

struct journal_entry {
	struct journal_entry *hnext;      /* hash chain */
	struct journal_entry *prev, *next; /* by seq, oldest first */
	uint64_t seq;                     /* last change */
	uint64_t first_seq;               /* first change recorded */
	uint64_t seg_seq;                 /* first change after the latest checkpoint before it */
	uint64_t kseq[JK_N];              /* last change per kind (0: none) */
	int64_t size, time_ns;
	uint32_t hash, cmd;
	uint8_t attr, ftype;
	bool exists;
	bool first_existed;               /* present before first_seq */
	bool seg_existed;                 /* present before seg_seq */
	char path[];
};

struct journal {
	struct journal_entry **tab;
	size_t tab_n;       /* buckets, a power of two */
	size_t n, max_paths;
	struct journal_entry *head, *tail;
	uint64_t epoch;
	uint64_t seq;       /* last number given */
	uint64_t floor;     /* checkpoints below this answer resync */
	uint64_t issued;    /* highest checkpoint handed out */
	size_t bytes;       /* memory held by entries and table (approximate) */
};

/* Empty journal. 0 or -ENOMEM. max_paths >= 1. */
int journal_init(struct journal *j, uint64_t epoch, size_t max_paths);
void journal_free(struct journal *j);

/* Record one event; may forget the oldest path (raising the floor). 0 or -ENOMEM (then a gap is recorded). */
int journal_record(struct journal *j, const struct journal_event *ev);

/* Events were lost: every checkpoint before now answers resync. */
void journal_gap(struct journal *j);

/* Hand out a checkpoint for "now" (tokens are built from it). */
uint64_t journal_checkpoint(struct journal *j);

/* Token text for (base, cursor); out needs JOURNAL_TOKEN_LEN. */
#define JOURNAL_TOKEN_LEN 64
void journal_token(const struct journal *j, uint64_t base, uint64_t cursor, char *out);

/*
 * Parse a token. Returns 0 with *base, *cursor; 1 when it is well formed
 * but names another journal (answer resync); -EINVAL when malformed, or
 * naming a point after now, or cursor < base.
 */
int journal_parse_token(const struct journal *j, const char *tok, uint64_t *base, uint64_t *cursor);

struct journal_query {
	uint64_t base, cursor;
	const char *prefix;              /* NULL or "" = everything; absolute */
	const char *const *include;      /* globs, relative to prefix; none = all */
	size_t n_include;
	const char *const *exclude;
	size_t n_exclude;
	size_t limit;                    /* 0 = no limit */
	/* attribution filter: when by_cmd != 0, only JA_BY with that cmd, plus JA_GONE/JA_UNKNOWN when with_during */
	uint32_t by_cmd;
	bool with_during;
	bool skip_transient;             /* drop paths created and deleted after base (default true via journal_query_init) */
};

struct journal_change {
	const struct journal_entry *e;
	enum journal_type type;
	unsigned kinds; /* JK_* after base */
	bool exists;    /* present now (also false when a directory above went away) */
};

struct journal_result {
	bool resync;
	bool more;          /* cut by limit: next resumes */
	uint64_t next_base, next_cursor;
	struct journal_change *changes; /* owned by the result */
	size_t n;
};

void journal_query_init(struct journal_query *q);

/* Run a query. 0 or -ENOMEM. Free the result with journal_result_free. */
int journal_run(struct journal *j, const struct journal_query *q, struct journal_result *out);
void journal_result_free(struct journal_result *r);

/*
 * Glob match of a relative path: `*` any run without '/', `**` any run
 * (also '/', and a trailing `**` after a slash matches the directory itself), `?` one
 * character. A pattern without '/' matches any path component sequence
 * ending at any depth ("*.o" matches "a/b/c.o"); one containing '/'
 * is anchored at any directory boundary (node_modules followed by "/" "**" matches
 * "x/node_modules/y").
 */
bool journal_glob(const char *pattern, const char *rel);

/* Visit every entry, oldest first (hand-over record). */
typedef void (*journal_each_fn)(void *ud, const struct journal_entry *e);
void journal_each(const struct journal *j, journal_each_fn fn, void *ud);

/* Restore an entry as it was (hand-over record); keeps seq order if called oldest first. 0 or -ENOMEM. */
int journal_restore(struct journal *j, const struct journal_entry *e);

#endif
