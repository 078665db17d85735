/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guestrtt - Start round trips measured inside a sandbox (the VM), where
 * the bench's own client (nghttp2, protobuf-c) is not installed. Static,
 * no dependencies: HTTP/1.1 with Connect JSON, as the SDK speaks it.
 *
 *   guestrtt seq PORT_A PORT_B N    N Starts of /bin/true on each server,
 *                                   one at a time on a keep-alive connection,
 *                                   A and B alternating on every iteration
 *   guestrtt burst PORT_A PORT_B C R
 *                                   C concurrent Starts (one connection each,
 *                                   opened beforehand), A then B, R rounds
 *
 * Prints one JSON line: for each server the median and p99 (seq) or the
 * median wall time of a burst and its slowest call (burst), and errors (a
 * call without a start event, an end event with exit code 0 and a clean
 * end of stream).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
	int fd, port;
	char buf[64 * 1024];
	size_t off, len;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int dial(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int fill(struct conn *c)
{
	ssize_t r;

	if (c->off == c->len)
		c->off = c->len = 0;
	if (c->len == sizeof(c->buf)) {
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	do
		r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return -1;
	c->len += (size_t)r;
	return 0;
}

static int line(struct conn *c, char *out, size_t cap)
{
	for (;;) {
		char *nl = memchr(c->buf + c->off, '\n', c->len - c->off);

		if (nl) {
			size_t l = (size_t)(nl - (c->buf + c->off));
			size_t k = l > 0 && nl[-1] == '\r' ? l - 1 : l;

			if (k >= cap)
				k = cap - 1;
			memcpy(out, c->buf + c->off, k);
			out[k] = 0;
			c->off += l + 1;
			return 0;
		}
		if (fill(c) < 0)
			return -1;
	}
}

/* Append n body bytes to body (bounded). */
static int body(struct conn *c, size_t n, char *b, size_t *bl, size_t cap)
{
	while (n > 0) {
		if (c->off == c->len && fill(c) < 0)
			return -1;
		size_t k = c->len - c->off < n ? c->len - c->off : n;
		size_t room = cap - *bl;

		memcpy(b + *bl, c->buf + c->off, k < room ? k : room);
		*bl += k < room ? k : room;
		c->off += k;
		n -= k;
	}
	return 0;
}

static const char req_json[] = "{\"process\":{\"cmd\":\"/bin/true\"},\"stdin\":false}";

/* One Start of /bin/true; 0 when it started, ended with exit 0 and closed cleanly. */
static int start_call(struct conn *c)
{
	char head[512], ln[1024], b[16384];
	size_t bl = 0, jl = sizeof(req_json) - 1;
	unsigned char env[5] = {0, (unsigned char)(jl >> 24), (unsigned char)(jl >> 16),
				(unsigned char)(jl >> 8), (unsigned char)jl};
	bool chunked = false;
	long clen = -1;
	int status = 0;

	if (c->fd < 0) {
		c->fd = dial(c->port);
		c->off = c->len = 0;
		if (c->fd < 0)
			return -1;
	}
	int hl = snprintf(head, sizeof(head),
			  "POST /process.Process/Start HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			  "Content-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\n"
			  "Content-Length: %zu\r\n\r\n",
			  jl + 5);
	char msg[1024];

	memcpy(msg, head, (size_t)hl);
	memcpy(msg + hl, env, 5);
	memcpy(msg + hl + 5, req_json, jl);
	if (write(c->fd, msg, (size_t)hl + 5 + jl) != (ssize_t)((size_t)hl + 5 + jl))
		goto broken;
	if (line(c, ln, sizeof(ln)) < 0 || sscanf(ln, "HTTP/1.1 %d", &status) != 1)
		goto broken;
	for (;;) {
		if (line(c, ln, sizeof(ln)) < 0)
			goto broken;
		if (!ln[0])
			break;
		if (!strncasecmp(ln, "transfer-encoding:", 18) && strcasestr(ln, "chunked"))
			chunked = true;
		else if (!strncasecmp(ln, "content-length:", 15))
			clen = atol(ln + 15);
	}
	if (chunked) {
		for (;;) {
			if (line(c, ln, sizeof(ln)) < 0)
				goto broken;
			size_t n = strtoul(ln, NULL, 16);

			if (n == 0) {
				do
					if (line(c, ln, sizeof(ln)) < 0)
						goto broken;
				while (ln[0]);
				break;
			}
			if (body(c, n, b, &bl, sizeof(b) - 1) < 0 || line(c, ln, sizeof(ln)) < 0)
				goto broken;
		}
	} else if (clen >= 0) {
		if (body(c, (size_t)clen, b, &bl, sizeof(b) - 1) < 0)
			goto broken;
	} else {
		goto broken;
	}
	b[bl] = 0;
	/* Walk the envelopes: a start, an end with exit 0, a clean end of stream. */
	bool got_start = false, got_end = false, clean = false;

	for (size_t o = 0; o + 5 <= bl;) {
		unsigned fl = (unsigned char)b[o];
		size_t n = ((size_t)(unsigned char)b[o + 1] << 24) | ((size_t)(unsigned char)b[o + 2] << 16) |
			   ((size_t)(unsigned char)b[o + 3] << 8) | (unsigned char)b[o + 4];
		char save;

		if (o + 5 + n > bl)
			break;
		save = b[o + 5 + n];
		b[o + 5 + n] = 0;
		if (fl & 2)
			clean = !strstr(b + o + 5, "\"error\"");
		else if (strstr(b + o + 5, "\"start\""))
			got_start = true;
		else if (strstr(b + o + 5, "\"end\""))
			got_end = strstr(b + o + 5, "\"exited\":true") && !strstr(b + o + 5, "\"exitCode\"");
		b[o + 5 + n] = save;
		o += 5 + n;
	}
	return status == 200 && got_start && got_end && clean ? 0 : -1;
broken:
	close(c->fd);
	c->fd = -1;
	return -1;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	int i = (int)(p * (n - 1) + 0.5);

	qsort(v, (size_t)n, sizeof(double), cmpd);
	return n ? v[i] : 0;
}

static int seq(int pa, int pb, int n)
{
	struct conn *c[2];
	double *lat[2];
	int err[2] = {0, 0}, port[2] = {pa, pb};

	for (int s = 0; s < 2; s++) {
		c[s] = calloc(1, sizeof(struct conn));
		lat[s] = calloc((size_t)n, sizeof(double));
		if (!c[s] || !lat[s])
			return 1;
		c[s]->fd = -1;
		c[s]->port = port[s];
	}
	for (int i = -5; i < n; i++) {
		for (int s = 0; s < 2; s++) {
			double t0 = now_ms();
			int rc = start_call(c[s]);
			double dt = now_ms() - t0;

			if (i < 0)
				continue;
			lat[s][i] = dt;
			if (rc < 0)
				err[s]++;
		}
	}
	printf("{\"mode\":\"seq\",\"n\":%d", n);
	for (int s = 0; s < 2; s++)
		printf(",\"%s\":{\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"errors\":%d}", s ? "b" : "a",
		       pct(lat[s], n, 0.5), pct(lat[s], n, 0.99), err[s]);
	printf("}\n");
	return err[0] || err[1];
}

struct job {
	struct conn c;
	double t_go, dt;
	int rc;
	pthread_barrier_t *bar;
};

static void *burst_one(void *arg)
{
	struct job *j = arg;

	pthread_barrier_wait(j->bar);
	j->rc = start_call(&j->c);
	j->dt = now_ms() - j->t_go;
	return NULL;
}

/* C calls at once against port; wall time of the burst, slowest call, errors. */
static int burst_round(int port, int nc, double *wall, double *slowest)
{
	struct job *jobs = calloc((size_t)nc, sizeof(*jobs));
	pthread_t *th = calloc((size_t)nc, sizeof(*th));
	pthread_barrier_t bar;
	int errors = 0;
	double t0;

	if (!jobs || !th)
		return nc;
	pthread_barrier_init(&bar, NULL, (unsigned)nc + 1);
	for (int i = 0; i < nc; i++) {
		jobs[i].c.port = port;
		jobs[i].c.fd = dial(port);
		jobs[i].bar = &bar;
	}
	for (int i = 0; i < nc; i++)
		pthread_create(&th[i], NULL, burst_one, &jobs[i]);
	t0 = now_ms();
	for (int i = 0; i < nc; i++)
		jobs[i].t_go = t0;
	pthread_barrier_wait(&bar);
	*slowest = 0;
	for (int i = 0; i < nc; i++) {
		pthread_join(th[i], NULL);
		if (jobs[i].rc < 0)
			errors++;
		if (jobs[i].dt > *slowest)
			*slowest = jobs[i].dt;
		if (jobs[i].c.fd >= 0)
			close(jobs[i].c.fd);
	}
	*wall = now_ms() - t0;
	pthread_barrier_destroy(&bar);
	free(jobs);
	free(th);
	return errors;
}

static int burst(int pa, int pb, int nc, int rounds)
{
	double wall[2][64], slow[2][64];
	int err[2] = {0, 0}, port[2] = {pa, pb};

	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++)
		for (int s = 0; s < 2; s++)
			err[s] += burst_round(port[s], nc, &wall[s][r], &slow[s][r]);
	printf("{\"mode\":\"burst\",\"concurrent\":%d,\"rounds\":%d", nc, rounds);
	for (int s = 0; s < 2; s++)
		printf(",\"%s\":{\"wall_p50_ms\":%.1f,\"slowest_ms\":%.1f,\"errors\":%d}", s ? "b" : "a",
		       pct(wall[s], rounds, 0.5), pct(slow[s], rounds, 1.0), err[s]);
	printf("}\n");
	return err[0] || err[1];
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "seq"))
		return seq(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "burst"))
		return burst(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	fprintf(stderr, "usage: guestrtt seq PORT_A PORT_B N | burst PORT_A PORT_B CONCURRENT ROUNDS\n");
	return 2;
}
