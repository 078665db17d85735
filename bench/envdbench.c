/* SPDX-License-Identifier: Apache-2.0 */
/*
 * envdbench: the C client of `make bench`. Each subcommand runs one
 * measurement against a server already listening on 127.0.0.1:<port> (or
 * against the kernel alone, for the anchors) and prints exactly one line of
 * JSON on stdout; scripts/bench.sh starts the servers, collects the lines and
 * computes the ratios.
 *
 *   envdbench spawn N                      posix_spawn+waitpid of /bin/true
 *   envdbench pipe BYTES                   head -c BYTES /dev/zero | reader
 *   envdbench rtt PORT N                   spawn, start-h1 and start-h2 interleaved
 *   envdbench start-h1 PORT N              Process/Start /bin/true, HTTP/1.1, Connect JSON
 *   envdbench start-h2 PORT N              Process/Start /bin/true, h2c, Connect proto
 *   envdbench stream-h1 PORT BYTES         Start of head -c BYTES, JSON, bytes counted
 *   envdbench stream-h2 PORT BYTES         the same over h2c with proto
 *   envdbench idle PORT PID N              N idle Connect streams; RSS of PID
 *   envdbench busy PORT PID NPROC BYTES    NPROC Starts streaming BYTES each; peak RSS
 *   envdbench conns PORT PID N PATH        N concurrent HTTP/1.1 connections, one GET each
 *   envdbench exec-health h1|h2 N CMD...   exec to first answer; "{PORT}" in CMD is replaced
 *
 * Every loop is bounded by a count and a deadline; every child started here
 * is reaped or killed before exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "process.pb-c.h"

extern char **environ;

#define MAX_ENVELOPE (16u << 20)
#define DEADLINE_S 300.0

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "envdbench: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, int n, double p)
{
	if (n <= 0)
		return 0;
	int k = (int)(p / 100.0 * n + 0.999999) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return v[k];
}

/* Prints latency fields (microseconds) of n samples in seconds; sorts v. */
static void print_lat(double *v, int n)
{
	double sum = 0;
	qsort(v, n, sizeof(*v), cmp_double);
	for (int i = 0; i < n; i++)
		sum += v[i];
	printf("\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"min_us\":%.1f,\"max_us\":%.1f",
	       pct(v, n, 50) * 1e6, pct(v, n, 99) * 1e6, n ? sum / n * 1e6 : 0, n ? v[0] * 1e6 : 0,
	       n ? v[n - 1] * 1e6 : 0);
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static void raise_nofile(void)
{
	struct rlimit rl = {65536, 65536};
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int tcp_connect(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pf = {fd, POLLOUT, 0};
				poll(&pf, 1, 1000);
				continue;
			}
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- Connect envelopes and the calls they belong to ---- */

struct call {
	bool proto;
	/* envelope parser */
	uint8_t hdr[5];
	size_t hlen;
	uint8_t *buf;
	size_t need, have;
	/* results */
	int status;
	bool got_start, got_end, eos, eos_ok, closed, bad;
	uint32_t pid;
	int exit_code;
	uint64_t out_bytes, gap_bytes;
	int gaps;
	double t0, t1;
	/* request body (owned) */
	uint8_t *req;
	size_t req_len, req_off;
	const char *path;
};

static int g_started, g_closed;

/* Decoded length of the base64 JSON string starting at s (after the quote). */
static size_t b64_len(const uint8_t *s, const uint8_t *end)
{
	const uint8_t *q = memchr(s, '"', (size_t)(end - s));
	if (!q)
		return 0;
	size_t l = (size_t)(q - s), pad = 0;
	if (l >= 1 && s[l - 1] == '=')
		pad++;
	if (l >= 2 && s[l - 2] == '=')
		pad++;
	return l / 4 * 3 - pad;
}

static void call_message(struct call *c, int flags, const uint8_t *p, size_t n)
{
	if (flags & 2) {
		c->eos = true;
		c->eos_ok = n == 2 && memcmp(p, "{}", 2) == 0;
		static int shown;
		if (!c->eos_ok && shown++ < 3)
			fprintf(stderr, "envdbench: stream error: %.*s\n", (int)(n > 300 ? 300 : n), p);
		return;
	}
	if (c->proto) {
		/* StartResponse and ConnectResponse share the same shape. */
		Process__StartResponse *r = process__start_response__unpack(NULL, n, p);
		if (!r || !r->event) {
			c->bad = true;
		} else {
			switch (r->event->event_case) {
			case PROCESS__PROCESS_EVENT__EVENT_START:
				c->pid = r->event->start->pid;
				if (!c->got_start)
					g_started++;
				c->got_start = true;
				break;
			case PROCESS__PROCESS_EVENT__EVENT_DATA:
				if (r->event->data->output_case == PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDOUT)
					c->out_bytes += r->event->data->stdout.len;
				break;
			case PROCESS__PROCESS_EVENT__EVENT_END:
				c->got_end = true;
				c->exit_code = r->event->end->exit_code;
				break;
			case PROCESS__PROCESS_EVENT__EVENT_GAP:
				/* Output envd dropped: an error for a connected reader. */
				c->gaps++;
				c->gap_bytes += r->event->gap->to - r->event->gap->from;
				break;
			default:
				break;
			}
		}
		if (r)
			process__start_response__free_unpacked(r, NULL);
		return;
	}
	/* JSON: find the few fields a client acts on; the payload is not copied. */
	const uint8_t *end = p + n, *m;
	if ((m = memmem(p, n, "\"stdout\":\"", 10))) {
		c->out_bytes += b64_len(m + 10, end);
	} else if ((m = memmem(p, n, "\"start\":{\"pid\":", 15))) {
		c->pid = (uint32_t)strtoul((const char *)m + 15, NULL, 10);
		if (!c->got_start)
			g_started++;
		c->got_start = true;
	} else if ((m = memmem(p, n, "\"end\":", 6))) {
		c->got_end = true;
		const uint8_t *e = memmem(p, n, "\"exitCode\":", 11);
		c->exit_code = e ? atoi((const char *)e + 11) : 0;
	}
}

/* Feeds response body bytes; returns -1 on a malformed or oversized envelope. */
static int call_feed(struct call *c, const uint8_t *d, size_t n)
{
	while (n > 0) {
		if (c->hlen < 5) {
			size_t k = 5 - c->hlen < n ? 5 - c->hlen : n;
			memcpy(c->hdr + c->hlen, d, k);
			c->hlen += k;
			d += k;
			n -= k;
			if (c->hlen < 5)
				return 0;
			c->need = (size_t)c->hdr[1] << 24 | (size_t)c->hdr[2] << 16 | (size_t)c->hdr[3] << 8 | c->hdr[4];
			if (c->need > MAX_ENVELOPE)
				return -1;
			c->have = 0;
			free(c->buf);
			c->buf = malloc(c->need ? c->need : 1);
			if (!c->buf)
				return -1;
		}
		size_t k = c->need - c->have < n ? c->need - c->have : n;
		memcpy(c->buf + c->have, d, k);
		c->have += k;
		d += k;
		n -= k;
		if (c->have == c->need) {
			call_message(c, c->hdr[0], c->buf, c->need);
			c->hlen = 0;
		}
	}
	return 0;
}

static void call_reset(struct call *c)
{
	free(c->buf);
	free(c->req);
	memset(c, 0, sizeof(*c));
}

static bool call_ok(const struct call *c)
{
	return c->status == 200 && c->eos && c->eos_ok && !c->bad;
}

/* Wraps a message in one Connect envelope (flag 0). */
static uint8_t *envelope(const uint8_t *msg, size_t n, size_t *out_len)
{
	uint8_t *b = malloc(n + 5);
	if (!b)
		die("malloc");
	b[0] = 0;
	b[1] = (uint8_t)(n >> 24);
	b[2] = (uint8_t)(n >> 16);
	b[3] = (uint8_t)(n >> 8);
	b[4] = (uint8_t)n;
	memcpy(b + 5, msg, n);
	*out_len = n + 5;
	return b;
}

/* StartRequest for argv (stdin closed), in proto or JSON, enveloped. */
static uint8_t *start_body(bool proto, char **argv, int argc, const char *tag, size_t *len)
{
	if (proto) {
		Process__ProcessConfig cfg = PROCESS__PROCESS_CONFIG__INIT;
		Process__StartRequest req = PROCESS__START_REQUEST__INIT;
		cfg.cmd = argv[0];
		cfg.n_args = (size_t)argc - 1;
		cfg.args = argv + 1;
		req.process = &cfg;
		req.optional_stdin_case = PROCESS__START_REQUEST__OPTIONAL_STDIN_STDIN;
		req.stdin = 0;
		if (tag) {
			req.optional_tag_case = PROCESS__START_REQUEST__OPTIONAL_TAG_TAG;
			req.tag = (char *)tag;
		}
		size_t n = process__start_request__get_packed_size(&req);
		uint8_t *m = malloc(n + 1);
		if (!m)
			die("malloc");
		process__start_request__pack(&req, m);
		uint8_t *b = envelope(m, n, len);
		free(m);
		return b;
	}
	char js[4096];
	int o = snprintf(js, sizeof(js), "{\"process\":{\"cmd\":\"%s\",\"args\":[", argv[0]);
	for (int i = 1; i < argc; i++)
		o += snprintf(js + o, sizeof(js) - (size_t)o, "%s\"%s\"", i > 1 ? "," : "", argv[i]);
	o += snprintf(js + o, sizeof(js) - (size_t)o, "]},\"stdin\":false%s%s%s}", tag ? ",\"tag\":\"" : "",
		      tag ? tag : "", tag ? "\"" : "");
	return envelope((const uint8_t *)js, (size_t)o, len);
}

static uint8_t *connect_body(uint32_t pid, size_t *len)
{
	Process__ProcessSelector sel = PROCESS__PROCESS_SELECTOR__INIT;
	Process__ConnectRequest req = PROCESS__CONNECT_REQUEST__INIT;
	sel.selector_case = PROCESS__PROCESS_SELECTOR__SELECTOR_PID;
	sel.pid = pid;
	req.process = &sel;
	uint8_t m[64];
	size_t n = process__connect_request__pack(&req, m);
	return envelope(m, n, len);
}

/* ---- HTTP/1.1 client: one keep-alive connection, one call at a time ---- */

struct h1 {
	int fd, port;
	uint8_t buf[256 * 1024];
	size_t off, len;
};

static int h1_fill(struct h1 *h)
{
	if (h->off == h->len)
		h->off = h->len = 0;
	if (h->len == sizeof(h->buf)) {
		memmove(h->buf, h->buf + h->off, h->len - h->off);
		h->len -= h->off;
		h->off = 0;
	}
	ssize_t r;
	do
		r = read(h->fd, h->buf + h->len, sizeof(h->buf) - h->len);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return -1;
	h->len += (size_t)r;
	return 0;
}

/* Reads one CRLF-terminated line into out (without CRLF). */
static int h1_line(struct h1 *h, char *out, size_t cap)
{
	for (;;) {
		uint8_t *nl = memchr(h->buf + h->off, '\n', h->len - h->off);
		if (nl) {
			size_t l = (size_t)(nl - (h->buf + h->off));
			size_t k = l > 0 && nl[-1] == '\r' ? l - 1 : l;
			if (k >= cap)
				k = cap - 1;
			memcpy(out, h->buf + h->off, k);
			out[k] = 0;
			h->off += l + 1;
			return 0;
		}
		if (h1_fill(h) < 0)
			return -1;
	}
}

static int h1_body(struct h1 *h, struct call *c, size_t n)
{
	while (n > 0) {
		if (h->off == h->len && h1_fill(h) < 0)
			return -1;
		size_t k = h->len - h->off < n ? h->len - h->off : n;
		if (call_feed(c, h->buf + h->off, k) < 0)
			return -1;
		h->off += k;
		n -= k;
	}
	return 0;
}

/* One Connect streaming call over the connection; reconnects when needed. */
static int h1_call(struct h1 *h, struct call *c, const char *ctype)
{
	char head[512], line[1024];
	if (h->fd < 0) {
		h->fd = tcp_connect(h->port);
		h->off = h->len = 0;
		if (h->fd < 0)
			return -1;
	}
	int hl = snprintf(head, sizeof(head),
			  "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
			  "Connect-Protocol-Version: 1\r\nContent-Length: %zu\r\n\r\n",
			  c->path, ctype, c->req_len);
	struct iovec iov[2] = {{head, (size_t)hl}, {c->req, c->req_len}};
	if (writev(h->fd, iov, 2) != (ssize_t)(hl + (int)c->req_len))
		goto broken;
	if (h1_line(h, line, sizeof(line)) < 0 || sscanf(line, "HTTP/1.1 %d", &c->status) != 1)
		goto broken;
	bool chunked = false, keep = true;
	long clen = -1;
	for (;;) {
		if (h1_line(h, line, sizeof(line)) < 0)
			goto broken;
		if (!line[0])
			break;
		if (!strncasecmp(line, "transfer-encoding:", 18) && strcasestr(line, "chunked"))
			chunked = true;
		else if (!strncasecmp(line, "content-length:", 15))
			clen = atol(line + 15);
		else if (!strncasecmp(line, "connection:", 11) && strcasestr(line, "close"))
			keep = false;
	}
	if (chunked) {
		for (;;) {
			if (h1_line(h, line, sizeof(line)) < 0)
				goto broken;
			size_t n = strtoul(line, NULL, 16);
			if (n == 0) {
				do
					if (h1_line(h, line, sizeof(line)) < 0)
						goto broken;
				while (line[0]);
				break;
			}
			if (h1_body(h, c, n) < 0 || h1_line(h, line, sizeof(line)) < 0)
				goto broken;
		}
	} else if (clen >= 0) {
		if (h1_body(h, c, (size_t)clen) < 0)
			goto broken;
	} else {
		keep = false;
		while (h1_fill(h) == 0) {
			call_feed(c, h->buf + h->off, h->len - h->off);
			h->off = h->len;
		}
	}
	if (!keep) {
		close(h->fd);
		h->fd = -1;
	}
	c->closed = true;
	return 0;
broken:
	close(h->fd);
	h->fd = -1;
	return -1;
}

/* ---- h2c client on nghttp2: several connections, many streams ---- */

struct h2 {
	int fd;
	nghttp2_session *s;
	bool dead;
};

static ssize_t h2_send_cb(nghttp2_session *s, const uint8_t *d, size_t n, int flags, void *ud)
{
	struct h2 *h = ud;
	if (write_all(h->fd, d, n) < 0) {
		h->dead = true;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	return (ssize_t)n;
}

static int h2_header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
			const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct call *c = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (c && nl == 7 && !memcmp(name, ":status", 7))
		c->status = atoi((const char *)value);
	return 0;
}

static int h2_data_cb(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t n, void *ud)
{
	struct call *c = nghttp2_session_get_stream_user_data(s, id);
	if (c && call_feed(c, d, n) < 0)
		c->bad = true;
	return 0;
}

static int h2_close_cb(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
	struct call *c = nghttp2_session_get_stream_user_data(s, id);
	if (c && !c->closed) {
		c->closed = true;
		c->t1 = now_s();
		if (err)
			c->bad = true;
		g_closed++;
	}
	return 0;
}

static ssize_t h2_body_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
			  nghttp2_data_source *src, void *ud)
{
	struct call *c = src->ptr;
	size_t k = c->req_len - c->req_off < len ? c->req_len - c->req_off : len;
	memcpy(buf, c->req + c->req_off, k);
	c->req_off += k;
	if (c->req_off == c->req_len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)k;
}

static void h2_open(struct h2 *h, int port)
{
	nghttp2_session_callbacks *cb;
	h->fd = tcp_connect(port);
	if (h->fd < 0) {
		errno = -h->fd;
		die("connect");
	}
	h->dead = false;
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_send_callback(cb, h2_send_cb);
	nghttp2_session_callbacks_set_on_header_callback(cb, h2_header_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_data_cb);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_close_cb);
	nghttp2_session_client_new(&h->s, cb, h);
	nghttp2_session_callbacks_del(cb);
	/* Large windows, as bulk clients (Go's transport, h2load) use: flow
	 * control should not be what limits a throughput figure. */
	nghttp2_settings_entry iv[] = {
		{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000},
		{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16u << 20},
	};
	nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, 2);
	nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0, 256 << 20);
}

static void h2_close(struct h2 *h)
{
	nghttp2_session_del(h->s);
	close(h->fd);
}

static void h2_submit(struct h2 *h, struct call *c, const char *ctype)
{
	char clen[24];
	snprintf(clen, sizeof(clen), "%zu", c->req_len);
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}
	nghttp2_nv nv[] = {
		NV(":method", "POST"),	     NV(":scheme", "http"),
		NV(":authority", "127.0.0.1"), NV(":path", c->path),
		NV("content-type", ctype),    NV("connect-protocol-version", "1"),
		NV("content-length", clen),
	};
#undef NV
	nghttp2_data_provider dp = {.source.ptr = c, .read_callback = h2_body_cb};
	c->t0 = now_s();
	if (nghttp2_submit_request(h->s, NULL, nv, sizeof(nv) / sizeof(nv[0]), &dp, c) < 0)
		die("nghttp2_submit_request");
}

typedef bool (*pump_done_fn)(void *arg);

/* Drives the sessions until done(arg) or the deadline; calls tick each round. */
static int h2_pump(struct h2 *hs, int n, pump_done_fn done, void *arg, double deadline, void (*tick)(void *),
		   void *targ)
{
	static uint8_t rbuf[256 * 1024];
	struct pollfd pf[64];
	if (n > 64)
		return -1;
	while (!done(arg)) {
		if (now_s() > deadline)
			return -1;
		for (int i = 0; i < n; i++) {
			if (!hs[i].dead && nghttp2_session_send(hs[i].s) != 0)
				hs[i].dead = true;
			pf[i] = (struct pollfd){hs[i].dead ? -1 : hs[i].fd, POLLIN, 0};
		}
		int r = poll(pf, (nfds_t)n, 10);
		if (tick)
			tick(targ);
		if (r <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t k = read(hs[i].fd, rbuf, sizeof(rbuf));
			if (k <= 0) {
				hs[i].dead = true;
				continue;
			}
			if (nghttp2_session_mem_recv(hs[i].s, rbuf, (size_t)k) < 0)
				hs[i].dead = true;
		}
		bool all_dead = true;
		for (int i = 0; i < n; i++)
			all_dead &= hs[i].dead;
		if (all_dead)
			return -1;
	}
	return 0;
}

static bool call_closed(void *arg)
{
	return ((struct call *)arg)->closed;
}

/* ---- subcommands ---- */

static int cmd_spawn(int n)
{
	char *argv[] = {"/bin/true", NULL};
	int warm = n / 10 < 20 ? n / 10 : 20;
	double *lat = calloc((size_t)n, sizeof(double));
	for (int i = -warm; i < n; i++) {
		pid_t pid;
		int st;
		double t0 = now_s();
		if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
			die("posix_spawn");
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("waitpid");
		if (i >= 0)
			lat[i] = now_s() - t0;
	}
	printf("{\"n\":%d,\"errors\":0,", n);
	print_lat(lat, n);
	printf("}\n");
	free(lat);
	return 0;
}

static int cmd_pipe(unsigned long long bytes)
{
	static uint8_t buf[64 * 1024];
	char count[32];
	snprintf(count, sizeof(count), "%llu", bytes);
	char *argv[] = {"/usr/bin/head", "-c", count, "/dev/zero", NULL};
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	pid_t pid;
	double t0 = now_s();
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0)
		die("posix_spawn");
	close(p[1]);
	unsigned long long got = 0;
	ssize_t r;
	while ((r = read(p[0], buf, sizeof(buf))) > 0)
		got += (unsigned long long)r;
	int st;
	waitpid(pid, &st, 0);
	double dt = now_s() - t0;
	close(p[0]);
	posix_spawn_file_actions_destroy(&fa);
	printf("{\"bytes\":%llu,\"errors\":%d,\"seconds\":%.4f,\"mib_s\":%.1f}\n", got, got != bytes,
	       dt, (double)got / dt / 1048576.0);
	return got == bytes ? 0 : 1;
}

static int cmd_start(int port, bool use_h2, int n)
{
	char *argv[] = {"/bin/true"};
	int warm = n / 10 < 20 ? n / 10 : 20, errors = 0;
	double *lat = calloc((size_t)n, sizeof(double));
	struct h1 h1 = {.fd = -1, .port = port};
	struct h2 h2;
	if (use_h2)
		h2_open(&h2, port);
	double t_start = 0;
	for (int i = -warm; i < n; i++) {
		if (i == 0)
			t_start = now_s();
		struct call c = {.proto = use_h2, .path = "/process.Process/Start"};
		c.req = start_body(use_h2, argv, 1, NULL, &c.req_len);
		double t0 = now_s();
		int rc;
		if (use_h2) {
			h2_submit(&h2, &c, "application/connect+proto");
			rc = h2_pump(&h2, 1, call_closed, &c, t0 + 30, NULL, NULL);
		} else {
			rc = h1_call(&h1, &c, "application/connect+json");
		}
		double dt = now_s() - t0;
		bool ok = rc == 0 && call_ok(&c) && c.got_start && c.got_end && c.exit_code == 0;
		if (!ok && i >= 0)
			errors++;
		if (i >= 0)
			lat[i] = dt;
		call_reset(&c);
		if (use_h2 && h2.dead)
			break;
	}
	double wall = now_s() - t_start;
	printf("{\"n\":%d,\"errors\":%d,\"rps\":%.1f,", n, errors, n / wall);
	print_lat(lat, n);
	printf("}\n");
	if (use_h2)
		h2_close(&h2);
	else if (h1.fd >= 0)
		close(h1.fd);
	free(lat);
	return errors ? 1 : 0;
}

/*
 * The three round trips interleaved, one of each per iteration, so that
 * drift on a shared machine hits envd and its anchor alike.
 */
static int cmd_rtt(int port, int n)
{
	char *argv[] = {"/bin/true", NULL};
	int warm = n / 10 < 20 ? n / 10 : 20, err[3] = {0};
	double *lat[3];
	for (int k = 0; k < 3; k++)
		lat[k] = calloc((size_t)n, sizeof(double));
	struct h1 *h1 = calloc(1, sizeof(*h1));
	struct h2 h2;
	h1->fd = -1;
	h1->port = port;
	h2_open(&h2, port);
	for (int i = -warm; i < n; i++) {
		/* bare posix_spawn + waitpid */
		pid_t pid;
		int st;
		double t0 = now_s();
		bool ok = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0 && waitpid(pid, &st, 0) == pid &&
			  WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (i >= 0) {
			lat[0][i] = now_s() - t0;
			err[0] += !ok;
		}
		for (int k = 1; k <= 2; k++) {
			bool use_h2 = k == 2;
			struct call c = {.proto = use_h2, .path = "/process.Process/Start"};
			c.req = start_body(use_h2, argv, 1, NULL, &c.req_len);
			t0 = now_s();
			int rc;
			if (use_h2) {
				h2_submit(&h2, &c, "application/connect+proto");
				rc = h2_pump(&h2, 1, call_closed, &c, t0 + 30, NULL, NULL);
			} else {
				rc = h1_call(h1, &c, "application/connect+json");
			}
			double dt = now_s() - t0;
			ok = rc == 0 && call_ok(&c) && c.got_start && c.got_end && c.exit_code == 0;
			if (i >= 0) {
				lat[k][i] = dt;
				err[k] += !ok;
			}
			call_reset(&c);
		}
		if (h2.dead)
			break;
	}
	static const char *names[] = {"spawn", "h1_json", "h2_proto"};
	printf("{");
	for (int k = 0; k < 3; k++) {
		printf("%s\"%s\":{\"n\":%d,\"errors\":%d,", k ? "," : "", names[k], n, err[k]);
		print_lat(lat[k], n);
		printf("}");
		free(lat[k]);
	}
	printf("}\n");
	h2_close(&h2);
	if (h1->fd >= 0)
		close(h1->fd);
	free(h1);
	return err[0] + err[1] + err[2] ? 1 : 0;
}

static int cmd_stream(int port, bool use_h2, unsigned long long bytes)
{
	char count[32];
	snprintf(count, sizeof(count), "%llu", bytes);
	char *argv[] = {"/usr/bin/head", "-c", count, "/dev/zero"};
	struct call c = {.proto = use_h2, .path = "/process.Process/Start"};
	c.req = start_body(use_h2, argv, 4, NULL, &c.req_len);
	double t0 = now_s();
	int rc;
	if (use_h2) {
		struct h2 h;
		h2_open(&h, port);
		h2_submit(&h, &c, "application/connect+proto");
		rc = h2_pump(&h, 1, call_closed, &c, t0 + DEADLINE_S, NULL, NULL);
		h2_close(&h);
	} else {
		struct h1 *h = calloc(1, sizeof(*h));
		h->fd = -1;
		h->port = port;
		rc = h1_call(h, &c, "application/connect+json");
		if (h->fd >= 0)
			close(h->fd);
		free(h);
	}
	double dt = now_s() - t0;
	bool ok = rc == 0 && call_ok(&c) && c.got_end && c.exit_code == 0 && c.out_bytes == bytes;
	printf("{\"bytes\":%llu,\"errors\":%d,\"seconds\":%.4f,\"mib_s\":%.1f}\n",
	       (unsigned long long)c.out_bytes, !ok, dt, (double)c.out_bytes / dt / 1048576.0);
	call_reset(&c);
	return ok ? 0 : 1;
}

struct count_goal {
	int *counter, goal;
	int *closed, nclosed_goal;
};

static bool reached(void *arg)
{
	struct count_goal *g = arg;
	return *g->counter >= g->goal || (g->closed && *g->closed >= g->nclosed_goal);
}

struct settle {
	struct call *calls;
	int n;
};

/* Every call has its start event or has ended (with an error). */
static bool all_settled(void *arg)
{
	struct settle *st = arg;
	for (int i = 0; i < st->n; i++)
		if (!st->calls[i].got_start && !st->calls[i].closed)
			return false;
	return true;
}

/*
 * N idle Connect streams. envd caps the streams attached to one process
 * (128), so the streams are spread over quiet processes, 100 to each.
 */
static int cmd_idle(int port, pid_t envd, int n)
{
	int nown = (n + 99) / 100, nconn = (n + 499) / 500 + 1;
	struct h2 *hs = calloc((size_t)nconn, sizeof(*hs));
	struct call *calls = calloc((size_t)n, sizeof(*calls));
	struct call *owners = calloc((size_t)nown, sizeof(*owners));
	for (int i = 0; i < nconn; i++)
		h2_open(&hs[i], port);
	/* The processes the streams attach to: quiet, bounded by their own timer. */
	char *argv[] = {"/bin/sleep", "120"};
	for (int i = 0; i < nown; i++) {
		owners[i].proto = true;
		owners[i].path = "/process.Process/Start";
		owners[i].req = start_body(true, argv, 2, NULL, &owners[i].req_len);
		h2_submit(&hs[0], &owners[i], "application/connect+proto");
	}
	struct settle so = {owners, nown};
	double t0 = now_s();
	int rc = h2_pump(hs, nconn, all_settled, &so, t0 + 30, NULL, NULL);
	for (int i = 0; i < nown; i++)
		if (!owners[i].pid)
			rc = -1;
	if (rc < 0)
		die("start of the idle processes");
	usleep(100000);
	long rss_before = rss_kib(envd);
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		calls[i].proto = true;
		calls[i].path = "/process.Process/Connect";
		calls[i].req = connect_body(owners[i / 100].pid, &calls[i].req_len);
		h2_submit(&hs[1 + i / 500], &calls[i], "application/connect+proto");
	}
	struct settle sc = {calls, n};
	rc = h2_pump(hs, nconn, all_settled, &sc, now_s() + 60, NULL, NULL);
	double dt = now_s() - t0;
	/* Let envd settle, then read its footprint with every stream open. */
	usleep(200000);
	long rss = rss_kib(envd);
	int ok = 0;
	for (int i = 0; i < n; i++)
		ok += calls[i].got_start && !calls[i].closed && calls[i].status == 200;
	for (int i = 0; i < nown; i++)
		kill((pid_t)owners[i].pid, SIGKILL);
	printf("{\"streams\":%d,\"processes\":%d,\"errors\":%d,\"seconds\":%.3f,\"rss_kib\":%ld,"
	       "\"rss_before_kib\":%ld,\"kib_per_stream\":%.2f}\n",
	       n, nown, n - ok + (rc < 0), dt, rss, rss_before, n ? (double)(rss - rss_before) / n : 0.0);
	for (int i = 0; i < nconn; i++)
		h2_close(&hs[i]);
	for (int i = 0; i < n; i++)
		call_reset(&calls[i]);
	for (int i = 0; i < nown; i++)
		call_reset(&owners[i]);
	free(owners);
	free(calls);
	free(hs);
	return ok == n ? 0 : 1;
}

struct rss_probe {
	pid_t pid;
	long peak;
	double next;
};

static void rss_tick(void *arg)
{
	struct rss_probe *p = arg;
	double t = now_s();
	if (t < p->next)
		return;
	p->next = t + 0.02;
	long r = rss_kib(p->pid);
	if (r > p->peak)
		p->peak = r;
}

static int cmd_busy(int port, pid_t envd, int nproc, unsigned long long bytes)
{
	char count[32];
	snprintf(count, sizeof(count), "%llu", bytes);
	char *argv[] = {"/usr/bin/head", "-c", count, "/dev/zero"};
	int nconn = (nproc + 24) / 25;
	struct h2 *hs = calloc((size_t)nconn, sizeof(*hs));
	struct call *calls = calloc((size_t)nproc, sizeof(*calls));
	struct rss_probe probe = {envd, rss_kib(envd), 0};
	long rss_before = probe.peak;
	for (int i = 0; i < nconn; i++)
		h2_open(&hs[i], port);
	double t0 = now_s();
	for (int i = 0; i < nproc; i++) {
		calls[i].proto = true;
		calls[i].path = "/process.Process/Start";
		calls[i].req = start_body(true, argv, 4, NULL, &calls[i].req_len);
		h2_submit(&hs[i / 25], &calls[i], "application/connect+proto");
	}
	g_closed = 0;
	struct count_goal g = {&g_closed, nproc, NULL, 0};
	int rc = h2_pump(hs, nconn, reached, &g, t0 + DEADLINE_S, rss_tick, &probe);
	double dt = now_s() - t0;
	unsigned long long total = 0, gap_bytes = 0;
	int errors = rc < 0, gaps = 0, short_streams = 0;
	for (int i = 0; i < nproc; i++) {
		total += calls[i].out_bytes;
		gaps += calls[i].gaps;
		gap_bytes += calls[i].gap_bytes;
		short_streams += calls[i].out_bytes != bytes;
		errors += !(call_ok(&calls[i]) && calls[i].out_bytes == bytes && calls[i].exit_code == 0);
	}
	printf("{\"processes\":%d,\"errors\":%d,\"bytes\":%llu,\"expected_bytes\":%llu,\"short_streams\":%d,"
	       "\"gap_events\":%d,\"gap_bytes\":%llu,\"seconds\":%.3f,\"mib_s\":%.1f,"
	       "\"peak_rss_kib\":%ld,\"rss_before_kib\":%ld}\n",
	       nproc, errors, total, bytes * (unsigned long long)nproc, short_streams, gaps, gap_bytes, dt,
	       (double)total / dt / 1048576.0, probe.peak, rss_before);
	for (int i = 0; i < nconn; i++)
		h2_close(&hs[i]);
	for (int i = 0; i < nproc; i++)
		call_reset(&calls[i]);
	free(calls);
	free(hs);
	return errors ? 1 : 0;
}

/* N connections held open at once, one GET each; at most `window` in flight. */
static int cmd_conns(int port, pid_t server, int n, const char *path)
{
	enum { CONNECTING, SENT, DONE, FAILED };
	struct cst {
		int fd, state;
		double t0;
	} *cs = calloc((size_t)n, sizeof(*cs));
	double *lat = calloc((size_t)n, sizeof(double));
	char req[256];
	int rl = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int window = 256, inflight = 0, next = 0, done = 0, failed = 0, nlat = 0;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	double t_start = now_s(), deadline = t_start + 120;
	while (done + failed < n && now_s() < deadline) {
		while (next < n && inflight < window) {
			struct cst *c = &cs[next];
			c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			c->t0 = now_s();
			if (c->fd < 0 || (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)) {
				c->state = FAILED;
				failed++;
				next++;
				continue;
			}
			c->state = CONNECTING;
			struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)next};
			epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
			inflight++;
			next++;
		}
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 100);
		for (int i = 0; i < k; i++) {
			struct cst *c = &cs[evs[i].data.u32];
			if (c->state == CONNECTING) {
				int err = 0;
				socklen_t el = sizeof(err);
				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
				if (err || write(c->fd, req, (size_t)rl) != rl) {
					c->state = FAILED;
				} else {
					c->state = SENT;
					struct epoll_event ev = {.events = EPOLLIN, .data.u32 = evs[i].data.u32};
					epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
					continue;
				}
			} else if (c->state == SENT) {
				char buf[4096];
				ssize_t r = read(c->fd, buf, sizeof(buf) - 1);
				if (r < 0 && errno == EAGAIN)
					continue;
				int st = 0;
				if (r > 12) {
					buf[r] = 0;
					sscanf(buf, "HTTP/1.%*d %d", &st);
				}
				if (st >= 200 && st < 300) {
					c->state = DONE;
					lat[nlat++] = now_s() - c->t0;
				} else {
					c->state = FAILED;
				}
			}
			/* Keep the connection open: it counts toward the open total. */
			epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
			inflight--;
			if (c->state == DONE)
				done++;
			else
				failed++;
		}
	}
	double wall = now_s() - t_start;
	int open = 0;
	for (int i = 0; i < next; i++) {
		if (cs[i].state != DONE)
			continue;
		/* Still open on the server side? A closed peer reads EOF. */
		char b;
		ssize_t r = recv(cs[i].fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		open += r < 0 && errno == EAGAIN;
	}
	long rss = server > 0 ? rss_kib(server) : -1;
	printf("{\"connections\":%d,\"ok\":%d,\"errors\":%d,\"open_at_end\":%d,\"seconds\":%.3f,\"rps\":%.1f,"
	       "\"rss_kib\":%ld,",
	       n, done, n - done, open, wall, done / wall, rss);
	print_lat(lat, nlat);
	printf("}\n");
	for (int i = 0; i < next; i++)
		if (cs[i].fd > 0)
			close(cs[i].fd);
	close(ep);
	free(cs);
	free(lat);
	return done == n ? 0 : 1;
}

static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t l = sizeof(sa);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || getsockname(fd, (struct sockaddr *)&sa, &l) < 0)
		die("free port");
	close(fd);
	return ntohs(sa.sin_port);
}

/* One probe: true once the server answered (h1: an HTTP status line; h2: its SETTINGS). */
static bool probe_once(int port, bool h2)
{
	static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
	static const char get[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	int fd = tcp_connect(port);
	if (fd < 0)
		return false;
	bool ok = false;
	char buf[512];
	if (h2 ? write_all(fd, pre, sizeof(pre) - 1) : write_all(fd, get, sizeof(get) - 1))
		goto out;
	struct pollfd pf = {fd, POLLIN, 0};
	if (poll(&pf, 1, 2000) <= 0)
		goto out;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	if (r <= 0)
		goto out;
	buf[r] = 0;
	if (h2) {
		ok = r >= 9 && buf[3] == 4; /* a SETTINGS frame */
	} else {
		int st = 0;
		ok = sscanf(buf, "HTTP/1.%*d %d", &st) == 1 && st >= 200 && st < 300;
	}
out:
	close(fd);
	return ok;
}

static int cmd_exec_health(bool h2, int n, int argc, char **argv)
{
	double *lat = calloc((size_t)n, sizeof(double));
	int errors = 0;
	char portstr[16];
	char **args = calloc((size_t)argc + 1, sizeof(char *));
	for (int i = 0; i < n; i++) {
		int port = free_port();
		snprintf(portstr, sizeof(portstr), "%d", port);
		for (int a = 0; a < argc; a++)
			args[a] = strcmp(argv[a], "{PORT}") ? argv[a] : portstr;
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
		pid_t pid;
		double t0 = now_s(), t = t0;
		if (posix_spawn(&pid, args[0], &fa, NULL, args, environ) != 0)
			die("posix_spawn");
		posix_spawn_file_actions_destroy(&fa);
		bool ok = false;
		while (!ok && (t = now_s()) < t0 + 10) {
			ok = probe_once(port, h2);
			if (!ok)
				usleep(50);
		}
		lat[i] = now_s() - t0;
		errors += !ok;
		kill(pid, SIGTERM);
		int st;
		waitpid(pid, &st, 0);
	}
	printf("{\"n\":%d,\"errors\":%d,", n, errors);
	print_lat(lat, n);
	printf("}\n");
	free(args);
	free(lat);
	return errors ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: envdbench spawn N | pipe BYTES | rtt PORT N | start-h1|start-h2 PORT N |\n"
			"       stream-h1|stream-h2 PORT BYTES | idle PORT PID N | busy PORT PID NPROC BYTES |\n"
			"       conns PORT PID N PATH | exec-health h1|h2 N CMD [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3)
		usage();
	const char *m = argv[1];
	if (!strcmp(m, "spawn"))
		return cmd_spawn(atoi(argv[2]));
	if (!strcmp(m, "pipe"))
		return cmd_pipe(strtoull(argv[2], NULL, 10));
	if (!strcmp(m, "rtt") && argc == 4)
		return cmd_rtt(atoi(argv[2]), atoi(argv[3]));
	if (!strcmp(m, "start-h1") && argc == 4)
		return cmd_start(atoi(argv[2]), false, atoi(argv[3]));
	if (!strcmp(m, "start-h2") && argc == 4)
		return cmd_start(atoi(argv[2]), true, atoi(argv[3]));
	if (!strcmp(m, "stream-h1") && argc == 4)
		return cmd_stream(atoi(argv[2]), false, strtoull(argv[3], NULL, 10));
	if (!strcmp(m, "stream-h2") && argc == 4)
		return cmd_stream(atoi(argv[2]), true, strtoull(argv[3], NULL, 10));
	if (!strcmp(m, "idle") && argc == 5)
		return cmd_idle(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(m, "busy") && argc == 6)
		return cmd_busy(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), strtoull(argv[5], NULL, 10));
	if (!strcmp(m, "conns") && argc == 6)
		return cmd_conns(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5]);
	if (!strcmp(m, "exec-health") && argc >= 5)
		return cmd_exec_health(!strcmp(argv[2], "h2"), atoi(argv[3]), argc - 4, argv + 4);
	usage();
	return 2;
}
