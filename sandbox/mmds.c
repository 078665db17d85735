/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mmds.c - a tiny HTTP/1.1 client for the metadata service, on the loop.
 *
 * Two sequential requests, each on its own connection (the reference uses
 * no keep-alive): the session token, then the metadata JSON. Responses are
 * parsed with http-parser and jansson; the body is bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>
#include <jansson.h>

#include "base/buf.h"
#include "base/child.h"
#include "base/log.h"
#include "base/loop.h"
#include "sandbox/logexport.h"
#include "sandbox/mmds.h"
#include "base/state.h"
#include "base/worker.h"

char mmds_addr[64] = "169.254.169.254:80";

#define MMDS_MAX_BODY 65536

struct mmds_fetch {
	void (*cb)(void *ud, int rc, const struct mmds_meta *m);
	void *ud;
	int step;            /* 0: token, 1: metadata */
	int fd;
	ev_io io;
	ev_timer timeout;
	char req[1024];
	size_t req_len, req_off;
	http_parser parser;
	int status;
	bool complete;
	struct buf body; /* bounded by MMDS_MAX_BODY */
	char token[512];
};

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct mmds_fetch *f = p->data;
	return buf_append(&f->body, at, n) < 0 ? -1 : 0;
}

static int on_complete(http_parser *p)
{
	struct mmds_fetch *f = p->data;
	f->status = p->status_code;
	f->complete = true;
	return 0;
}

static const http_parser_settings settings = {.on_body = on_body, .on_message_complete = on_complete};

static void fetch_close_fd(struct mmds_fetch *f)
{
	if (f->fd >= 0) {
		ev_io_stop(envd_loop, &f->io);
		close(f->fd);
		f->fd = -1;
	}
}

static void fetch_free(struct mmds_fetch *f)
{
	fetch_close_fd(f);
	ev_timer_stop(envd_loop, &f->timeout);
	buf_free(&f->body);
	free(f);
}

static void fetch_done(struct mmds_fetch *f, int rc, const struct mmds_meta *m)
{
	void (*cb)(void *, int, const struct mmds_meta *) = f->cb;
	void *ud = f->ud;
	fetch_free(f);
	cb(ud, rc, m);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents);

static int fetch_connect(struct mmds_fetch *f)
{
	char host[64];
	snprintf(host, sizeof(host), "%s", mmds_addr);
	char *colon = strrchr(host, ':');
	int port = 80;
	if (colon) {
		*colon = '\0';
		port = atoi(colon + 1);
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return -EINVAL;
	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (f->fd < 0)
		return -errno;
	if (connect(f->fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		fetch_close_fd(f);
		return -e;
	}
	if (f->step == 0)
		f->req_len = (size_t)snprintf(f->req, sizeof(f->req),
					      "PUT /latest/api/token HTTP/1.1\r\nHost: %s\r\n"
					      "X-metadata-token-ttl-seconds: 60\r\nContent-Length: 0\r\n"
					      "Connection: close\r\n\r\n", host);
	else
		f->req_len = (size_t)snprintf(f->req, sizeof(f->req),
					      "GET / HTTP/1.1\r\nHost: %s\r\nX-metadata-token: %s\r\n"
					      "Accept: application/json\r\nConnection: close\r\n\r\n", host, f->token);
	f->req_off = 0;
	http_parser_init(&f->parser, HTTP_RESPONSE);
	f->parser.data = f;
	f->complete = false;
	f->status = 0;
	buf_free(&f->body);
	ev_io_init(&f->io, io_cb, f->fd, EV_WRITE);
	f->io.data = f;
	ev_io_start(envd_loop, &f->io);
	return 0;
}

static void parse_meta(struct mmds_fetch *f)
{
	struct mmds_meta m;
	json_error_t je;
	memset(&m, 0, sizeof(m));
	json_t *o = f->body.p ? json_loads((const char *)f->body.p, 0, &je) : NULL;
	if (!o || !json_is_object(o)) {
		json_decref(o);
		fetch_done(f, -EBADMSG, NULL);
		return;
	}
	struct { const char *k; char *dst; size_t n; } fields[] = {
		{"instanceID", m.instance_id, sizeof(m.instance_id)},
		{"envID", m.env_id, sizeof(m.env_id)},
		{"address", m.address, sizeof(m.address)},
		{"accessTokenHash", m.token_hash, sizeof(m.token_hash)},
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		json_t *v = json_object_get(o, fields[i].k);
		if (json_is_string(v))
			snprintf(fields[i].dst, fields[i].n, "%s", json_string_value(v));
	}
	json_decref(o);
	fetch_done(f, 0, &m);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mmds_fetch *f = w->data;

	if (revents & EV_WRITE) {
		ssize_t n = send(f->fd, f->req + f->req_off, f->req_len - f->req_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINPROGRESS)
				return;
			fetch_done(f, -errno, NULL);
			return;
		}
		f->req_off += (size_t)n;
		if (f->req_off == f->req_len) {
			ev_io_stop(envd_loop, &f->io);
			ev_io_set(&f->io, f->fd, EV_READ);
			ev_io_start(envd_loop, &f->io);
		}
		return;
	}
	char buf[4096];
	ssize_t n = read(f->fd, buf, sizeof(buf));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0) {
		fetch_done(f, -errno, NULL);
		return;
	}
	size_t k = http_parser_execute(&f->parser, &settings, buf, (size_t)n);
	if (k != (size_t)n && !f->complete) {
		fetch_done(f, -EBADMSG, NULL);
		return;
	}
	if (!f->complete) {
		if (n == 0)
			fetch_done(f, -ECONNRESET, NULL);
		return;
	}
	fetch_close_fd(f);
	if (f->status != 200) {
		fetch_done(f, -EIO, NULL);
		return;
	}
	if (f->step == 0) {
		/* An empty session token is a failure, as in the reference. */
		size_t tl = f->body.len;
		while (tl > 0 && (f->body.p[tl - 1] == '\n' || f->body.p[tl - 1] == '\r'))
			tl--;
		if (tl == 0 || tl >= sizeof(f->token)) {
			fetch_done(f, -EIO, NULL);
			return;
		}
		memcpy(f->token, f->body.p, tl);
		f->token[tl] = '\0';
		f->step = 1;
		int rc = fetch_connect(f);
		if (rc < 0)
			fetch_done(f, rc, NULL);
		return;
	}
	parse_meta(f);
}

static void timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	fetch_done(w->data, -ETIMEDOUT, NULL);
}

struct mmds_fetch *mmds_fetch(void (*cb)(void *ud, int rc, const struct mmds_meta *m), void *ud)
{
	struct mmds_fetch *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->cb = cb;
	f->ud = ud;
	f->fd = -1;
	buf_init(&f->body, MMDS_MAX_BODY);
	if (fetch_connect(f) < 0) {
		free(f);
		return NULL;
	}
	ev_timer_init(&f->timeout, timeout_cb, 10., 0.);
	f->timeout.data = f;
	ev_timer_start(envd_loop, &f->timeout);
	return f;
}

void mmds_cancel(struct mmds_fetch *f)
{
	if (f)
		fetch_free(f);
}

/* ---- the ids poller ---- */

static ev_timer poll_timer;
static ev_tstamp poll_deadline;
static struct mmds_fetch *poll_pending;

static void write_id_file(const char *name, const char *value)
{
	char path[128];
	snprintf(path, sizeof(path), "/run/e2b/%s", name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return;
	if (write(fd, value, strlen(value)) < 0)
		log_warn("envd", "write %s: %s", path, strerror(errno));
	fchmod(fd, 0666);
	close(fd);
}

static void poll_done(void *ud, int rc, const struct mmds_meta *m)
{
	poll_pending = NULL;
	if (rc == 0) {
		envstore_set_internal("E2B_SANDBOX_ID", m->instance_id);
		envstore_set_internal("E2B_TEMPLATE_ID", m->env_id);
		write_id_file(".E2B_SANDBOX_ID", m->instance_id);
		write_id_file(".E2B_TEMPLATE_ID", m->env_id);
		if (m->address[0])
			logexport_configure(m->address, m->instance_id, m->env_id);
		else
			logexport_release();
		return;
	}
	if (poll_deadline > 0 && ev_now(envd_loop) >= poll_deadline)
		return;
	ev_timer_set(&poll_timer, 0.05, 0.);
	ev_timer_start(envd_loop, &poll_timer);
}

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	poll_pending = mmds_fetch(poll_done, NULL);
	if (!poll_pending && (poll_deadline == 0 || ev_now(envd_loop) < poll_deadline)) {
		ev_timer_set(&poll_timer, 0.05, 0.);
		ev_timer_start(envd_loop, &poll_timer);
	}
}

void mmds_poll_ids(double bound_s)
{
	ev_timer_stop(envd_loop, &poll_timer);
	if (poll_pending) {
		mmds_cancel(poll_pending);
		poll_pending = NULL;
	}
	poll_deadline = bound_s > 0 ? ev_now(envd_loop) + bound_s : 0;
	ev_timer_init(&poll_timer, poll_cb, 0., 0.);
	ev_timer_start(envd_loop, &poll_timer);
}

/* ---- route self-heal ---- */

const char *mmds_iptables_bin = "iptables";

struct heal_job {
	char ip[64], port[8];
	void (*done)(void *ud);
	void *ud;
	int failures;
	char err[256];
};

static bool heal_running;

/* iptables waits up to 5 s for the xtables lock (-w 5); this bounds the
 * rest. */
#define MMDS_IPTABLES_S 30

/* Run iptables with argv; 0 on exit status 0. Worker thread. */
static int run_iptables(char *const argv[])
{
	int rc = child_run(argv, child_now() + MMDS_IPTABLES_S, NULL, 0, 0);
	return rc < 0 ? rc : rc == 0 ? 0 : -EIO;
}

static void heal_work(void *arg)
{
	struct heal_job *j = arg;
	static const char *const chains[] = {"PREROUTING", "OUTPUT"};

	for (size_t i = 0; i < 2; i++) {
		char *del[] = {(char *)mmds_iptables_bin, "-w", "5", "-t", "nat", "-D", (char *)chains[i], "-d", j->ip,
			       "-p", "tcp", "--dport", j->port, "-j", "RETURN", NULL};
		char *ins[] = {(char *)mmds_iptables_bin, "-w", "5", "-t", "nat", "-I", (char *)chains[i], "1", "-d",
			       j->ip, "-p", "tcp", "--dport", j->port, "-j", "RETURN", NULL};
		run_iptables(del); /* absent is fine */
		int rc = run_iptables(ins);
		if (rc < 0) {
			j->failures++;
			snprintf(j->err, sizeof(j->err), "iptables -t nat -I %s: %s", chains[i],
				 rc == -EIO ? "failed" : strerror(-rc));
		}
	}
}

static void heal_done(void *arg)
{
	static double last_report;
	struct heal_job *j = arg;

	heal_running = false;
	if (j->failures && ev_now(envd_loop) - last_report >= 10.) {
		last_report = ev_now(envd_loop);
		log_warn("envd", "metadata route self-heal: %s", j->err);
	} else if (!j->failures) {
		log_info("envd", "metadata route re-pinned: %s:%s bypasses nat", j->ip, j->port);
	}
	if (j->done)
		j->done(j->ud);
	free(j);
}

int mmds_heal_route(void (*done)(void *ud), void *ud)
{
	struct heal_job *j;
	const char *colon = strrchr(mmds_addr, ':');

	if (heal_running)
		return -EALREADY;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	snprintf(j->ip, sizeof(j->ip), "%.*s", colon ? (int)(colon - mmds_addr) : (int)strlen(mmds_addr), mmds_addr);
	snprintf(j->port, sizeof(j->port), "%s", colon ? colon + 1 : "80");
	j->done = done;
	j->ud = ud;
	int rc = worker_submit(heal_work, heal_done, j);
	if (rc < 0) {
		free(j);
		return rc;
	}
	heal_running = true;
	return 0;
}
