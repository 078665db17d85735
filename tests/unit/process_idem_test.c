/* SPDX-License-Identifier: Apache-2.0 */
/* Idempotency keys (process/idem.h): what a valid key is, where a request's
 * key comes from, and what "the same request" compares. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "process/idem.h"

Test(idem, valid_keys)
{
	char err[256], k[IDEM_KEY_MAX + 2];

	cr_expect_eq(idem_key_check("a", err, sizeof(err)), 0);
	cr_expect_eq(idem_key_check("order-1234_retry:7/x.y~z", err, sizeof(err)), 0);
	memset(k, 'k', IDEM_KEY_MAX);
	k[IDEM_KEY_MAX] = '\0';
	cr_expect_eq(idem_key_check(k, err, sizeof(err)), 0, "%d characters are allowed", IDEM_KEY_MAX);
	k[IDEM_KEY_MAX] = 'k';
	k[IDEM_KEY_MAX + 1] = '\0';
	cr_expect_eq(idem_key_check(k, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "1 to 255 characters, got 256"), "%s", err);
	cr_expect_eq(idem_key_check("", err, sizeof(err)), -EINVAL);
	cr_expect_eq(idem_key_check("two words", err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "byte 3 is 0x20"), "%s", err);
	cr_expect_eq(idem_key_check("tab\there", err, sizeof(err)), -EINVAL);
	cr_expect_eq(idem_key_check("caf\xc3\xa9", err, sizeof(err)), -EINVAL);
}

Test(idem, pick_from_three_places)
{
	const char *k;
	char err[256];

	cr_expect_eq(idem_key_pick(NULL, "", NULL, &k, err, sizeof(err)), 0);
	cr_expect_null(k, "no key anywhere");
	cr_expect_eq(idem_key_pick("h", NULL, NULL, &k, err, sizeof(err)), 0);
	cr_expect_str_eq(k, "h");
	cr_expect_eq(idem_key_pick(NULL, "f", NULL, &k, err, sizeof(err)), 0);
	cr_expect_str_eq(k, "f");
	cr_expect_eq(idem_key_pick("", "", "e", &k, err, sizeof(err)), 0);
	cr_expect_str_eq(k, "e");
	cr_expect_eq(idem_key_pick("same", "same", "same", &k, err, sizeof(err)), 0);
	cr_expect_str_eq(k, "same");
	cr_expect_eq(idem_key_pick("a", NULL, "b", &k, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "the Idempotency-Key header says 'a', ENVD_IDEMPOTENCY_KEY says 'b'"), "%s", err);
	cr_expect_eq(idem_key_pick(NULL, "a b", NULL, &k, err, sizeof(err)), -EINVAL, "a bad key is refused");
}

static Process__ProcessConfig__EnvsEntry env(const char *k, const char *v)
{
	Process__ProcessConfig__EnvsEntry e = PROCESS__PROCESS_CONFIG__ENVS_ENTRY__INIT;

	e.key = (char *)k;
	e.value = (char *)v;
	return e;
}

struct req {
	Process__ProcessConfig c;
	Process__ProcessLimits lim;
	char *args[4];
	Process__ProcessConfig__EnvsEntry e[3];
	Process__ProcessConfig__EnvsEntry *ep[3];
	struct idem_request r;
};

/* `echo a b` in /home/user with envs A=1 B=2. */
static void base_req(struct req *q)
{
	memset(q, 0, sizeof(*q));
	process__process_config__init(&q->c);
	process__process_limits__init(&q->lim);
	q->c.cmd = "echo";
	q->args[0] = "a";
	q->args[1] = "b";
	q->c.args = q->args;
	q->c.n_args = 2;
	q->e[0] = env("A", "1");
	q->e[1] = env("B", "2");
	q->ep[0] = &q->e[0];
	q->ep[1] = &q->e[1];
	q->c.envs = q->ep;
	q->c.n_envs = 2;
	q->r.config = &q->c;
	q->r.cwd = "/home/user";
	q->r.stdin_pipe = true;
}

static void fp(struct req *q, char out[IDEM_FP_LEN])
{
	cr_assert_eq(idem_fingerprint(&q->r, out), 0);
	cr_assert_eq(strlen(out), 64);
}

Test(idem, same_request_same_fingerprint)
{
	struct req a, b;
	char fa[IDEM_FP_LEN], fb[IDEM_FP_LEN];

	base_req(&a);
	base_req(&b);
	fp(&a, fa);
	fp(&b, fb);
	cr_expect_str_eq(fa, fb);
	/* The envs are a map: their order on the wire is not the request. */
	b.ep[0] = &b.e[1];
	b.ep[1] = &b.e[0];
	fp(&b, fb);
	cr_expect_str_eq(fa, fb, "envs compared as a set");
}

Test(idem, each_part_counts)
{
	struct req a, b;
	char fa[IDEM_FP_LEN], fb[IDEM_FP_LEN];
	Process__ProcessConfig__EnvsEntry e2;

	base_req(&a);
	fp(&a, fa);
#define DIFFERS(what, change)                                   \
	do {                                                    \
		base_req(&b);                                   \
		change;                                         \
		fp(&b, fb);                                     \
		cr_expect_str_neq(fa, fb, "%s counts", what);   \
	} while (0)
	DIFFERS("cmd", b.c.cmd = "printf");
	DIFFERS("an argument", b.args[1] = "c");
	DIFFERS("the number of arguments", b.c.n_args = 1);
	DIFFERS("where arguments split", (b.args[0] = "a b", b.c.n_args = 1));
	DIFFERS("an env value", b.e[1] = env("B", "3"));
	DIFFERS("an env key", b.e[1] = env("C", "2"));
	DIFFERS("an extra env", (e2 = env("D", ""), b.ep[2] = &e2, b.c.n_envs = 3));
	DIFFERS("the cwd", b.r.cwd = "/tmp");
	DIFFERS("pty", b.r.pty = true);
	DIFFERS("stdin", b.r.stdin_pipe = false);
	DIFFERS("a tag", b.r.tag = "t");
	DIFFERS("an empty tag against none", b.r.tag = "");
	DIFFERS("a session", b.r.session = "s");
	DIFFERS("trackChanges", b.r.track_changes = true);
	DIFFERS("a memory limit", (b.lim.memory_max_bytes = 1 << 20, b.c.limits = &b.lim));
	DIFFERS("a CPU limit", (b.lim.cpu_percent = 50, b.c.limits = &b.lim));
	DIFFERS("a pids limit", (b.lim.pids_max = 8, b.c.limits = &b.lim));
#undef DIFFERS
	/* No limits and zero limits are the same command. */
	base_req(&b);
	b.c.limits = &b.lim;
	fp(&b, fb);
	cr_expect_str_eq(fa, fb);
}

Test(idem, control_variables)
{
	cr_expect(idem_env_control("ENVD_IDEMPOTENCY_KEY"));
	cr_expect(idem_env_control("ENVD_OUTPUT_BUDGET"));
	cr_expect_not(idem_env_control("ENVD_SESSION"), "a session is part of the request");
	cr_expect_not(idem_env_control("PATH"));
	cr_expect_not(idem_env_control(NULL));
}
