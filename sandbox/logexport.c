/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logexport.c - ship every log line to the collector the metadata service
 * names (Firecracker mode), from a thread of its own.
 *
 * The loop only appends to a bounded queue under a mutex (never waits on
 * the network); one sender thread POSTs the lines one by one with a plain
 * blocking HTTP/1.1 client and a 10 s budget per line. A line the
 * collector did not take stays at the head and is retried with back-off,
 * so a collector that is down for a while gets the backlog when it comes
 * back, as far as the queue bound allows (oldest lines go first).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/log.h"
#include "sandbox/logexport.h"

size_t logexport_queue_max = LOGEXPORT_QUEUE_MAX;

struct item {
	struct item *next;
	size_t len;
	char data[];
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started;
	struct item *head, *tail;
	size_t bytes;
	char host[256], port[8], path[512];
	char *suffix;            /* ,"instanceID":"..","envID":".."} */
	size_t suffix_len;
	unsigned long long sent, dropped;
	bool inflight;           /* the sender is posting a line */
	time_t last_report;
} lx = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Wait until fd is ready for `ev` or the deadline passes. */
static int wait_fd(int fd, short ev, double deadline)
{
	for (;;) {
		double left = deadline - mono_s();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = ev };
		int rc = poll(&p, 1, (int)(left * 1000) + 1);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

/* One POST; 0 when the collector answered 2xx, else -errno / -EPROTO. */
static int post(const char *body, size_t n, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	double deadline = mono_s() + LOGEXPORT_TIMEOUT_S;
	char host[256], port[8], path[512], head[1024];
	int fd = -1, rc;

	pthread_mutex_lock(&lx.mu);
	memcpy(host, lx.host, sizeof(host));
	memcpy(port, lx.port, sizeof(port));
	memcpy(path, lx.path, sizeof(path));
	pthread_mutex_unlock(&lx.mu);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "resolve %.200s: %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		rc = -errno;
		goto out;
	}
	if ((rc = wait_fd(fd, POLLOUT, deadline)) < 0)
		goto out;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr) {
		rc = -soerr;
		goto out;
	}
	int hl = snprintf(head, sizeof(head),
			  "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			  path, host, port, n);
	const char *parts[2] = { head, body };
	size_t lens[2] = { (size_t)hl, n };
	for (int i = 0; i < 2; i++) {
		size_t off = 0;
		while (off < lens[i]) {
			ssize_t w = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
			if (w > 0) {
				off += (size_t)w;
				continue;
			}
			if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				if ((rc = wait_fd(fd, POLLOUT, deadline)) < 0)
					goto out;
				continue;
			}
			rc = w < 0 ? -errno : -EPIPE;
			goto out;
		}
	}
	char resp[64];
	size_t got = 0;
	while (got < 12) {
		ssize_t r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			if ((rc = wait_fd(fd, POLLIN, deadline)) < 0)
				goto out;
			continue;
		}
		rc = r < 0 ? -errno : -EPROTO;
		goto out;
	}
	resp[got] = '\0';
	if (strncmp(resp, "HTTP/1.", 7) != 0 || resp[9] != '2') {
		snprintf(err, errlen, "collector answered %.12s", resp);
		rc = -EPROTO;
		goto out;
	}
	rc = 0;
out:
	if (rc < 0 && rc != -EPROTO)
		snprintf(err, errlen, "post to %.200s:%s: %s", host, port, strerror(-rc));
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

static void *sender(void *arg)
{
	double backoff = 0;
	char err[640];

	for (;;) {
		pthread_mutex_lock(&lx.mu);
		while (!lx.head || !lx.suffix)
			pthread_cond_wait(&lx.cv, &lx.mu);
		struct item *it = lx.head;
		lx.head = it->next;
		if (!lx.head)
			lx.tail = NULL;
		lx.bytes -= it->len;
		lx.inflight = true;
		size_t blen = it->len - 1 + lx.suffix_len;
		char *body = malloc(blen);
		if (body) {
			memcpy(body, it->data, it->len - 1);
			memcpy(body + it->len - 1, lx.suffix, lx.suffix_len);
		}
		pthread_mutex_unlock(&lx.mu);

		int rc = -ENOMEM;
		if (body)
			rc = post(body, blen, err, sizeof(err));
		else
			snprintf(err, sizeof(err), "out of memory");
		free(body);
		pthread_mutex_lock(&lx.mu);
		lx.inflight = false;
		if (rc == 0) {
			lx.sent++;
			free(it);
			backoff = 0;
			pthread_mutex_unlock(&lx.mu);
			continue;
		}
		/* Back at the head, unless newer lines already fill the queue. */
		if (lx.bytes + it->len <= logexport_queue_max) {
			it->next = lx.head;
			lx.head = it;
			if (!lx.tail)
				lx.tail = it;
			lx.bytes += it->len;
		} else {
			lx.dropped++;
			free(it);
		}
		time_t now = time(NULL);
		bool report = now - lx.last_report >= LOGEXPORT_REPORT_S;
		if (report)
			lx.last_report = now;
		unsigned long long waiting = lx.bytes;
		pthread_mutex_unlock(&lx.mu);
		if (report)
			fprintf(stderr, "log exporter: %s (%llu bytes waiting; next report in %d s at the earliest)\n",
				err, waiting, LOGEXPORT_REPORT_S);
		backoff = backoff ? backoff * 2 : 0.1;
		if (backoff > 5)
			backoff = 5;
		struct timespec ts = { (time_t)backoff, (long)((backoff - (double)(time_t)backoff) * 1e9) };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* The log sink: runs on whichever thread logs; never waits on I/O. */
static void sink(const char *line, size_t n)
{
	pthread_mutex_lock(&lx.mu);
	if (n < 2 || line[n - 1] != '}') {
		pthread_mutex_unlock(&lx.mu);
		return;
	}
	/* Kept as logged; the ids are added when it is sent (they may not be
	 * known yet: lines from start-up wait for the metadata service). */
	size_t len = n;
	if (len > LOGEXPORT_LINE_MAX || len > logexport_queue_max) {
		lx.dropped++;
		pthread_mutex_unlock(&lx.mu);
		return;
	}
	struct item *it = malloc(sizeof(*it) + len);
	if (!it) {
		lx.dropped++;
		pthread_mutex_unlock(&lx.mu);
		return;
	}
	it->next = NULL;
	it->len = len;
	memcpy(it->data, line, n);
	while (lx.head && lx.bytes + len > logexport_queue_max) {
		struct item *old = lx.head;
		lx.head = old->next;
		if (!lx.head)
			lx.tail = NULL;
		lx.bytes -= old->len;
		lx.dropped++;
		free(old);
	}
	if (lx.tail)
		lx.tail->next = it;
	else
		lx.head = it;
	lx.tail = it;
	lx.bytes += len;
	pthread_cond_signal(&lx.cv);
	pthread_mutex_unlock(&lx.mu);
}

int logexport_parse_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen, char *path,
			size_t pathlen)
{
	const char *p;

	if (strncmp(url, "http://", 7) != 0)
		return -EINVAL;
	p = url + 7;
	size_t hl = strcspn(p, "/?#");
	const char *hp = p, *colon;
	if (hl == 0)
		return -EINVAL;
	if (*hp == '[') {
		const char *rb = memchr(hp, ']', hl);
		if (!rb)
			return -EINVAL;
		if ((size_t)(rb - hp - 1) >= hostlen)
			return -EINVAL;
		snprintf(host, hostlen, "%.*s", (int)(rb - hp - 1), hp + 1);
		colon = rb + 1 < hp + hl && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(hp, ':', hl);
		size_t n = colon ? (size_t)(colon - hp) : hl;
		if (n == 0 || n >= hostlen)
			return -EINVAL;
		snprintf(host, hostlen, "%.*s", (int)n, hp);
	}
	if (colon) {
		size_t n = (size_t)(hp + hl - colon - 1);
		if (n == 0 || n >= portlen || strspn(colon + 1, "0123456789") < n)
			return -EINVAL;
		snprintf(port, portlen, "%.*s", (int)n, colon + 1);
	} else {
		snprintf(port, portlen, "80");
	}
	snprintf(path, pathlen, "%s", p[hl] == '/' ? p + hl : "/");
	if (p[hl] == '?')
		snprintf(path, pathlen, "/%s", p + hl);
	return 0;
}

int logexport_configure(const char *address, const char *instance_id, const char *env_id)
{
	char host[256], port[8], path[512];
	int rc = logexport_parse_url(address, host, sizeof(host), port, sizeof(port), path, sizeof(path));

	if (rc < 0) {
		fprintf(stderr, "log exporter: unusable collector address \"%s\"\n", address);
		return rc;
	}
	json_t *o = json_pack("{s:s,s:s}", "instanceID", instance_id, "envID", env_id);
	char *js = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!js)
		return -ENOMEM;
	/* js is {"instanceID":..,"envID":..}: appended as ,<members>} */
	size_t jl = strlen(js);
	js[0] = ',';
	pthread_mutex_lock(&lx.mu);
	memcpy(lx.host, host, sizeof(host));
	memcpy(lx.port, port, sizeof(port));
	memcpy(lx.path, path, sizeof(path));
	free(lx.suffix);
	lx.suffix = js;
	lx.suffix_len = jl;
	bool start = !lx.started;
	lx.started = true;
	pthread_cond_signal(&lx.cv);
	pthread_mutex_unlock(&lx.mu);
	if (start) {
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 256 * 1024);
		rc = pthread_create(&t, &at, sender, NULL);
		pthread_attr_destroy(&at);
		if (rc != 0) {
			pthread_mutex_lock(&lx.mu);
			lx.started = false;
			pthread_mutex_unlock(&lx.mu);
			return -rc;
		}
		log_sink = sink;
		log_info("envd", "exporting logs to %s", address);
	}
	return 0;
}

void logexport_stats(unsigned long long *sent, unsigned long long *dropped, size_t *queued)
{
	pthread_mutex_lock(&lx.mu);
	*sent = lx.sent;
	*dropped = lx.dropped;
	*queued = lx.bytes;
	pthread_mutex_unlock(&lx.mu);
}

bool logexport_idle(void)
{
	pthread_mutex_lock(&lx.mu);
	bool idle = !lx.started || (!lx.head && !lx.inflight);
	pthread_mutex_unlock(&lx.mu);
	return idle;
}

void logexport_hold(void)
{
	log_sink = sink;
}

void logexport_release(void)
{
	pthread_mutex_lock(&lx.mu);
	if (lx.started) {
		pthread_mutex_unlock(&lx.mu);
		return;
	}
	log_sink = NULL;
	while (lx.head) {
		struct item *it = lx.head;
		lx.head = it->next;
		free(it);
	}
	lx.tail = NULL;
	lx.bytes = 0;
	pthread_mutex_unlock(&lx.mu);
}
