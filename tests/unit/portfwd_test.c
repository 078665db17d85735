/* SPDX-License-Identifier: Apache-2.0 */
/* The port forwarder: listener parsing (procfs, sock_diag), selection, and
 * a relay on the real event loop inside a private network namespace. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/loop.h"
#include "sandbox/portfwd.h"

static const char proc_tcp[] =
	"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	"   0: 0100007F:0FA7 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0 100 0 0 10 0\n"
	"   1: 00000000:C2CF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1235 1 0 100 0 0 10 0\n"
	"   2: 0100007F:0FA7 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1236 1 0 100 0 0 10 0\n"
	"   3: 0200007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1237 1 0 100 0 0 10 0\n"
	"garbage line\n"
	"   4: 150000A9:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1238 1 0 100 0 0 10 0";

static const char proc_tcp6[] =
	"  sl  local_address                         remote_address                        st\n"
	"   0: 00000000000000000000000001000000:1F40 00000000000000000000000000000000:0000 0A 0 0\n"
	"   1: 0000000000000000FFFF00000100007F:1F41 00000000000000000000000000000000:0000 0A 0 0\n"
	"   2: 00000000000000000000000000000000:1F42 00000000000000000000000000000000:0000 0A 0 0\n";

static struct portfwd_sock v4(const char *a, uint16_t port)
{
	struct portfwd_sock s = {.family = AF_INET, .port = port};
	cr_assert_eq(inet_pton(AF_INET, a, s.addr), 1);
	return s;
}

static struct portfwd_sock v6(const char *a, uint16_t port)
{
	struct portfwd_sock s = {.family = AF_INET6, .port = port};
	cr_assert_eq(inet_pton(AF_INET6, a, s.addr), 1);
	return s;
}

Test(portfwd, parse_proc_tcp_keeps_listeners_only)
{
	struct portfwd_sock out[8];
	size_t n = 0;
	int k = portfwd_parse_proc(proc_tcp, strlen(proc_tcp), AF_INET, out, 8, &n);
	cr_assert_eq(k, 4);
	cr_assert_eq(n, 4);
	struct portfwd_sock lo = v4("127.0.0.1", 4007), any = v4("0.0.0.0", 49871);
	cr_assert_eq(memcmp(&out[0], &lo, sizeof(lo)), 0);
	cr_assert_eq(memcmp(&out[1], &any, sizeof(any)), 0);
	cr_assert_eq(out[2].port, 8080);
	cr_assert_eq(out[2].addr[3], 2, "127.0.0.2");
	cr_assert_eq(out[3].port, 80);
	cr_assert_eq(out[3].addr[0], 169, "last line without newline is parsed");
	cr_assert(portfwd_is_loopback(&out[0]));
	cr_assert_not(portfwd_is_loopback(&out[1]));
	cr_assert_not(portfwd_is_loopback(&out[2]), "only 127.0.0.1 exactly, as the reference");
}

Test(portfwd, parse_proc_tcp6_and_mapped)
{
	struct portfwd_sock out[8];
	size_t n = 0;
	cr_assert_eq(portfwd_parse_proc(proc_tcp6, strlen(proc_tcp6), AF_INET6, out, 8, &n), 3);
	struct portfwd_sock lo = v6("::1", 8000), mapped = v6("::ffff:127.0.0.1", 8001);
	cr_assert_eq(memcmp(&out[0], &lo, sizeof(lo)), 0);
	cr_assert_eq(memcmp(&out[1], &mapped, sizeof(mapped)), 0);
	cr_assert(portfwd_is_loopback(&out[0]));
	cr_assert(portfwd_is_loopback(&out[1]), "::ffff:127.0.0.1 counts as 127.0.0.1");
	cr_assert_not(portfwd_is_loopback(&out[2]));
}

Test(portfwd, parse_proc_bounds_and_bad_family)
{
	struct portfwd_sock out[2];
	size_t n = 0;
	cr_assert_eq(portfwd_parse_proc(proc_tcp, strlen(proc_tcp), AF_INET, out, 2, &n), 2);
	cr_assert_eq(n, 2, "never writes past max");
	cr_assert_eq(portfwd_parse_proc(proc_tcp, strlen(proc_tcp), AF_UNIX, out, 2, &n), -EINVAL);
	n = 0;
	cr_assert_eq(portfwd_parse_proc("", 0, AF_INET, out, 2, &n), 0);
	const char cut[] = "   0: 0100007F:0F";
	cr_assert_eq(portfwd_parse_proc(cut, strlen(cut), AF_INET, out, 2, &n), 0, "truncated line ignored");
}

/* Build a dump buffer: one message per socket, then NLMSG_DONE. */
static size_t diag_buf(uint8_t *buf, size_t cap, const struct portfwd_sock *s, size_t n, uint8_t state)
{
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		struct nlmsghdr *h = (struct nlmsghdr *)(buf + off);
		size_t len = NLMSG_LENGTH(sizeof(struct inet_diag_msg));
		cr_assert(off + NLMSG_ALIGN(len) <= cap);
		memset(h, 0, NLMSG_ALIGN(len));
		h->nlmsg_len = (uint32_t)len;
		h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
		struct inet_diag_msg *m = NLMSG_DATA(h);
		m->idiag_family = s[i].family;
		m->idiag_state = state;
		m->id.idiag_sport = htons(s[i].port);
		memcpy(m->id.idiag_src, s[i].addr, 16);
		off += NLMSG_ALIGN(len);
	}
	struct nlmsghdr *d = (struct nlmsghdr *)(buf + off);
	memset(d, 0, NLMSG_LENGTH(4));
	d->nlmsg_len = NLMSG_LENGTH(4);
	d->nlmsg_type = NLMSG_DONE;
	return off + NLMSG_ALIGN(d->nlmsg_len);
}

Test(portfwd, parse_diag_dump)
{
	uint8_t buf[4096] __attribute__((aligned(8)));
	struct portfwd_sock in[3] = {v4("127.0.0.1", 3000), v6("::1", 3001), v4("0.0.0.0", 3002)};
	size_t len = diag_buf(buf, sizeof(buf), in, 3, 10 /* TCP_LISTEN */);
	struct portfwd_sock out[4];
	size_t n = 0;
	bool done = false;
	cr_assert_eq(portfwd_parse_diag(buf, len, out, 4, &n, &done), 0);
	cr_assert(done);
	cr_assert_eq(n, 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(memcmp(&out[i], &in[i], sizeof(in[i])), 0, "socket %d", i);
}

Test(portfwd, parse_diag_errors)
{
	uint8_t buf[4096] __attribute__((aligned(8)));
	struct portfwd_sock in[1] = {v4("127.0.0.1", 3000)};
	struct portfwd_sock out[4];
	size_t n = 0;
	bool done = false;
	size_t len = diag_buf(buf, sizeof(buf), in, 1, 1 /* ESTABLISHED */);
	cr_assert_eq(portfwd_parse_diag(buf, len, out, 4, &n, &done), 0);
	cr_assert_eq(n, 0, "non-listening sockets skipped");

	/* NLMSG_ERROR carries the errno */
	struct {
		struct nlmsghdr h;
		struct nlmsgerr e;
	} err = {.h = {.nlmsg_len = sizeof(err), .nlmsg_type = NLMSG_ERROR}, .e = {.error = -EPERM}};
	done = false;
	cr_assert_eq(portfwd_parse_diag(&err, sizeof(err), out, 4, &n, &done), -EPERM);

	/* a message cut short is a protocol error, not a crash */
	len = diag_buf(buf, sizeof(buf), in, 1, 10);
	done = false;
	cr_assert_eq(portfwd_parse_diag(buf, 30, out, 4, &n, &done), -EPROTO);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	h->nlmsg_len = NLMSG_LENGTH(8); /* claims to be a diag message but too short */
	cr_assert_eq(portfwd_parse_diag(buf, h->nlmsg_len, out, 4, &n, &done), -EPROTO);
}

/* Arbitrary bytes never crash either parser nor write past the bound
 * (the sanitizer build checks the memory side). */
Test(portfwd, parsers_survive_garbage)
{
	static uint8_t buf[4096] __attribute__((aligned(8)));
	struct portfwd_sock out[4];
	uint32_t x = 12345;
	for (int round = 0; round < 3000; round++) {
		size_t len = (size_t)(x % sizeof(buf));
		for (size_t i = 0; i < len; i++) {
			x = x * 1103515245u + 12345u;
			/* half the rounds: text-like bytes, to get deeper into the line parser */
			buf[i] = round & 1 ? (uint8_t)("0123456789ABCDEF: \n"[(x >> 16) % 19]) : (uint8_t)(x >> 16);
		}
		size_t n = 0;
		bool done = false;
		portfwd_parse_proc((const char *)buf, len, round & 2 ? AF_INET6 : AF_INET, out, 4, &n);
		cr_assert_leq(n, 4);
		n = 0;
		/* netlink buffers are 4-byte aligned in practice; keep it so */
		portfwd_parse_diag(buf, len & ~(size_t)3, out, 4, &n, &done);
		cr_assert_leq(n, 4);
		x = x * 1103515245u + 12345u;
	}
}

Test(portfwd, select_rules)
{
	struct portfwd_sock sbx = v4("169.254.0.21", 0);
	struct portfwd_sock socks[] = {
		v4("127.0.0.1", 4000),      /* forwarded to 127.0.0.1 */
		v6("::1", 4001),            /* forwarded to ::1 */
		v4("127.0.0.1", 4002),      /* blocked: also on the wildcard */
		v6("::", 4002),
		v4("127.0.0.2", 4003),      /* not exactly loopback */
		v4("127.0.0.1", 49983),     /* envd's own port */
		v4("127.0.0.1", 4004),      /* blocked: a service on the sandbox address */
		v4("169.254.0.21", 4004),
		v4("127.0.0.1", 4005),      /* our own forward listener does not block */
		v4("169.254.0.21", 4005),
		v6("::1", 4006),            /* both families: prefer IPv4, one entry */
		v6("::ffff:127.0.0.1", 4006),
		v4("127.0.0.1", 4000),      /* duplicate (SO_REUSEPORT): one entry */
	};
	uint64_t ours[1024] = {0};
	ours[4005 >> 6] |= 1ull << (4005 & 63);
	struct portfwd_want w[16];
	size_t k = portfwd_select(socks, sizeof(socks) / sizeof(socks[0]), &sbx, 49983, ours, w, 16);
	cr_assert_eq(k, 4);
	cr_assert_eq(w[0].port, 4000);
	cr_assert_eq(w[0].target_family, AF_INET);
	cr_assert_eq(w[1].port, 4001);
	cr_assert_eq(w[1].target_family, AF_INET6);
	cr_assert_eq(w[2].port, 4005);
	cr_assert_eq(w[3].port, 4006);
	cr_assert_eq(w[3].target_family, AF_INET);

	/* without the ours bitmap the sandbox-address listener blocks 4005 */
	k = portfwd_select(socks, sizeof(socks) / sizeof(socks[0]), &sbx, 49983, NULL, w, 16);
	cr_assert_eq(k, 3);
	/* the output bound holds, and the marks are reset between calls */
	k = portfwd_select(socks, sizeof(socks) / sizeof(socks[0]), &sbx, 49983, ours, w, 2);
	cr_assert_eq(k, 2);
	k = portfwd_select(socks, 1, &sbx, 49983, NULL, w, 16);
	cr_assert_eq(k, 1);
}

Test(portfwd, bad_address)
{
	cr_assert_eq(portfwd_start("not-an-address", 1), -EINVAL);
	cr_assert_eq(portfwd_active_forwards(), 0);
}

/* ---- a real relay on the loop, in a private network namespace ---- */

static atomic_int client_done;
static atomic_int client_ok;
static int svc_fd;

static void *client_thread(void *arg)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(5000)};
	inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
	int c = -1;
	for (int i = 0; i < 2000; i++) { /* up to 2 s for the forward */
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(c, (struct sockaddr *)&a, sizeof(a)) == 0)
			break;
		close(c);
		c = -1;
		usleep(1000);
	}
	if (c < 0)
		goto out;
	int s = accept(svc_fd, NULL, NULL);
	static char big[1 << 20];
	memset(big, 'x', sizeof(big));
	if (write(c, big, sizeof(big)) != (ssize_t)sizeof(big))
		goto out;
	shutdown(c, SHUT_WR);
	size_t got = 0;
	char buf[65536];
	ssize_t k;
	while ((k = read(s, buf, sizeof(buf))) > 0)
		got += (size_t)k;
	/* the service saw EOF after exactly what was sent; it answers */
	char reply[32];
	int rl = snprintf(reply, sizeof(reply), "%zu", got);
	if (write(s, reply, (size_t)rl) != rl)
		goto out;
	close(s);
	char back[32] = {0};
	size_t bl = 0;
	while ((k = read(c, back + bl, sizeof(back) - 1 - bl)) > 0)
		bl += (size_t)k;
	close(c);
	client_ok = strcmp(back, "1048576") == 0;
out:
	client_done = 1;
	return NULL;
}

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	if (client_done && portfwd_active_relays() == 0)
		ev_break(loop, EVBREAK_ALL);
}

Test(portfwd, relay_in_netns, .timeout = 20)
{
	if (unshare(CLONE_NEWNET) < 0)
		cr_skip_test("no network namespace: %s", strerror(errno));
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr = {0};
	strcpy(ifr.ifr_name, "lo");
	cr_assert_eq(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	cr_assert_eq(ioctl(s, SIOCSIFFLAGS, &ifr), 0);
	close(s);

	svc_fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(5000)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(svc_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(svc_fd, 8), 0);

	cr_assert_eq(portfwd_start("127.0.0.2", 0), 0);
	cr_assert_eq(portfwd_start("127.0.0.2", 0), -EALREADY);
	pthread_t t;
	pthread_create(&t, NULL, client_thread, NULL);
	ev_timer poll;
	ev_timer_init(&poll, poll_cb, 0.01, 0.01);
	ev_timer_start(envd_loop, &poll);
	ev_run(envd_loop, 0);
	ev_timer_stop(envd_loop, &poll);
	pthread_join(t, NULL);
	cr_assert(client_ok, "1 MiB relayed, half-close passed on, reply relayed back");
	cr_assert_eq(portfwd_active_forwards(), 1);
	cr_assert_eq(portfwd_active_relays(), 0, "finished relay freed");
	portfwd_stop();
	cr_assert_eq(portfwd_active_forwards(), 0);
	close(svc_fd);
}
