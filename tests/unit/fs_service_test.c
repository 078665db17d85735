/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_service_test.c - the Filesystem service (fs/fs_service.h) through the
 * real server: a socketpair adopted as a connection, Connect JSON over
 * HTTP/1.1. Each unary call is one worker job bound to its call
 * (rpc/rpcjob.h): answered by the job, by its own deadline on a mount
 * that does not answer, or by the client's deadline with the words of the
 * filesystem; a watcher's set-up job likewise.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/state.h"
#include "base/worker.h"
#include "envd/router.h"
#include "fs/fs_service.h"
#include "http/conn.h"
#include "rpc/rpc.h"
#include "testloop.h"


static int client = -1;
static char dir[] = "/tmp/fs-service-test.XXXXXX";

static void setup(void)
{
	int sv[2];

	cr_assert(mkdtemp(dir));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	server_on_request = router_dispatch;
	cr_assert_not_null(conn_adopt(sv[0], "test"));
	client = sv[1];
	rpc_register(&fs_service);
	state_token_clear();
}

static void teardown(void)
{
	close(client);
	rm_tree(dir);
}

TestSuite(fs_service, .init = setup, .fini = teardown);

static char resp[16384];
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


/* Call method with a JSON message; the answer is in resp. */
static void call(const char *method, const char *extra, const char *json)
{
	char req[PATH_MAX + 1024];
	int n = snprintf(req, sizeof(req),
			 "POST /filesystem.Filesystem/%s HTTP/1.1\r\nContent-Type: application/json\r\n%s"
			 "Content-Length: %zu\r\n\r\n%s",
			 method, extra, strlen(json), json);

	resp_len = 0;
	cr_assert_eq(write(client, req, (size_t)n), n);
	cr_assert(spin_until(response_in, NULL), "answered");
}

static char msg[PATH_MAX + 64];

static const char *path_msg(const char *fmt, const char *name)
{
	snprintf(msg, sizeof(msg), fmt, dir, name);
	return msg;
}

Test(fs_service, stat_and_make_dir)
{
	call("MakeDir", "", path_msg("{\"path\":\"%s/%s\"}", "made"));
	cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "%s", resp);
	call("Stat", "", path_msg("{\"path\":\"%s/%s\"}", "made"));
	cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "%s", resp);
	cr_assert(strstr(resp, "\"name\":\"made\""), "%s", resp);
	cr_assert(strstr(resp, "\"type\":\"FILE_TYPE_DIRECTORY\""), "%s", resp);
	call("Stat", "", path_msg("{\"path\":\"%s/%s\"}", "absent"));
	cr_assert(strncmp(resp, "HTTP/1.1 404", 12) == 0, "%s", resp);
	cr_assert(strstr(resp, "\"code\":\"not_found\""), "%s", resp);
	call("MakeDir", "", path_msg("{\"path\":\"%s/%s\"}", "made"));
	cr_assert(strstr(resp, "\"code\":\"already_exists\""), "%s", resp);
}

/* Fill the cap of the key of dir's mount, so that a job of it waits. */
static atomic_int blk_gate, blk_started;
static void blk_work(void *arg)
{
	atomic_fetch_add(&blk_started, 1);
	while (!atomic_load(&blk_gate))
		usleep(200);
}
static void blk_done(void *arg) {}
static bool blockers_running(void *arg) { return atomic_load(&blk_started) == WORKER_KEY_CAP; }

static void block_mount(void)
{
	uint64_t key = worker_path_key(dir);

	atomic_store(&blk_gate, 0);
	for (int i = 0; i < WORKER_KEY_CAP; i++)
		cr_assert_eq(worker_run(&(struct worker_req){ .work = blk_work, .done = blk_done, .key = key }), 0);
	cr_assert(spin_until(blockers_running, NULL));
}

/* The mount does not answer within the server's deadline: the job's
 * expiry answers deadline_exceeded naming the path. */
Test(fs_service, job_deadline)
{
	block_mount();
	worker_fs_timeout = 0.05;
	call("Stat", "", path_msg("{\"path\":\"%s/%s\"}", "x"));
	cr_assert(strncmp(resp, "HTTP/1.1 504", 12) == 0, "%s", resp);
	cr_assert(strstr(resp, "\"code\":\"deadline_exceeded\""), "%s", resp);
	cr_assert(strstr(resp, path_msg("filesystem did not answer within 0.05 s: %s/%s", "x")), "%s", resp);
	atomic_store(&blk_gate, 1);
	cr_assert(spin_until(pool_idle, NULL));
	worker_fs_timeout = 30;
}

/* The client's own deadline: rpc/connect.c answers, in the words the
 * service set for it. */
Test(fs_service, client_deadline)
{
	block_mount();
	call("Stat", "Connect-Timeout-Ms: 50\r\n", path_msg("{\"path\":\"%s/%s\"}", "y"));
	cr_assert(strstr(resp, "\"code\":\"deadline_exceeded\""), "%s", resp);
	cr_assert(strstr(resp, path_msg("filesystem did not answer within 0.05 s: %s/%s", "y")), "%s", resp);
	atomic_store(&blk_gate, 1);
	cr_assert(spin_until(pool_idle, NULL));
}

Test(fs_service, watcher_set_up_as_a_job)
{
	call("CreateWatcher", "", path_msg("{\"path\":\"%s%s\"}", ""));
	cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "%s", resp);
	char *id = strstr(resp, "\"watcherId\":\"");
	cr_assert_not_null(id, "%s", resp);
	char wid[64];
	cr_assert_eq(sscanf(id + 13, "%63[^\"]", wid), 1);
	cr_assert_eq(fs_service_watcher_count(), 1);
	char json[128];
	snprintf(json, sizeof(json), "{\"watcherId\":\"%s\"}", wid);
	call("RemoveWatcher", "", json);
	cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "%s", resp);
	cr_assert_eq(fs_service_watcher_count(), 0);

	call("CreateWatcher", "", path_msg("{\"path\":\"%s/%s\"}", "absent"));
	cr_assert(strstr(resp, "\"code\":\"not_found\""), "%s", resp);
}
