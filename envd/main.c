/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - flags (README.md, "Flags"), start-up and the event loop.
 *
 * Flags follow Go's flag package, so the platform can run envd exactly as
 * it runs the reference: -name or --name, -name value or -name=value,
 * booleans bare or -name=true|false; an unknown flag prints usage and
 * exits 2. Fatal exits happen only here, before the loop starts; after
 * that a failure fails one request, never the daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envd/router.h"
#include "http/conn.h"
#include "http/h1.h"
#include "http/h2.h"
#include "http/http.h"
#include "process/cgroup.h"
#include "sandbox/workload.h"
#include "sandbox/control.h"
#include "base/child.h"
#include "base/errstr.h"
#include "transfer/archive.h"
#include "changes/changes.h"
#include "transfer/files_get.h"
#include "fs/fs_service.h"
#include "base/uptmp.h"
#include "base/sdnotify.h"
#include "process/keep.h"
#include "base/log.h"
#include "base/loop.h"
#include "sandbox/portfwd.h"
#include "sandbox/logexport.h"
#include "sandbox/mmds.h"
#include "sandbox/upgrade.h"
#include "process/session.h"
#include "process/process.h"
#include "process/process_service.h"
#include "process/waitfor.h"
#include "rpc/rpc.h"
#include "base/state.h"
#include "base/worker.h"
#include "try/tryapply.h"
#include "try/tryrun.h"

/* Services pace themselves on RPC_SEND_HIGH; the transport fires on_writable
   relative to HTTP_QUEUE_HIGH. They must be the same mark. */
_Static_assert(RPC_SEND_HIGH == HTTP_QUEUE_HIGH, "rpc.h and http.h disagree on the send high-water mark");

#ifndef ENVD_VERSION
#define ENVD_VERSION "0.7.0"
#endif
#ifndef ENVD_COMMIT
#define ENVD_COMMIT ""
#endif


enum flag_type { F_BOOL, F_INT, F_STR };

struct flag {
	const char *name;
	enum flag_type type;
	const char *usage;
	const char *def;
	union {
		bool b;
		long long i;
		const char *s;
	} v;
	bool set; /* given on the command line */
};

static struct flag flags[] = {
	{"port", F_INT, "a port on which the daemon should run", "49983", {.i = 49983}},
	{"isnotfc", F_BOOL, "isNotFCmode prevents sandbox metadata fetching", "false", {.b = false}},
	{"version", F_BOOL, "print envd version", "false", {.b = false}},
	{"commit", F_BOOL, "print envd source commit", "false", {.b = false}},
	{"cgroup-root", F_STR, "cgroup2 root directory (default: /sys/fs/cgroup if cgroup2, else the first cgroup2 mount)", "/sys/fs/cgroup", {.s = "/sys/fs/cgroup"}},
	{"no-cgroups", F_BOOL, "disable cgroups", "false", {.b = false}},
	{"verbose", F_BOOL, "write the JSON log stream to stdout", "false", {.b = false}},
	{"resume-handover", F_BOOL, "internal: take over from the hand-over record after a live upgrade", "false",
	 {.b = false}},
	{"upgrade-dir", F_STR, "directory where POST /upgrade stores the new binary (as envd.next)", "/usr/bin",
	 {.s = "/usr/bin"}},
	{"ca-bundle", F_STR, "system trust bundle that /init caBundle is added to",
	 "/etc/ssl/certs/ca-certificates.crt", {.s = "/etc/ssl/certs/ca-certificates.crt"}},
	{"ca-cert-dir", F_STR, "directory that receives e2b-ca.crt", "/usr/local/share/ca-certificates",
	 {.s = "/usr/local/share/ca-certificates"}},
	{"upgrade-preflight-ms", F_INT, "time the new binary has to answer -version before an upgrade", "2000",
	 {.i = 2000}},
	{"handover-file", F_STR, "live-upgrade hand-over record", "/run/e2b/envd-handover.pb",
	 {.s = "/run/e2b/envd-handover.pb"}},
	{"no-crash-keep", F_BOOL, "do not keep processes in the service manager's fd store for a restart", "false",
	 {.b = false}},
	{"upload-registry", F_STR, "directory that records the temporary files of uploads in progress",
	 "/run/e2b/uploads", {.s = "/run/e2b/uploads"}},
	{"default-user", F_STR, "user that requests run as when none is given", "root", {.s = "root"}},
	{"addr", F_STR, "listen address (default: dual-stack [::], falling back to 0.0.0.0)", "", {.s = ""}},
	{"max-conns", F_INT, "maximum open connections", "20000", {.i = 20000}},
	{"max-message", F_INT, "maximum RPC message size in bytes", "16777216", {.i = 16777216}},
	{"max-header-bytes", F_INT, "maximum HTTP/1.1 request head size in bytes", "65536", {.i = 65536}},
	{"mmds-addr", F_STR, "metadata service address (Firecracker mode)", "169.254.169.254:80",
	 {.s = "169.254.169.254:80"}},
	{"max-streams", F_INT, "maximum concurrent HTTP/2 streams per connection", "1000", {.i = 1000}},
	{"max-watchers", F_INT, "maximum polled directory watchers (CreateWatcher), at most 4096", "256", {.i = 256}},
	{"fs-timeout", F_INT,
	 "seconds a filesystem request may wait on its path (walks: without progress) when the client sets no deadline",
	 "30", {.i = 30}},
	{"max-process-streams", F_INT, "maximum streams attached to one process", "128", {.i = 128}},
	{"session-idle-timeout", F_INT, "seconds a shell session may sit without commands before it is closed (0: never)",
	 "0", {.i = 0}},
	{"output-buffer", F_INT, "bytes of recent output kept per process for reconnect", "1048576", {.i = 1048576}},
	{"sandbox-addr", F_STR, "address on which loopback-only listeners are made reachable", "169.254.0.21",
	 {.s = "169.254.0.21"}},
	{"archive-max-entries", F_INT, "maximum entries of an archive extracted by POST /files?extract= (0: no limit)",
	 "200000", {.i = 200000}},
	{"archive-max-bytes", F_INT, "maximum bytes an extracted archive may expand to, and its own size (0: no limit)",
	 "10737418240", {.i = 10737418240LL}},
	{"archive-max-ratio", F_INT, "maximum expansion of an extracted archive per archive byte, beyond 16 MiB (0: no limit)",
	 "200", {.i = 200}},
	{"changes-max-paths", F_INT, "paths the change journal keeps (0: no journal)", "200000", {.i = 200000}},
	{"changes-source", F_STR, "where the change journal reads changes: auto (fanotify, inotify where it is "
	 "unavailable), fanotify or inotify", "auto", {.s = "auto"}},
	{"changes-inotify-watches", F_INT, "directories the change journal may watch with inotify "
	 "(0: half of fs.inotify.max_user_watches)", "0", {.i = 0}},
	{"gzip-always", F_BOOL, "gzip every download whose client offers gzip, however fast its link", "false",
	 {.b = false}},
	{"no-port-forward", F_BOOL, "do not forward loopback listeners to the sandbox address", "false", {.b = false}},
	{"try-max-bytes", F_INT, "bytes a try run's layer may hold (0: half of the memory)", "0", {.i = 0}},
	{"try-ttl", F_INT, "seconds a try run waits after its end to be committed before it is discarded", "3600",
	 {.i = 3600}},
};
#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

static struct flag *flag_get(const char *name)
{
	for (size_t i = 0; i < N_FLAGS; i++)
		if (strcmp(flags[i].name, name) == 0)
			return &flags[i];
	return NULL;
}

static void usage(FILE *out)
{
	fprintf(out, "Usage of envd:\n");
	for (size_t i = 0; i < N_FLAGS; i++) {
		const struct flag *f = &flags[i];
		fprintf(out, "  -%s%s\n    \t%s", f->name, f->type == F_INT ? " int" : f->type == F_STR ? " string" : "",
			f->usage);
		if (f->type == F_STR && *f->def)
			fprintf(out, " (default \"%s\")", f->def);
		else if (f->type == F_INT)
			fprintf(out, " (default %s)", f->def);
		fputc('\n', out);
	}
}

static int parse_flags(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (a[0] != '-' || a[1] == '\0')
			break; /* positional arguments end flag parsing */
		a++;
		if (a[0] == '-') {
			a++;
			if (a[0] == '\0')
				break; /* "--" */
		}
		char name[128];
		const char *val = NULL;
		char *eq = strchr(a, '=');
		snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
		if (eq)
			val = eq + 1;
		if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0) {
			usage(stderr);
			exit(0);
		}
		struct flag *f = flag_get(name);
		if (!f) {
			fprintf(stderr, "flag provided but not defined: -%s\n", name);
			usage(stderr);
			exit(2);
		}
		f->set = true;
		if (f->type == F_BOOL) {
			if (!val || strcmp(val, "true") == 0 || strcmp(val, "1") == 0 || strcmp(val, "t") == 0 ||
			    strcmp(val, "T") == 0 || strcmp(val, "TRUE") == 0 || strcmp(val, "True") == 0) {
				f->v.b = true;
			} else if (strcmp(val, "false") == 0 || strcmp(val, "0") == 0 || strcmp(val, "f") == 0 ||
				   strcmp(val, "F") == 0 || strcmp(val, "FALSE") == 0 || strcmp(val, "False") == 0) {
				f->v.b = false;
			} else {
				fprintf(stderr, "invalid boolean value \"%s\" for -%s: parse error\n", val, name);
				usage(stderr);
				exit(2);
			}
			continue;
		}
		if (!val) {
			if (i + 1 >= argc) {
				fprintf(stderr, "flag needs an argument: -%s\n", name);
				usage(stderr);
				exit(2);
			}
			val = argv[++i];
		}
		if (f->type == F_INT) {
			char *end;
			errno = 0;
			long long v = strtoll(val, &end, 0);
			if (errno || *end || !*val) {
				fprintf(stderr, "invalid value \"%s\" for flag -%s: parse error\n", val, name);
				usage(stderr);
				exit(2);
			}
			f->v.i = v;
		} else {
			f->v.s = val;
		}
	}
	return 0;
}

static void write_run_file(const char *name, const char *value, mode_t mode)
{
	char path[256];
	snprintf(path, sizeof(path), "/run/e2b/%s", name);
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) {
		fprintf(stderr, "failed to write %s: %s\n", path, strerror(errno));
		return;
	}
	if (write(fd, value, strlen(value)) < 0)
		fprintf(stderr, "failed to write %s: %s\n", path, strerror(errno));
	fchmod(fd, mode);
	close(fd);
}

/* -cgroup-root as given, else where cgroup2 is mounted (NULL: nowhere). */
static const char *cgroup_root_flag(void)
{
	static char found[4096];
	const struct flag *f = flag_get("cgroup-root");

	return f->set ? f->v.s : workload_find_root(found, sizeof(found));
}

/* The one line envd always prints at start (stderr, with or without
 * -verbose): what runs, where it listens, what it speaks, where the
 * commands' cgroups are. */
static void say_started(long long port)
{
	const char *addr = flag_get("addr")->v.s;
	bool any = !addr || !*addr || strcmp(addr, "::") == 0;

	fprintf(stderr,
		"envd %s listening on %s%s%s:%lld%s: HTTP/1.1 and HTTP/2 (h2c); Connect, gRPC, gRPC-Web; %s\n",
		ENVD_VERSION, any || strchr(addr, ':') ? "[" : "", any ? "::" : addr,
		any || strchr(addr, ':') ? "]" : "", port, any ? " (every IPv4 and IPv6 address)" : "",
		workload_status());
}

/* Notify messages the service manager had no room for (a slow or
 * stopped init): sent in order once its socket takes them, never by
 * blocking the loop (base/sdnotify.h). */
static ev_io notify_w;

static void notify_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	if (sdnotify_flush() != -EAGAIN)
		ev_io_stop(loop, w);
}

static void notify_queued(int fd)
{
	if (ev_is_active(&notify_w))
		return;
	ev_io_init(&notify_w, notify_writable, fd, EV_WRITE);
	ev_io_start(envd_loop, &notify_w);
}

static void on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	ev_break(loop, EVBREAK_ALL);
}

/* WaitFor's port condition learns of listeners from the port scanner: the
 * process layer cannot call up into the sandbox layer, so the scan is
 * handed down here. */
static void ports_scanned(const struct portfwd_sock *socks, size_t n)
{
	if (!waitfor_wants_ports())
		return;
	waitfor_ports_begin();
	for (size_t i = 0; i < n; i++)
		if (!portfwd_is_own(&socks[i]))
			waitfor_port_seen(socks[i].family, socks[i].addr, socks[i].port);
	waitfor_ports_end();
}

int main(int argc, char **argv)
{
	parse_flags(argc, argv);
	if (flag_get("version")->v.b) {
		printf("%s\n", ENVD_VERSION);
		return 0;
	}
	if (flag_get("commit")->v.b) {
		printf("%s\n", ENVD_COMMIT);
		return 0;
	}
	long long port = flag_get("port")->v.i;
	if (port < 0 || port > 65535) {
		fprintf(stderr, "server stopped: listen tcp: address %lld: invalid port\n", port);
		return 1;
	}
	log_verbose = flag_get("verbose")->v.b;
	control_not_fc = flag_get("isnotfc")->v.b;
	server_max_conns = (size_t)flag_get("max-conns")->v.i;
	rpc_max_message = (size_t)flag_get("max-message")->v.i;
	h1_max_header_bytes = (size_t)flag_get("max-header-bytes")->v.i;
	process_ring_size = (size_t)flag_get("output-buffer")->v.i;
	h2_max_streams = (unsigned)flag_get("max-streams")->v.i;
	fs_max_watchers = (size_t)flag_get("max-watchers")->v.i;
	changes_max_paths = flag_get("changes-max-paths")->v.i > 0 ? (size_t)flag_get("changes-max-paths")->v.i : 0;
	const char *csrc = flag_get("changes-source")->v.s;
	if (strcmp(csrc, "auto") == 0) {
		changes_source = CHANGES_SOURCE_AUTO;
	} else if (strcmp(csrc, "fanotify") == 0) {
		changes_source = CHANGES_SOURCE_FANOTIFY;
	} else if (strcmp(csrc, "inotify") == 0) {
		changes_source = CHANGES_SOURCE_INOTIFY;
	} else {
		fprintf(stderr, "invalid value \"%s\" for flag -changes-source: auto, fanotify or inotify\n", csrc);
		usage(stderr);
		return 2;
	}
	changes_inotify_watches =
		flag_get("changes-inotify-watches")->v.i > 0 ? (size_t)flag_get("changes-inotify-watches")->v.i : 0;
	files_gzip_always = flag_get("gzip-always")->v.b;
	if (flag_get("fs-timeout")->v.i > 0)
		worker_fs_timeout = (double)flag_get("fs-timeout")->v.i;
	process_max_subs = (unsigned)flag_get("max-process-streams")->v.i;
	session_idle_s = flag_get("session-idle-timeout")->v.i > 0 ? (double)flag_get("session-idle-timeout")->v.i : 0;
	arch_limits.max_entries = (uint64_t)flag_get("archive-max-entries")->v.i;
	arch_limits.max_bytes = (uint64_t)flag_get("archive-max-bytes")->v.i;
	arch_limits.max_ratio = (uint64_t)flag_get("archive-max-ratio")->v.i;
	snprintf(mmds_addr, sizeof(mmds_addr), "%s", flag_get("mmds-addr")->v.s);
	state_set_default_user(flag_get("default-user")->v.s);
	if (flag_get("try-max-bytes")->v.i > 0)
		try_max_bytes = (uint64_t)flag_get("try-max-bytes")->v.i;
	if (flag_get("try-ttl")->v.i > 0)
		try_ttl_s = (double)flag_get("try-ttl")->v.i;

	/* As the reference: the soft fd limit is raised to the hard one for
	 * envd itself; children get the original back (process/spawn.c). */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}

	/* A write to a vanished client must fail the write, not kill envd.
	 * Children get default dispositions back before exec. */
	signal(SIGPIPE, SIG_IGN);

	if (mkdir("/run/e2b", 0755) < 0 && errno != EEXIST)
		fprintf(stderr, "failed to create /run/e2b: %s\n", strerror(errno));
	const char *sandbox = control_not_fc ? "false" : "true";
	envstore_set_internal("E2B_SANDBOX", sandbox);
	write_run_file(".E2B_SANDBOX", sandbox, 0444);

	control_metrics_init();
	/* Before anything can run a command from a worker (the metadata
	 * route's iptables, /init's mounts): the loop reaps every child. */
	child_watch_start();
	if (!control_not_fc) {
		logexport_hold();
		mmds_poll_ids(0);
	}
	rpc_register(&process_service);
	rpc_register(&fs_service);

	server_on_request = router_dispatch;
	snprintf(control_ca_bundle, sizeof(control_ca_bundle), "%s", flag_get("ca-bundle")->v.s);
	snprintf(control_ca_dir, sizeof(control_ca_dir), "%s", flag_get("ca-cert-dir")->v.s);
	snprintf(upgrade_dir, sizeof(upgrade_dir), "%s", flag_get("upgrade-dir")->v.s);
	snprintf(upgrade_record_path, sizeof(upgrade_record_path), "%s", flag_get("handover-file")->v.s);
	upgrade_version = ENVD_VERSION;
	if (flag_get("upgrade-preflight-ms")->v.i > 0)
		upgrade_preflight_s = (double)flag_get("upgrade-preflight-ms")->v.i / 1000.0;
	upgrade_set_argv(argc, argv);
	bool resume = flag_get("resume-handover")->v.b;
	keep_setup(sdnotify_available() && !flag_get("no-crash-keep")->v.b);
	sdnotify_on_queued = notify_queued;
	try_setup();
	/* What a killed envd kept in the fd store: the /init state now,
	 * before the port answers a request without the token; processes
	 * once the cgroups are set up. */
	struct sdnotify_fd *handed = calloc(KEEP_HANDED_MAX, sizeof(*handed));
	size_t n_handed = handed ? sdnotify_listen_fds(handed, KEEP_HANDED_MAX) : 0;
	upgrade_restore_init_state(handed, n_handed);
	/* Workload cgroups once the port is ours (a second envd that cannot
	 * bind must not touch them), before the loop can start a command. In
	 * a hand-over the port comes with the record, and the commands taken
	 * over need their leaves (tree kill, usage, removal): set up first. */
	if (resume)
		workload_setup(cgroup_root_flag(), flag_get("no-cgroups")->v.b);
	int rc = resume ? upgrade_resume() : -1;
	if (rc < 0)
		rc = server_listen((int)port, flag_get("addr")->v.s);
	if (rc < 0) {
		fprintf(stderr, "server stopped: listen tcp 0.0.0.0:%lld: bind: %s\n", port, go_strerror(-rc));
		return 1;
	}
	if (!resume)
		workload_setup(cgroup_root_flag(), flag_get("no-cgroups")->v.b);
	/* Processes a killed envd kept in the fd store (docs/crash.md). */
	keep_adopt_all(handed, n_handed);
	/* Try runs a killed envd kept (docs/try.md), with their commands. */
	try_adopt_all(handed, n_handed);
	for (size_t i = 0; i < n_handed; i++)
		if (handed[i].fd >= 0)
			close(handed[i].fd); /* nobody's */
	free(handed);
	/* Temporary files of uploads a killed envd was writing. */
	snprintf(uptmp_registry, sizeof(uptmp_registry), "%s", flag_get("upload-registry")->v.s);
	uptmp_sweep();
	/* Session directories of a killed envd (docs/sessions.md). */
	session_sweep();
	/* A try's commit registers its hidden names beside the uploads' registry. */
	{
		const char *ur = flag_get("upload-registry")->v.s, *slash = strrchr(ur, '/');
		if (!*ur)
			tryapply_registry[0] = '\0';
		else if (slash)
			snprintf(tryapply_registry, sizeof(tryapply_registry), "%.*s/try-staging", (int)(slash - ur), ur);
	}
	/* What commits of try runs a killed envd made left under hidden names. */
	tryapply_sweep();
	if (changes_start() < 0)
		log_info("envd", "change journal not started");
	log_info("envd", "listening on port %lld, version %s", port, ENVD_VERSION);
	say_started(port);
	if (!flag_get("no-port-forward")->v.b && portfwd_start(flag_get("sandbox-addr")->v.s, (int)port) < 0) {
		fprintf(stderr, "port forwarding disabled: bad -sandbox-addr %s\n", flag_get("sandbox-addr")->v.s);
	} else {
		process_on_activity(portfwd_kick); /* a new server tends to follow */
		if (!flag_get("no-port-forward")->v.b) {
			portfwd_on_scan(ports_scanned);
			waitfor_port_source(portfwd_kick);
		}
	}
	if (resume)
		upgrade_resume_forwards();
	/* SIGTERM/SIGINT end the loop and main returns: children live on in
	 * their own process groups, and sanitizer builds get their exit-time
	 * leak check. */
	static ev_signal sigterm, sigint;
	ev_signal_init(&sigterm, on_stop_signal, SIGTERM);
	ev_signal_init(&sigint, on_stop_signal, SIGINT);
	ev_signal_start(envd_loop, &sigterm);
	ev_signal_start(envd_loop, &sigint);
	ev_unref(envd_loop);
	ev_unref(envd_loop);
	ev_run(envd_loop, 0);
	session_shutdown();
	pcg_shutdown();
	log_info("envd", "stopped");
	return 0;
}
