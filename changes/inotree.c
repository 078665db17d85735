/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inotree.c - recursive inotify watches for the change journal (inotree.h).
 *
 * A watched directory is a node: its watch descriptor, its parent and its
 * name in the parent (a root node: its absolute path). Paths are built
 * from the chain when an event is read, so a directory renamed inside the
 * tree is one relink and everything below it has its new path at once.
 */
#include "changes/inotree.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "base/log.h"
#include "changes/journal.h"

/* First halves of moves waiting for their second (then: deletes). */
#define MOVES_MAX 64
/* Deepest directory a path is built for (PATH_MAX bounds it anyway). */
#define DEPTH_MAX (PATH_MAX / 2)

struct node {
	struct node *hnext;        /* hash chain, by wd */
	struct node *parent;       /* NULL: a root node */
	struct node *child;        /* first child */
	struct node *sib, **psib;  /* among the parent's children, or the root nodes */
	int wd;
	char *name;                /* in the parent; a root node: its absolute path */
};

struct move {
	uint32_t cookie;
	int from_wd;
	bool dir;
	char *name;
};

/* A directory waiting in the breadth-first walk. */
struct qent {
	struct node *parent;
	char *path;
};

struct inotree {
	struct inotree_ops ops;
	struct inotree_sink sink;
	size_t max, n;
	struct node **tab;
	size_t tab_n;              /* a power of two */
	struct node *roots;
	char **root_paths;         /* as added, for replies */
	size_t n_root_paths;
	struct move moves[MOVES_MAX];
	size_t n_moves;
	bool said_full, said_overflow;
};

/* ---- the node table ---- */

static size_t slot(const struct inotree *t, int wd)
{
	return ((uint32_t)wd * 2654435761u) & (t->tab_n - 1);
}

static struct node *lookup(const struct inotree *t, int wd)
{
	for (struct node *n = t->tab[slot(t, wd)]; n; n = n->hnext)
		if (n->wd == wd)
			return n;
	return NULL;
}

static void tab_grow(struct inotree *t)
{
	size_t nn = t->tab_n * 2;
	struct node **nt;

	if (t->n < t->tab_n || !(nt = calloc(nn, sizeof(*nt))))
		return; /* longer chains, still correct */
	for (size_t i = 0; i < t->tab_n; i++)
		for (struct node *n = t->tab[i], *next; n; n = next) {
			next = n->hnext;
			size_t s = ((uint32_t)n->wd * 2654435761u) & (nn - 1);
			n->hnext = nt[s];
			nt[s] = n;
		}
	free(t->tab);
	t->tab = nt;
	t->tab_n = nn;
}

static void link_under(struct inotree *t, struct node *n, struct node *parent)
{
	struct node **head = parent ? &parent->child : &t->roots;

	n->parent = parent;
	n->sib = *head;
	if (*head)
		(*head)->psib = &n->sib;
	n->psib = head;
	*head = n;
}

static void unlink_sib(struct node *n)
{
	*n->psib = n->sib;
	if (n->sib)
		n->sib->psib = n->psib;
	n->sib = NULL;
	n->psib = NULL;
}

static struct node *node_add(struct inotree *t, int wd, struct node *parent, const char *name)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n || !(n->name = strdup(name))) {
		free(n);
		return NULL;
	}
	n->wd = wd;
	link_under(t, n, parent);
	size_t s = slot(t, wd);
	n->hnext = t->tab[s];
	t->tab[s] = n;
	t->n++;
	tab_grow(t);
	return n;
}

static void hash_del(struct inotree *t, struct node *n)
{
	for (struct node **pp = &t->tab[slot(t, n->wd)]; *pp; pp = &(*pp)->hnext)
		if (*pp == n) {
			*pp = n->hnext;
			return;
		}
}

/*
 * Forget `top` and every node below it, deepest first. With `rm` the
 * watches are removed too (a directory moved out of view: its watches
 * would go on reporting under paths that are no longer true); without,
 * the kernel has dropped them already (IN_IGNORED) or is about to.
 */
static void drop(struct inotree *t, struct node *top, bool rm)
{
	struct node *n = top;

	for (;;) {
		while (n->child)
			n = n->child;
		struct node *p = n->parent;
		bool last = n == top;
		unlink_sib(n);
		hash_del(t, n);
		if (rm)
			t->ops.rm_watch(t->ops.ud, n->wd);
		free(n->name);
		free(n);
		t->n--;
		if (last)
			return;
		n = p;
	}
}

static struct node *child_named(const struct node *parent, const char *name)
{
	for (struct node *c = parent->child; c; c = c->sib)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* The absolute path of n, with `name` below it when given. 0 or -ENAMETOOLONG. */
static int path_of(const struct node *n, const char *name, char *out, size_t len)
{
	const struct node *chain[64];
	const struct node **ch = chain;
	const struct node **big = NULL;
	size_t depth = 0, cap = 64, o = 0;
	int rc = 0;

	for (const struct node *p = n; p; p = p->parent) {
		if (depth == cap) {
			if (cap >= DEPTH_MAX)
				return -ENAMETOOLONG;
			const struct node **nb = realloc(big, cap * 2 * sizeof(*nb));
			if (!nb) {
				free(big);
				return -ENAMETOOLONG;
			}
			if (!big)
				memcpy(nb, chain, sizeof(chain));
			big = ch = nb;
			cap *= 2;
		}
		ch[depth++] = p;
	}
	for (size_t i = depth; i-- > 0;) {
		const char *s = ch[i]->name;
		size_t l = strlen(s);
		/* a root "/" is the empty prefix of its children */
		if (i == depth - 1 && strcmp(s, "/") == 0 && (i > 0 || name))
			l = 0;
		if (i != depth - 1) {
			if (o + 1 >= len)
				goto toolong;
			out[o++] = '/';
		}
		if (o + l >= len)
			goto toolong;
		memcpy(out + o, s, l);
		o += l;
	}
	if (name) {
		size_t l = strlen(name);
		if (o + 1 + l >= len)
			goto toolong;
		out[o++] = '/';
		memcpy(out + o, name, l);
		o += l;
	}
	out[o] = '\0';
	free(big);
	return rc;
toolong:
	free(big);
	return -ENAMETOOLONG;
}

/* ---- adding watches ---- */

static void lost_full(struct inotree *t, int err)
{
	if (!t->said_full) {
		t->said_full = true;
		log_msg("warn", "changes",
			"inotify: %zu directories watched, no more (%s); changes in the others are not seen",
			t->n, err == -ENOSPC && t->n < t->max ? "the system's max_user_watches is reached"
							      : "the watch budget is spent");
	}
	t->sink.lost(t->sink.ud);
}

struct walk {
	struct inotree *t;
	struct qent *q;
	size_t n, cap;
	struct node *dir;      /* being listed */
	int64_t report;        /* 0: nothing, -1: every entry created, >0: changed since */
	bool oom;
};

static int walk_push(struct walk *w, struct node *parent, const char *path)
{
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 64;
		struct qent *nq = realloc(w->q, nc * sizeof(*nq));
		if (!nq)
			return -ENOMEM;
		w->q = nq;
		w->cap = nc;
	}
	if (!(w->q[w->n].path = strdup(path)))
		return -ENOMEM;
	w->q[w->n].parent = parent;
	w->n++;
	return 0;
}

static int walk_entry(void *ctx, const char *name, bool descend)
{
	struct walk *w = ctx;
	char path[PATH_MAX];

	if (path_of(w->dir, name, path, sizeof(path)) < 0)
		return 0;
	if (w->report)
		w->t->sink.change(w->t->sink.ud, path, JK_CREATE, true, descend, w->report > 0 ? w->report : 0);
	if (descend && walk_push(w, w->dir, path) < 0)
		w->oom = true;
	return 0;
}

/*
 * Watch `path` and the directories below it, breadth first (so a budget
 * that runs out leaves the deep parts unwatched, not the shallow ones).
 * parent NULL: a new root. Returns the first watch's result: 0, 1 when
 * it was watched already, or -errno.
 */
static int add_tree(struct inotree *t, struct node *parent, const char *path, int64_t report)
{
	struct walk w = { .t = t, .report = report };
	int first = 0;
	bool short_of = false;
	int why = 0;

	if (walk_push(&w, parent, path) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < w.n; i++) {
		struct qent *e = &w.q[i];
		int wd;

		if (t->n >= t->max) {
			short_of = true;
			why = -E2BIG;
			if (i == 0)
				first = -ENOSPC;
			continue;
		}
		wd = t->ops.add_watch(t->ops.ud, e->path);
		if (wd < 0) {
			if (wd == -ENOSPC || wd == -ENOMEM) {
				short_of = true;
				why = wd;
			}
			/* else gone already (ENOENT), replaced by a file, or not ours to read */
			if (i == 0)
				first = wd;
			continue;
		}
		struct node *old = lookup(t, wd);
		const char *base = strrchr(e->path, '/');
		base = e->parent && base ? base + 1 : e->path;
		if (old) {
			/* Reached again: a root below a new root becomes part of it. */
			if (!old->parent && e->parent && strcmp(old->name, e->path) == 0) {
				char *nm = strdup(base);
				if (nm) {
					unlink_sib(old);
					free(old->name);
					old->name = nm;
					link_under(t, old, e->parent);
				}
			}
			if (i == 0)
				first = 1;
			continue;
		}
		w.dir = node_add(t, wd, e->parent, base);
		if (!w.dir) {
			t->ops.rm_watch(t->ops.ud, wd);
			short_of = true;
			why = -ENOMEM;
			continue;
		}
		if (t->ops.list(t->ops.ud, e->path, walk_entry, &w) < 0 && report) {
			/* an unreadable new directory: what is in it is not known */
		}
		if (w.oom) {
			short_of = true;
			why = -ENOMEM;
			w.oom = false;
		}
	}
	for (size_t i = 0; i < w.n; i++)
		free(w.q[i].path);
	free(w.q);
	if (short_of)
		lost_full(t, why);
	return first;
}

/* ---- events ---- */

static void emit(struct inotree *t, const struct node *dir, const char *name, unsigned kinds, bool appeared,
		 bool isdir)
{
	char path[PATH_MAX];

	if (path_of(dir, name, path, sizeof(path)) == 0)
		t->sink.change(t->sink.ud, path, kinds, appeared, isdir, 0);
}

/* A move's first half with no second: the entry left the watched trees. */
static void move_out(struct inotree *t, struct move *m)
{
	struct node *from = lookup(t, m->from_wd);

	if (from) {
		emit(t, from, m->name, JK_REMOVE, false, m->dir);
		struct node *c = m->dir ? child_named(from, m->name) : NULL;
		if (c)
			drop(t, c, true);
	}
	free(m->name);
}

static void move_pend(struct inotree *t, const struct inotify_event *ev)
{
	if (t->n_moves == MOVES_MAX) {
		move_out(t, &t->moves[0]);
		memmove(&t->moves[0], &t->moves[1], (MOVES_MAX - 1) * sizeof(t->moves[0]));
		t->n_moves--;
	}
	struct move *m = &t->moves[t->n_moves];
	if (!(m->name = strdup(ev->name))) {
		t->sink.lost(t->sink.ud);
		return;
	}
	m->cookie = ev->cookie;
	m->from_wd = ev->wd;
	m->dir = (ev->mask & IN_ISDIR) != 0;
	t->n_moves++;
}

static void moved_to(struct inotree *t, struct node *to, const struct inotify_event *ev)
{
	bool dir = (ev->mask & IN_ISDIR) != 0;
	struct move m = { 0 };
	bool paired = false;

	for (size_t i = 0; i < t->n_moves; i++)
		if (t->moves[i].cookie == ev->cookie) {
			m = t->moves[i];
			memmove(&t->moves[i], &t->moves[i + 1], (t->n_moves - i - 1) * sizeof(t->moves[0]));
			t->n_moves--;
			paired = true;
			break;
		}
	struct node *from = paired ? lookup(t, m.from_wd) : NULL;
	if (!from) {
		/* Moved in from outside: it appears, and what is below it was not made now. */
		emit(t, to, ev->name, JK_CREATE, true, dir);
		if (dir) {
			char path[PATH_MAX];
			if (path_of(to, ev->name, path, sizeof(path)) == 0)
				add_tree(t, to, path, 0);
		}
		free(m.name);
		return;
	}
	emit(t, from, m.name, JK_REMOVE | JK_RENAME, false, dir);
	emit(t, to, ev->name, JK_CREATE | JK_RENAME, true, dir);
	if (dir) {
		struct node *c = child_named(from, m.name);
		struct node *replaced = child_named(to, ev->name);
		char *nm = c ? strdup(ev->name) : NULL;
		if (replaced && replaced != c)
			drop(t, replaced, false); /* renamed over: the kernel drops its watch */
		if (nm) {
			unlink_sib(c);
			free(c->name);
			c->name = nm;
			link_under(t, c, to);
		} else {
			/* Not watched under its old name: made and renamed before
			 * its creation was read (or past the budget). What is in it
			 * was not seen being made. */
			char path[PATH_MAX];
			if (c)
				drop(t, c, true);
			if (path_of(to, ev->name, path, sizeof(path)) == 0)
				add_tree(t, to, path, c ? 0 : -1);
		}
	}
	free(m.name);
}

static void self_event(struct inotree *t, struct node *n, uint32_t mask)
{
	char path[PATH_MAX];

	/* Below a root, the parent's watch reports these with a name. */
	if (n->parent || path_of(n, NULL, path, sizeof(path)) < 0)
		return;
	if (mask & IN_ATTRIB)
		t->sink.change(t->sink.ud, path, JK_ATTRIB, false, true, 0);
	if (mask & IN_DELETE_SELF)
		t->sink.change(t->sink.ud, path, JK_REMOVE, false, true, 0);
	if (mask & IN_MOVE_SELF) {
		/* A root moved away: where it went is not known. */
		t->sink.change(t->sink.ud, path, JK_REMOVE | JK_RENAME, false, true, 0);
		drop(t, n, true);
	}
}

static void one_event(struct inotree *t, const struct inotify_event *ev)
{
	struct node *n;

	if (ev->mask & IN_Q_OVERFLOW) {
		if (!t->said_overflow) {
			t->said_overflow = true;
			log_msg("warn", "changes", "inotify: the kernel queue overflowed; changes were lost");
		}
		t->sink.lost(t->sink.ud);
		return;
	}
	if (!(n = lookup(t, ev->wd)))
		return; /* a watch dropped already */
	if (ev->mask & IN_IGNORED) {
		drop(t, n, false);
		return;
	}
	if (ev->len == 0 || !ev->name[0]) {
		self_event(t, n, ev->mask);
		return;
	}
	bool dir = (ev->mask & IN_ISDIR) != 0;
	if (ev->mask & IN_MOVED_FROM) {
		move_pend(t, ev);
		return;
	}
	if (ev->mask & IN_MOVED_TO) {
		moved_to(t, n, ev);
		return;
	}
	unsigned kinds = 0;
	if (ev->mask & IN_CREATE)
		kinds |= JK_CREATE;
	if (ev->mask & IN_DELETE)
		kinds |= JK_REMOVE;
	if (ev->mask & IN_MODIFY)
		kinds |= JK_WRITE;
	if (ev->mask & IN_ATTRIB)
		kinds |= JK_ATTRIB;
	if (!kinds)
		return;
	if ((ev->mask & IN_DELETE) && dir) {
		struct node *c = child_named(n, ev->name);
		if (c)
			drop(t, c, false);
	}
	emit(t, n, ev->name, kinds, (ev->mask & IN_CREATE) != 0, dir);
	if ((ev->mask & IN_CREATE) && dir) {
		char path[PATH_MAX];
		if (path_of(n, ev->name, path, sizeof(path)) == 0)
			add_tree(t, n, path, -1);
	}
}

/* ---- public ---- */

struct inotree *inotree_new(const struct inotree_ops *ops, const struct inotree_sink *sink, size_t max_watches)
{
	struct inotree *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->tab_n = 64;
	if (!(t->tab = calloc(t->tab_n, sizeof(*t->tab)))) {
		free(t);
		return NULL;
	}
	t->ops = *ops;
	t->sink = *sink;
	t->max = max_watches;
	return t;
}

void inotree_free(struct inotree *t)
{
	if (!t)
		return;
	while (t->roots)
		drop(t, t->roots, false);
	for (size_t i = 0; i < t->n_moves; i++)
		free(t->moves[i].name);
	for (size_t i = 0; i < t->n_root_paths; i++)
		free(t->root_paths[i]);
	free(t->root_paths);
	free(t->tab);
	free(t);
}

int inotree_add_root(struct inotree *t, const char *path, int64_t recent_ns)
{
	int rc = add_tree(t, NULL, path, recent_ns > 0 ? recent_ns : 0);

	if (rc == 0) {
		char **nr = realloc(t->root_paths, (t->n_root_paths + 1) * sizeof(*nr));
		if (nr) {
			t->root_paths = nr;
			if ((nr[t->n_root_paths] = strdup(path)))
				t->n_root_paths++;
		}
	}
	return rc;
}

void inotree_feed(struct inotree *t, const void *buf, size_t len)
{
	const char *p = buf;

	for (size_t off = 0; off + sizeof(struct inotify_event) <= len;) {
		struct inotify_event ev;
		memcpy(&ev, p + off, sizeof(ev));
		size_t rl = sizeof(ev) + ev.len;
		if (off + rl > len)
			break;
		if (ev.len) {
			/* the name is NUL-padded; aligned as read(2) gives it */
			one_event(t, (const struct inotify_event *)(const void *)(p + off));
		} else {
			one_event(t, &ev);
		}
		off += rl;
	}
}

bool inotree_pending(const struct inotree *t)
{
	return t->n_moves > 0;
}

void inotree_flush(struct inotree *t)
{
	for (size_t i = 0; i < t->n_moves; i++)
		move_out(t, &t->moves[i]);
	t->n_moves = 0;
}

size_t inotree_watches(const struct inotree *t)
{
	return t->n;
}

void inotree_each_root(const struct inotree *t, void (*fn)(void *ud, const char *path), void *ud)
{
	for (size_t i = 0; i < t->n_root_paths; i++)
		fn(ud, t->root_paths[i]);
}
