/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpcjob_test.c - a reqjob bound to an RPC call (rpc/rpcjob.h), through
 * the real server: a socketpair adopted as a connection, Connect JSON over
 * HTTP/1.1, and a test service (on the process.Process descriptor) whose
 * List runs a worker job and answers from its completion. The call is
 * answered exactly once (by the job, its deadline or the client's), and
 * the context is freed exactly once, whenever the last party lets go.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/reqjob.h"
#include "base/state.h"
#include "base/worker.h"
#include "envd/router.h"
#include "http/conn.h"
#include "process.pb-c.h"
#include "rpc/rpc.h"
#include "rpc/rpcjob.h"
#include "testloop.h"


/* ---- the service ---- */

struct lctx {
	struct reqjob job;
};

static int frees, cancels, dones;
static enum rpc_code answer_code; /* not RPC_OK: the job fails with it */
static atomic_int gate, started;
static double job_timeout;

static void l_free(struct reqjob *j)
{
	frees++;
	free(REQJOB_CONTAINER(j, struct lctx, job));
}

static void l_cancel(struct reqjob *j)
{
	cancels++;
}

static void l_expired(struct reqjob *j)
{
	cr_assert_not_null(rpcjob_call(j));
	rpcjob_expire(j, "/test");
	cr_assert_null(rpcjob_call(j), "taken");
}

static const struct reqjob_ops l_ops = { .free = l_free, .cancel = l_cancel, .expired = l_expired };

static void l_work(void *arg)
{
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&gate))
		usleep(200);
}

static void l_done(void *arg)
{
	struct lctx *c = arg;
	struct rpc_call *call = answer_code != RPC_OK ? NULL : rpcjob_take(&c->job);
	Process__ListResponse resp = PROCESS__LIST_RESPONSE__INIT;
	Process__ProcessInfo info = PROCESS__PROCESS_INFO__INIT;
	Process__ProcessInfo *infos[1] = { &info };

	dones++;
	if (answer_code != RPC_OK) {
		rpcjob_answer(&c->job, answer_code, "no such thing: /test", NULL);
		cr_assert_null(rpcjob_call(&c->job), "taken");
		return;
	}
	cr_assert_not_null(call);
	cr_assert_null(rpcjob_call(&c->job), "taken");
	info.pid = 7;
	resp.n_processes = 1;
	resp.processes = infos;
	rpc_reply(call, &resp.base);
}

static void t_list(struct rpc_call *call, const ProtobufCMessage *req)
{
	struct lctx *c = calloc(1, sizeof(*c));

	reqjob_init(&c->job, &l_ops);
	c->job.key = 99;
	c->job.timeout = job_timeout;
	rpcjob_attach(&c->job, call);
	cr_assert_eq(rpcjob_call(&c->job), call);
	if (reqjob_run(&c->job, l_work, l_done, c, 0) < 0)
		rpc_fail(rpcjob_take(&c->job), RPC_RESOURCE_EXHAUSTED, "queue full");
	reqjob_release(&c->job);
}

static const struct rpc_method_impl test_methods[] = {
	{ "List", RPC_UNARY, t_list },
};
static const struct rpc_service test_service = { &process__process__descriptor, test_methods, 1 };

/* ---- harness ---- */

static int client = -1;

static void setup(void)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	server_on_request = router_dispatch;
	cr_assert_not_null(conn_adopt(sv[0], "test"));
	client = sv[1];
	rpc_register(&test_service);
	state_token_clear();
	frees = cancels = dones = 0;
	atomic_store(&gate, 1);
	atomic_store(&started, 0);
	job_timeout = 0;
	answer_code = RPC_OK;
}

static void teardown(void)
{
	close(client);
}

TestSuite(rpcjob, .init = setup, .fini = teardown);

static void send_req(const char *extra)
{
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "POST /process.Process/List HTTP/1.1\r\nContent-Type: application/json\r\n%s"
			 "Content-Length: 2\r\n\r\n{}",
			 extra);
	cr_assert_eq(write(client, req, (size_t)n), n);
}

static char resp[8192];
static size_t resp_len;

/* A whole response is in: its head and Content-Length bytes of body. */
static bool response_in(void *arg)
{
	ssize_t k = read(client, resp + resp_len, sizeof(resp) - 1 - resp_len);
	if (k > 0)
		resp_len += (size_t)k;
	resp[resp_len] = '\0';
	char *body = strstr(resp, "\r\n\r\n");
	char *cl = strcasestr(resp, "content-length: ");
	return body && cl && resp_len >= (size_t)(body + 4 - resp) + strtoul(cl + 16, NULL, 10);
}

static bool freed(void *arg) { return frees > 0; }
static bool running(void *arg) { return atomic_load(&started) > 0; }
static bool cancelled(void *arg) { return cancels > 0; }

static atomic_int blk_gate, blk_started;
static void blk_work(void *arg)
{
	atomic_fetch_add(&blk_started, 1);
	while (!atomic_load(&blk_gate))
		usleep(200);
}
static void blk_done(void *arg) {}
static bool blockers_running(void *arg) { return atomic_load(&blk_started) == WORKER_KEY_CAP; }

Test(rpcjob, answered_by_the_job)
{
	resp_len = 0;
	send_req("");
	cr_assert(spin_until(response_in, NULL));
	cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "%s", resp);
	cr_assert(strstr(resp, "\"pid\":7"), "%s", resp);
	cr_assert_eq(dones, 1);
	cr_assert_eq(frees, 1, "taken and answered: the last reference went with the job's");
	cr_assert_eq(cancels, 0);
}

Test(rpcjob, answered_with_the_jobs_error)
{
	answer_code = RPC_NOT_FOUND;
	resp_len = 0;
	send_req("");
	cr_assert(spin_until(response_in, NULL));
	cr_assert(strncmp(resp, "HTTP/1.1 404", 12) == 0, "%s", resp);
	cr_assert(strstr(resp, "\"code\":\"not_found\"") && strstr(resp, "no such thing: /test"), "%s", resp);
	cr_assert_eq(dones, 1);
	cr_assert(spin_until(freed, NULL));
}

Test(rpcjob, client_gone_while_running)
{
	atomic_store(&gate, 0);
	send_req("");
	cr_assert(spin_until(running, NULL));
	shutdown(client, SHUT_RDWR);
	cr_assert(spin_until(cancelled, NULL));
	cr_assert_eq(frees, 0, "the job still holds it");
	atomic_store(&gate, 1);
	cr_assert(spin_until(freed, NULL));
	cr_assert_eq(dones, 0);
	cr_assert_eq(cancels, 1);
}

/* The client's own deadline: rpc/connect.c answers and cancels the hooks. */
Test(rpcjob, client_deadline)
{
	atomic_store(&gate, 0);
	resp_len = 0;
	send_req("Connect-Timeout-Ms: 50\r\n");
	cr_assert(spin_until(response_in, NULL));
	cr_assert(strstr(resp, "deadline_exceeded"), "%s", resp);
	cr_assert_eq(cancels, 1);
	atomic_store(&gate, 1);
	cr_assert(spin_until(freed, NULL));
	cr_assert_eq(dones, 0);
}

/* The job's deadline (a mount that does not answer): ops->expired takes
 * the call and answers; the job, dropped from its queue, frees. */
Test(rpcjob, job_deadline)
{
	atomic_store(&blk_gate, 0);
	for (int i = 0; i < WORKER_KEY_CAP; i++)
		cr_assert_eq(worker_run(&(struct worker_req){ .work = blk_work, .done = blk_done, .key = 99 }), 0);
	cr_assert(spin_until(blockers_running, NULL));
	job_timeout = 0.05;
	resp_len = 0;
	send_req("");
	cr_assert(spin_until(response_in, NULL));
	cr_assert(strncmp(resp, "HTTP/1.1 504", 12) == 0, "%s", resp);
	cr_assert(strstr(resp, "filesystem did not answer within 0.05 s: /test"), "%s", resp);
	cr_assert(spin_until(freed, NULL));
	cr_assert_eq(dones, 0);
	cr_assert_eq(cancels, 0, "taken back to answer, not cancelled");
	atomic_store(&blk_gate, 1);
}
