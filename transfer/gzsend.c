/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gzsend.c - parallel gzip of a file into a response (see gzsend.h).
 *
 * Threads: a slot belongs to the loop while IDLE or DONE and to one worker
 * job while BUSY. The loop alone touches the gzsend struct's other
 * fields. Worker jobs complete as they finish, so the loop emits strictly
 * by sequence number and lets early pieces wait. Jobs carry the file's
 * mount key and a deadline: a read stuck on a hung mount cuts the stream
 * when it expires (ops->expired of the reqjob, base/reqjob.h), and the
 * state lives on until that read returns: each slot's job holds a
 * reference, as the exchange does until on_close.
 *
 * Dictionary check: a piece reads its 32 KiB dictionary from the file
 * together with its data, while the piece before it may still be read in
 * parallel. If the file is rewritten in place between those two reads,
 * the dictionary is not what the client has decoded and the stream would
 * fail its CRC. The loop keeps the last 32 KiB it emitted and compares;
 * on a mismatch the piece is deflated again with the right dictionary.
 *
 * Level: each piece is compressed at the level the link calls for when it
 * is submitted (gz_adapt): faster, down to stored, while the link waits
 * for the compressor; harder, up to 9, while output backs up.
 */
#include "transfer/gzsend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/errstr.h"
#include "base/log.h"
#include "base/pgzip.h"
#include "base/reqjob.h"
#include "base/worker.h"
#include "http/httpjob.h"
#include "http/linkrate.h"
#include "transfer/fsjob.h"

enum slot_state { SLOT_IDLE, SLOT_BUSY, SLOT_DONE };

/* Without a known link rate: backlog (linkrate_backlog) under which the
 * link is waiting for us, and over which it is the bottleneck. */
#define GZ_STARVED (64 * 1024)
#define GZ_BACKED (512 * 1024)
/* Pieces sent before an empty queue counts as starved: TCP ramps up. */
#define GZ_RAMP_PIECES 8
/* While storing, one piece in this many is deflated to measure the cost. */
#define GZ_PROBE_EVERY 16

struct gzsend;

struct gz_slot {
	struct gzsend *g;
	struct reqjob_task task;
	enum slot_state state;
	uint8_t *buf;      /* PGZ_DICT_MAX dictionary room, then GZSEND_BLOCK data */
	uint8_t *out;      /* pgz_block_bound(GZSEND_BLOCK) */
	struct pgz_block pb;
	uint64_t seq;
	int64_t off;       /* file offset of the data */
	size_t dictlen;    /* dictionary bytes, ending at buf + PGZ_DICT_MAX */
	bool have_data;    /* data already read: only compress (dictionary fix) */
	size_t n;          /* data bytes read */
	size_t outlen;
	uint32_t crc;
	int err;           /* read errno, 0 if none */
	uint64_t work_us;  /* time the compression took */
};

struct gzsend {
	struct reqjob job;   /* the exchange, the slots' jobs (key, deadline) */
	int fd;
	bool local;
	char path[PATH_MAX];
	int64_t size0;       /* size at the start: how far to read ahead */
	struct gz_slot slot[GZSEND_SLOTS];
	uint64_t next_seq;   /* next piece to read */
	uint64_t emit_seq;   /* next piece to queue */
	bool eof;            /* a short piece was queued: nothing more to read */
	bool driving;        /* gz_drive() is on the stack */
	bool backed;         /* read-ahead waited for the queue since the last piece */
	int level;           /* for the next piece: 0 (stored) .. 9 */
	uint64_t t6_us;      /* recent time level 6 would take for a piece */
	uint64_t r6_ppm;     /* recent ratio level 6 would reach, parts per million */
	uint32_t at_level[10]; /* pieces queued at each level (0: stored) */
	uint64_t out_total;  /* gzip bytes queued */
	struct timespec t0;  /* when the head was queued */
	struct pgz_sum sum;
	uint8_t tail[PGZ_DICT_MAX]; /* the last bytes queued, for the check */
	size_t tail_len;
};

/* The exchange, or NULL once it is over. */
static struct http_req *gz_req(const struct gzsend *g)
{
	return httpjob_req(&g->job);
}

static void gz_free(struct reqjob *j)
{
	struct gzsend *g = REQJOB_CONTAINER(j, struct gzsend, job);

	for (int i = 0; i < GZSEND_SLOTS; i++) {
		pgz_block_end(&g->slot[i].pb);
		free(g->slot[i].buf);
		free(g->slot[i].out);
	}
	fsjob_close(g->fd, g->job.key, g->local);
	free(g);
}

/* Fill buf[0..len) from off; short only at the end of the file. */
static ssize_t pread_full(int fd, uint8_t *buf, size_t len, int64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t k = pread(fd, buf + got, len - got, (off_t)(off + (int64_t)got));
		if (k == 0)
			break;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) /* a FIFO or device with nothing to give */
				break;
			return -errno;
		}
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/* Worker: read (unless already read) and compress one piece. */
static void gz_work(void *arg)
{
	struct gz_slot *s = arg;
	uint8_t *data = s->buf + PGZ_DICT_MAX;

	s->err = 0;
	if (!s->have_data) {
		s->dictlen = s->off < PGZ_DICT_MAX ? (size_t)s->off : PGZ_DICT_MAX;
		ssize_t k = pread_full(s->g->fd, data - s->dictlen, s->dictlen + GZSEND_BLOCK, s->off - (int64_t)s->dictlen);
		if (k < 0) {
			s->err = (int)-k;
			s->n = 0;
			return;
		}
		/* A file cut shorter since the previous piece: nothing here. */
		s->n = (size_t)k > s->dictlen ? (size_t)k - s->dictlen : 0;
		s->have_data = true;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	s->outlen = pgz_block_compress(&s->pb, data - s->dictlen, s->dictlen, data, s->n, s->out, &s->crc);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s->work_us = (uint64_t)(((int64_t)t1.tv_sec - t0.tv_sec) * 1000000 + ((int64_t)t1.tv_nsec - t0.tv_nsec) / 1000);
}

static void gz_drive(struct gzsend *g);

/* Loop, while the exchange is live: a piece is back. */
static void gz_done(void *arg)
{
	struct gz_slot *s = arg;

	s->state = SLOT_DONE;
	gz_drive(s->g);
}

static void gz_expired(struct reqjob *j)
{
	struct gzsend *g = REQJOB_CONTAINER(j, struct gzsend, job);
	struct http_req *r = gz_req(g);

	if (r->resp_ended)
		return;
	log_warn("files", "files_get: %s: read did not return within %g s; download cut", g->path, j->timeout);
	g->eof = true;
	http_resp_abort(r); /* may call on_close */
}

static const struct reqjob_ops gz_ops = { .free = gz_free, .expired = gz_expired };

static void gz_on_writable(struct http_req *r)
{
	struct reqjob *j = httpjob_of(r);

	if (j)
		gz_drive(REQJOB_CONTAINER(j, struct gzsend, job));
}

/*
 * Hand a slot to the pool. When the pool is full, a piece already read
 * or a file on a local mount is done here; a read that could hang never
 * is: the stream is cut instead.
 */
static void gz_submit(struct gzsend *g, struct gz_slot *s)
{
	s->state = SLOT_BUSY;
	if (reqjob_run_task(&g->job, &s->task, gz_work, gz_done, s, s->have_data ? REQJOB_CPU : 0) == 0)
		return;
	if (!s->have_data && !g->local) {
		log_error("files", "files_get: worker queue full reading '%s'; download cut", g->path);
		s->state = SLOT_IDLE;
		g->eof = true;
		http_resp_abort(gz_req(g));
		return;
	}
	gz_work(s);
	s->state = SLOT_DONE;
}

static bool gz_slot_alloc(struct gz_slot *s)
{
	if (!s->buf)
		s->buf = malloc(PGZ_DICT_MAX + GZSEND_BLOCK);
	if (!s->out)
		s->out = malloc(pgz_block_bound(GZSEND_BLOCK));
	return s->buf && s->out;
}

/* Remember the last PGZ_DICT_MAX bytes of everything queued. */
static void gz_keep_tail(struct gzsend *g, const uint8_t *p, size_t n)
{
	if (n >= PGZ_DICT_MAX) {
		memcpy(g->tail, p + n - PGZ_DICT_MAX, PGZ_DICT_MAX);
		g->tail_len = PGZ_DICT_MAX;
		return;
	}
	size_t keep = g->tail_len + n > PGZ_DICT_MAX ? PGZ_DICT_MAX - n : g->tail_len;
	memmove(g->tail, g->tail + g->tail_len - keep, keep);
	memcpy(g->tail + keep, p, n);
	g->tail_len = keep + n;
}

/*
 * Pieces one download compresses at once: one per core but one, at least
 * one. The cores are the sandbox's: a download must not take all of them
 * from the work running beside it (and a client in the same machine, as
 * in the benchmark, needs one to decode). Measured through the SDK over a
 * 100 Mbit/s link on 2 cores: with both cores compressing, text took
 * 1.48-1.89 s per 64 MiB (the client, starved, let the link idle); with
 * one, 1.15-1.27 s.
 */
static int gz_parallel(void)
{
	static int n;

	if (!n) {
		long c = sysconf(_SC_NPROCESSORS_ONLN) - 1;
		n = c < 1 ? 1 : c > GZSEND_SLOTS ? GZSEND_SLOTS : (int)c;
	}
	return n;
}

/*
 * Called as piece s is about to be queued: choose the level of the next
 * ones. From the pieces so far the loop knows what level 6 would cost per
 * piece (the last piece's compression time scaled by the table) and what
 * it would make of it (the piece's ratio, scaled). With the link's rate,
 * pgz_level_for_link() takes the level that delivers input fastest and,
 * on a link measured as the bottleneck, the hardest level that still keeps
 * it busy. Without a known rate, a queue that stays empty (next to
 * nothing queued or unsent in the kernel) means the link is faster than
 * the compressor (one level faster, but not to stored), one that backs up
 * that it is slower (one level harder). Either sign also vetoes a model
 * choice that goes the other way.
 */
static void gz_adapt(struct gzsend *g, const struct gz_slot *s)
{
	struct link_estimate e;
	int lc = s->pb.level;
	size_t backlog = linkrate_backlog(gz_req(g));
	bool backed = g->backed || backlog >= GZ_BACKED;
	bool starved = backlog < GZ_STARVED && g->emit_seq >= GZ_RAMP_PIECES;

	if (s->n == GZSEND_BLOCK && !s->pb.stored && lc > 0) {
		uint64_t t6 = s->work_us * 100 / pgz_level_time_pct[lc];
		uint64_t r6 = (uint64_t)s->outlen * 1000000 / s->n * 1000 / pgz_level_size_pmil[lc]; /* ppm */
		/* A thread preempted mid-piece on a busy machine reports a time
		 * many times the usual: such a sample moves the average less. */
		if (g->t6_us && t6 > 4 * g->t6_us)
			t6 = 4 * g->t6_us;
		g->t6_us = g->t6_us ? (g->t6_us * 7 + t6) / 8 : t6;
		g->r6_ppm = g->r6_ppm ? (g->r6_ppm * 3 + r6) / 4 : r6;
	}
	linkrate_estimate(gz_req(g), &e);
	int pick = g->level;
	if (e.known && e.bps && g->t6_us && g->r6_ppm) {
		struct pgz_link_model m = { .t6_us = g->t6_us, .r6_ppm = g->r6_ppm, .block = GZSEND_BLOCK,
					    .parallel = gz_parallel(), .link_bps = e.bps, .bound = e.bound };
		pick = pgz_level_for_link(&m);
	} else if (backed) {
		pick = g->level + 1;
	} else if (starved) {
		/* Down to stored only on a link known to be fast: before any
		 * rate is known, an empty queue is as often TCP ramping up on a
		 * slow link, where stored pieces cost 5x the bytes of text. */
		pick = g->level > 1 || e.known ? g->level - 1 : g->level;
	}
	/* What the queue shows overrules the model, whose figures may be old:
	 * never faster while output backs up, never harder while the link
	 * waits for us. */
	if (backed && pick < g->level)
		pick = g->level;
	if (starved && pick > g->level)
		pick = g->level;
	g->level = pick < 0 ? 0 : pick > 9 ? 9 : pick;
	g->backed = false;
}

/* With -verbose: what the adaptation did for one download, as
 * "pieces@level" counts, for tuning it against a real link. */
static void gz_log_levels(const struct gzsend *g)
{
	char lv[128];
	size_t n = 0;
	struct timespec t1;

	if (!log_verbose)
		return;
	lv[0] = 0;
	for (int l = 0; l <= 9; l++)
		if (g->at_level[l] && n < sizeof(lv))
			n += (size_t)snprintf(lv + n, sizeof(lv) - n, " %u@%d", g->at_level[l], l);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long long ms = ((long long)t1.tv_sec - g->t0.tv_sec) * 1000 + (t1.tv_nsec - g->t0.tv_nsec) / 1000000;
	struct link_estimate e;
	linkrate_estimate(gz_req(g), &e);
	log_debug("files", "files_get: %s: gzip %llu -> %llu bytes in %lld ms, pieces@level:%s, link %s %llu B/s",
		  g->path, (unsigned long long)g->sum.total, (unsigned long long)g->out_total, ms, lv,
		  e.bound ? "bound" : e.known ? "floor" : "unknown", (unsigned long long)e.bps);
}

/*
 * Queue the next piece if it is done. Returns 1 if one was queued, 0 if
 * none is ready, -1 when the response ended or the client is gone.
 */
static int gz_emit(struct gzsend *g)
{
	struct gz_slot *s = &g->slot[g->emit_seq % GZSEND_SLOTS];
	struct http_req *r = gz_req(g);

	if (s->state != SLOT_DONE || s->seq != g->emit_seq)
		return 0;
	if (s->err) {
		/* Headers are out: all we can do is cut the stream. */
		log_error("files", "files_get: read failed mid-download: %s", go_strerror(s->err));
		g->eof = true;
		http_resp_end(r, NULL, 0);
		return -1;
	}
	uint8_t *data = s->buf + PGZ_DICT_MAX;
	gz_adapt(g, s);
	if (!s->pb.stored && s->dictlen &&
	    (s->dictlen > g->tail_len || memcmp(data - s->dictlen, g->tail + g->tail_len - s->dictlen, s->dictlen))) {
		/* Rewritten in place under us: compress again with what the
		 * client really has. dictlen never exceeds what was queued. */
		s->dictlen = s->dictlen < g->tail_len ? s->dictlen : g->tail_len;
		memcpy(data - s->dictlen, g->tail + g->tail_len - s->dictlen, s->dictlen);
		gz_submit(g, s);
		return s->state == SLOT_DONE ? 1 : 0;
	}
	if (s->outlen && http_resp_write(r, s->out, s->outlen) < 0)
		return -1; /* client gone; on_close follows */
	pgz_sum_add(&g->sum, s->crc, s->n);
	g->at_level[s->pb.stored ? 0 : s->pb.level]++;
	g->out_total += s->outlen;
	gz_keep_tail(g, data, s->n);
	s->state = SLOT_IDLE;
	g->emit_seq++;
	if (s->n < GZSEND_BLOCK) {
		uint8_t t[PGZ_TRAILER_LEN];
		g->eof = true;
		pgz_trailer(t, g->sum.crc, g->sum.total);
		gz_log_levels(g);
		if (http_resp_write(r, t, sizeof(t)) < 0)
			return -1;
		http_resp_end(r, NULL, 0); /* may call on_close */
		return -1;
	}
	return 1;
}

/* Start reading the next piece if a slot is free and it is worth it. */
static int gz_read_ahead(struct gzsend *g)
{
	if (g->eof || g->next_seq >= g->emit_seq + GZSEND_SLOTS || reqjob_busy(&g->job) >= (unsigned)gz_parallel())
		return 0;
	if (http_resp_queued(gz_req(g)) >= HTTP_QUEUE_HIGH) {
		g->backed = true;
		return 0; /* on_writable calls again */
	}
	int64_t off = (int64_t)g->next_seq * GZSEND_BLOCK;
	/* Past the size seen at the start, read one piece at a time: the
	 * file may have grown, or may end exactly on a piece boundary. */
	if (off > g->size0 && g->next_seq != g->emit_seq)
		return 0;
	struct gz_slot *s = &g->slot[g->next_seq % GZSEND_SLOTS];
	if (s->state != SLOT_IDLE)
		return 0;
	if (!gz_slot_alloc(s)) {
		log_error("files", "files_get: out of memory for a gzip block");
		g->eof = true;
		http_resp_end(gz_req(g), NULL, 0);
		return -1;
	}
	s->seq = g->next_seq++;
	s->off = off;
	s->have_data = false;
	/* Stored pieces say nothing of what compressing costs: while the
	 * level is 0, one piece in GZ_PROBE_EVERY is deflated at level 1. */
	pgz_block_set_level(&s->pb, g->level == 0 && s->seq % GZ_PROBE_EVERY == GZ_PROBE_EVERY - 1 ? 1 : g->level);
	gz_submit(g, s);
	return 1;
}

/* The exchange is there and its response not yet ended. */
static bool gz_open(const struct gzsend *g)
{
	const struct http_req *r = gz_req(g);

	return r && !r->resp_ended;
}

static void gz_drive(struct gzsend *g)
{
	if (g->driving)
		return;
	g->driving = true;
	/* Ending the response may close the exchange under us. */
	reqjob_hold(&g->job);
	for (;;) {
		int progress = 0;
		while (gz_open(g) && gz_emit(g) > 0)
			progress = 1;
		while (gz_open(g) && gz_read_ahead(g) > 0)
			progress = 1;
		if (!progress || !gz_open(g))
			break;
	}
	g->driving = false;
	reqjob_release(&g->job);
}

void gzsend_start(struct reqjob *from, const struct gzsend_src *src, const struct http_hdr *h, size_t n)
{
	struct gzsend *g = calloc(1, sizeof(*g));
	uint8_t hdr[PGZ_HEADER_LEN];
	struct http_req *r;

	if (!g) {
		fsjob_close(src->fd, src->key, src->local);
		http_respond_json_error(httpjob_req(from), 500, "error creating gzip writer");
		return;
	}
	reqjob_init(&g->job, &gz_ops);
	g->fd = src->fd;
	g->job.key = src->key;
	g->local = src->local;
	g->job.timeout = src->timeout;
	snprintf(g->path, sizeof(g->path), "%s", src->path);
	g->size0 = src->size;
	pgz_sum_init(&g->sum);
	for (int i = 0; i < GZSEND_SLOTS; i++) {
		g->slot[i].g = g;
		pgz_block_init(&g->slot[i].pb, PGZ_LEVEL_DEFAULT);
	}
	clock_gettime(CLOCK_MONOTONIC, &g->t0);
	if (reqjob_handoff(from, &g->job) < 0)
		goto out; /* the exchange is gone: nothing to send */
	r = gz_req(g);
	/* Start where the link's known speed says; gz_adapt moves on from it. */
	struct link_estimate e;
	linkrate_estimate(r, &e);
	g->level = e.bound && e.bps < (4u << 20) ? 9 : e.bound && e.bps < (16u << 20) ? 6 : PGZ_LEVEL_DEFAULT;
	r->on_writable = gz_on_writable;
	if (http_resp_begin(r, 200, h, n, -1) < 0)
		goto out; /* on_close follows */
	pgz_header(hdr);
	if (http_resp_write(r, hdr, sizeof(hdr)) < 0)
		goto out;
	gz_drive(g);
out:
	reqjob_release(&g->job);
}
