/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - /health, /metrics, /envs, /init and the orchestrator-only
 * endpoints (docs/protocol.md, "Control endpoints").
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sandbox/control.h"
#include "sandbox/freeze.h"
#include "base/buf.h"
#include "base/log.h"
#include "sandbox/mmds.h"
#include "sandbox/nfs.h"
#include "sandbox/upgrade.h"
#include "base/sha2.h"
#include "base/state.h"

#ifndef ENVD_VERSION
#define ENVD_VERSION "0.7.0"
#endif

bool control_not_fc;
static bool initialised;

#define INIT_MAX_BODY (8u << 20)

static const struct http_hdr no_store = {"Cache-Control", "no-store"};

void control_health(struct http_req *r)
{
	http_respond(r, 204, NULL, NULL, 0, &no_store, 1);
}

/* ---- /metrics ---- */

struct cpu_sample {
	unsigned long long busy, total;
	bool valid;
};
static struct cpu_sample last_cpu;

static int read_cpu(struct cpu_sample *s)
{
	FILE *f = fopen("/proc/stat", "re");
	unsigned long long v[8] = {0};
	if (!f)
		return -errno;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		       &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 4)
		return -EIO;
	unsigned long long total = 0;
	for (int i = 0; i < 8; i++)
		total += v[i];
	s->total = total;
	s->busy = total - v[3] - v[4];
	s->valid = true;
	return 0;
}

static int cpu_count(void)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512];
	int n = 0;
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "processor", 9) == 0 && strchr(line, ':'))
				n++;
		fclose(f);
	}
	if (n == 0) {
		f = fopen("/proc/stat", "re");
		if (f) {
			while (fgets(line, sizeof(line), f))
				if (strncmp(line, "cpu", 3) == 0 && line[3] >= '0' && line[3] <= '9')
					n++;
			fclose(f);
		}
	}
	return n;
}

static int read_meminfo(unsigned long long *total, unsigned long long *avail, unsigned long long *cache)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long cached = 0, srecl = 0, v;
	bool t = false, a = false;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu kB", &v) == 1) {
			*total = v * 1024;
			t = true;
		} else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
			*avail = v * 1024;
			a = true;
		} else if (sscanf(line, "Cached: %llu kB", &v) == 1) {
			cached = v * 1024;
		} else if (sscanf(line, "SReclaimable: %llu kB", &v) == 1) {
			srecl = v * 1024;
		}
	}
	fclose(f);
	*cache = cached + srecl;
	return t && a ? 0 : -EIO;
}

void control_metrics_init(void)
{
	read_cpu(&last_cpu);
}

void control_metrics(struct http_req *r)
{
	struct cpu_sample now;
	unsigned long long mt = 0, ma = 0, mc = 0;
	struct statfs sf;
	static const struct http_hdr ct = {"Content-Type", "application/json"};

	if (read_cpu(&now) < 0 || read_meminfo(&mt, &ma, &mc) < 0 || statfs("/", &sf) < 0) {
		struct http_hdr h[1] = {ct};
		http_respond(r, 500, NULL, NULL, 0, h, 1);
		return;
	}
	double pct;
	if (!last_cpu.valid)
		last_cpu = now;
	unsigned long long dt = now.total - last_cpu.total;
	long long db = (long long)now.busy - (long long)last_cpu.busy;
	if (db <= 0)
		pct = 0;
	else if (dt == 0)
		pct = 100;
	else
		pct = (double)db / (double)dt * 100.0;
	if (pct > 100)
		pct = 100;
	last_cpu = now;
	char pbuf[32];
	snprintf(pbuf, sizeof(pbuf), "%.2f", pct);
	/* Go prints float32 shortest: 12.50 -> 12.5, 0.00 -> 0 */
	char *dot = strchr(pbuf, '.');
	if (dot) {
		char *e = pbuf + strlen(pbuf) - 1;
		while (e > dot && *e == '0')
			*e-- = '\0';
		if (e == dot)
			*e = '\0';
	}
	unsigned long long used = mt - ma;
	unsigned long long dtot = (unsigned long long)sf.f_blocks * (unsigned long long)sf.f_bsize;
	unsigned long long dused = (unsigned long long)(sf.f_blocks - sf.f_bavail) * (unsigned long long)sf.f_bsize;
	char body[512];
	int n = snprintf(body, sizeof(body),
			 "{\"ts\":%lld,\"cpu_count\":%d,\"cpu_used_pct\":%s,\"mem_total_mib\":%llu,"
			 "\"mem_used_mib\":%llu,\"mem_total\":%llu,\"mem_used\":%llu,\"mem_cache\":%llu,"
			 "\"disk_used\":%llu,\"disk_total\":%llu}\n",
			 (long long)time(NULL), cpu_count(), pbuf, mt / 1024 / 1024, used / 1024 / 1024, mt, used, mc,
			 dused, dtot);
	http_respond(r, 200, "application/json", body, (size_t)n, &no_store, 1);
}

/* ---- /envs ---- */

void control_envs(struct http_req *r)
{
	json_t *o = json_object();
	for (size_t i = 0; i < envstore_count(); i++) {
		const char *k, *v;
		envstore_entry(i, &k, &v);
		json_object_set_new(o, k, json_string(v));
	}
	char *s = json_dumps(o, JSON_COMPACT);
	struct buf out = BUF_INIT(BUF_UNBOUNDED);
	json_decref(o);
	if (!s || buf_append_fmt(&out, "%s\n", s) < 0) {
		free(s);
		http_respond(r, 500, NULL, NULL, 0, NULL, 0);
		return;
	}
	free(s);
	http_respond(r, 200, "application/json", out.p, out.len, &no_store, 1);
	buf_free(&out);
}

/* ---- /init ---- */

struct init_req {
	struct http_req *r;      /* NULL once the client went away */
	struct buf body;         /* bounded by INIT_MAX_BODY */
	bool too_big;
	json_t *root;            /* parsed body (NULL for an empty body) */
	struct mmds_fetch *fetch;
	int mmds_tries;
	struct init_req *next;   /* waiting for the init lock */
	bool waiting, running;
	bool nfs_pending;
	bool healing;            /* the route self-heal job holds a pointer */
	bool thaw;               /* authorised: thaw the workload when done */
	bool audited;
	char audit[160];         /* X-Envd-Freeze-Audit value */
};

/* One /init at a time: the rest wait in arrival order. */
static struct init_req *init_head, *init_tail;
static struct init_req *init_current;

/*
 * RFC 3339 with optional fraction and any offset -> ns since the epoch.
 * Returns 0 or -EINVAL.
 */
int control_parse_rfc3339(const char *s, int64_t *ns)
{
	int Y, M, D, h, m, sec, n = 0;
	if (sscanf(s, "%4d-%2d-%2d%n", &Y, &M, &D, &n) != 3 || n != 10)
		return -EINVAL;
	s += 10;
	if (*s != 'T' && *s != 't' && *s != ' ')
		return -EINVAL;
	s++;
	if (sscanf(s, "%2d:%2d:%2d%n", &h, &m, &sec, &n) != 3 || n != 8)
		return -EINVAL;
	s += 8;
	long long frac = 0;
	int digits = 0;
	if (*s == '.') {
		s++;
		while (*s >= '0' && *s <= '9') {
			if (digits < 9) {
				frac = frac * 10 + (*s - '0');
				digits++;
			}
			s++;
		}
		if (digits == 0)
			return -EINVAL;
		while (digits < 9) {
			frac *= 10;
			digits++;
		}
	}
	long off = 0;
	if (*s == 'Z' || *s == 'z') {
		s++;
	} else if (*s == '+' || *s == '-') {
		int oh, om;
		if (sscanf(s + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5)
			return -EINVAL;
		off = (oh * 3600L + om * 60L) * (*s == '-' ? -1 : 1);
		s += 6;
	} else {
		return -EINVAL;
	}
	if (*s || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
		return -EINVAL;
	/* Days from civil (proleptic Gregorian), no timezone involved. */
	int y = Y - (M <= 2);
	long era = (y >= 0 ? y : y - 399) / 400;
	long yoe = y - era * 400;
	long doy = (153 * (M + (M > 2 ? -3 : 9)) + 2) / 5 + D - 1;
	long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	long long days = era * 146097LL + doe - 719468;
	long long secs = days * 86400 + h * 3600 + m * 60 + sec - off;
	*ns = secs * 1000000000LL + frac;
	return 0;
}

/* True if the raw JSON string value of "accessToken" contains a backslash. */
static bool token_has_escape(const char *body, size_t len)
{
	const char *p = body, *end = body + len;
	while ((p = memmem(p, (size_t)(end - p), "\"accessToken\"", 13))) {
		p += 13;
		while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
			p++;
		if (p >= end || *p != ':')
			continue;
		p++;
		while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
			p++;
		if (p >= end || *p != '"')
			continue;
		for (p++; p < end && *p != '"'; p++)
			if (*p == '\\')
				return true;
	}
	return false;
}

static void init_fail(struct http_req *r, int status, const char *text)
{
	struct http_hdr h[2] = {{"X-Envd-Version", ENVD_VERSION}};
	size_t nh = 1;
	if (upgrade_handover_header())
		h[nh++] = (struct http_hdr){"X-Envd-Handover", upgrade_handover_header()};
	if (text)
		http_respond(r, status, "text/plain; charset=utf-8", text, strlen(text), h, nh);
	else
		http_respond(r, status, NULL, NULL, 0, h, nh);
}

static void set_clock(int64_t ts_ns)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
	int64_t behind = ts_ns - now_ns;
	if (behind > 50000000LL || -behind > 5000000000LL) {
		struct timespec t = {.tv_sec = ts_ns / 1000000000LL, .tv_nsec = ts_ns % 1000000000LL};
		if (clock_settime(CLOCK_REALTIME, &t) < 0)
			log_warn("envd", "set clock: %s", strerror(errno));
	}
}

char control_ca_bundle[256] = "/etc/ssl/certs/ca-certificates.crt";
char control_ca_dir[256] = "/usr/local/share/ca-certificates";

/*
 * Rotation: the previous egress CA must stop being trusted, so every copy
 * of it leaves the bundle. The new bundle is written next to the old one
 * and renamed over it, so a reader never sees half a file.
 */
static int ca_remove(const char *old)
{
	char tmp[300];
	size_t olen = strlen(old), len = 0, cap = 0;
	char *buf = NULL;
	int fd = open(control_ca_bundle, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (;;) {
		if (len + 65536 + 1 > cap) {
			char *nb = realloc(buf, cap = (len + 65536 + 1) * 2);
			if (!nb) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	size_t w = 0;
	bool found = false;
	for (size_t r = 0; r < len;) {
		if (olen && len - r >= olen && memcmp(buf + r, old, olen) == 0) {
			r += olen;
			found = true;
			continue;
		}
		buf[w++] = buf[r++];
	}
	if (!found) {
		free(buf);
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s.envd-tmp", control_ca_bundle);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	ssize_t k = write(fd, buf, w);
	int e = k == (ssize_t)w ? 0 : (k < 0 ? errno : EIO);
	free(buf);
	if (!e && fchmod(fd, 0644) < 0)
		e = errno;
	close(fd);
	if (!e && rename(tmp, control_ca_bundle) < 0)
		e = errno;
	if (e)
		unlink(tmp);
	return -e;
}

static int install_ca(const char *pem, char *err, size_t errlen)
{
	static char *last_pem;
	size_t n = strlen(pem);
	while (n > 0 && pem[n - 1] == '\n')
		n--;
	char *norm = malloc(n + 2);
	if (!norm)
		return -ENOMEM;
	memcpy(norm, pem, n);
	norm[n] = '\n';
	norm[n + 1] = '\0';
	if (last_pem && strcmp(last_pem, norm) == 0) {
		free(norm);
		return 0;
	}
	int fd = open(control_ca_bundle, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "failed to install CA bundle: open CA bundle: open %s: %s", control_ca_bundle,
			 strerror(errno));
		free(norm);
		return -1;
	}
	ssize_t w = write(fd, norm, n + 1);
	close(fd);
	if (w != (ssize_t)(n + 1)) {
		snprintf(err, errlen, "failed to install CA bundle: append CA cert: short write");
		free(norm);
		return -1;
	}
	char crt[300];
	mkdir(control_ca_dir, 0755);
	snprintf(crt, sizeof(crt), "%s/e2b-ca.crt", control_ca_dir);
	int f2 = open(crt, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f2 >= 0) {
		if (write(f2, norm, n + 1) < 0)
			log_warn("envd", "write e2b-ca.crt: %s", strerror(errno));
		close(f2);
	}
	if (last_pem) {
		int rc = ca_remove(last_pem);
		if (rc < 0)
			log_warn("envd", "remove the previous CA from %s: %s", control_ca_bundle, strerror(-rc));
		else
			log_info("envd", "CA rotated: the previous CA left %s", control_ca_bundle);
	}
	free(last_pem);
	last_pem = norm;
	return 0;
}

static void update_hosts(const char *ip)
{
	FILE *f = fopen("/etc/hosts", "re");
	char line[1024];
	struct buf out = BUF_INIT(BUF_UNBOUNDED);
	bool present = false;
	if (buf_append(&out, "", 0) < 0) {
		if (f)
			fclose(f);
		return;
	}
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char a[256], b[256];
			if (sscanf(line, "%255s %255s", a, b) == 2 && strcmp(b, "events.e2b.local") == 0) {
				if (strcmp(a, ip) == 0)
					present = true;
				continue;
			}
			if (buf_append(&out, line, strlen(line)) < 0)
				break;
		}
		fclose(f);
	}
	if (!present) {
		FILE *w = fopen("/etc/hosts", "we");
		if (w) {
			fputs((const char *)out.p, w);
			fprintf(w, "%s        events.e2b.local\n", ip);
			fclose(w);
		}
	}
	buf_free(&out);
	char addr[300];
	snprintf(addr, sizeof(addr), "http://%s", ip);
	envstore_set_internal("E2B_EVENTS_ADDRESS", addr);
}

static void init_free(struct init_req *ir)
{
	if (ir->fetch)
		mmds_cancel(ir->fetch);
	json_decref(ir->root);
	buf_free(&ir->body);
	free(ir);
}

static void init_run_next(void);
static void init_complete(struct init_req *ir);
static void init_finish(struct init_req *ir, int status, const char *text);

static void init_nfs_done(void *ud, const char *err)
{
	struct init_req *ir = ud;
	ir->nfs_pending = false;
	if (err) {
		init_finish(ir, 400, err);
		return;
	}
	init_complete(ir);
}

/* The current /init is over: answer (if still possible), free, go on. */
static void init_finish(struct init_req *ir, int status, const char *text)
{
	/* Authorised: the workload is thawed whatever the outcome. */
	if (ir->thaw) {
		int rc = freeze_thaw();

		if (rc < 0)
			log_info("freeze", "thaw on /init: %s", strerror(-rc));
	}
	if (ir->r) {
		struct http_req *r = ir->r;
		ir->r->ud = NULL;
		ir->r = NULL;
		if (status == 204) {
			struct http_hdr h[4] = {{"X-Envd-Version", ENVD_VERSION}, no_store};
			size_t nh = 2;
			if (ir->audited)
				h[nh++] = (struct http_hdr){"X-Envd-Freeze-Audit", ir->audit};
			if (upgrade_handover_header())
				h[nh++] = (struct http_hdr){"X-Envd-Handover", upgrade_handover_header()};
			upgrade_init_done();
			http_respond(r, 204, NULL, NULL, 0, h, nh);
		} else {
			init_fail(r, status, text);
		}
	}
	if (init_current == ir)
		init_current = NULL;
	init_free(ir);
	init_run_next();
}

/* Validate the body's shape (docs/protocol.md, "POST /init"); false
   means 400. */
static bool init_parse(struct init_req *ir)
{
	json_error_t jerr;
	const char *body = (const char *)ir->body.p;
	if (ir->body.len == 0)
		return true;
	ir->root = json_loadb(body, ir->body.len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!ir->root || !json_is_object(ir->root) || token_has_escape(body, ir->body.len))
		return false;
	json_t *tok = json_object_get(ir->root, "accessToken");
	if (tok && !json_is_null(tok) && (!json_is_string(tok) || json_string_length(tok) == 0))
		return false;
	json_t *envv = json_object_get(ir->root, "envVars");
	if (envv && !json_is_null(envv)) {
		if (!json_is_object(envv))
			return false;
		const char *k;
		json_t *v;
		json_object_foreach(envv, k, v) if (!json_is_string(v)) return false;
	}
	json_t *ts = json_object_get(ir->root, "timestamp");
	int64_t ns;
	if (ts && !json_is_null(ts) && (!json_is_string(ts) || control_parse_rfc3339(json_string_value(ts), &ns) < 0))
		return false;
	static const char *const strs[] = {"defaultUser", "defaultWorkdir", "caBundle", "hyperloopIP", "lifecycleID"};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		json_t *v = json_object_get(ir->root, strs[i]);
		if (v && !json_is_null(v) && !json_is_string(v))
			return false;
	}
	json_t *vm = json_object_get(ir->root, "volumeMounts");
	if (vm && !json_is_null(vm)) {
		if (!json_is_array(vm))
			return false;
		size_t i;
		json_t *e;
		json_array_foreach(vm, i, e) {
			if (!json_is_object(e))
				return false;
			json_t *t = json_object_get(e, "nfs_target"), *p = json_object_get(e, "path");
			if ((t && !json_is_string(t)) || (p && !json_is_string(p)))
				return false;
		}
	}
	return true;
}

static const char *init_str(struct init_req *ir, const char *key)
{
	json_t *v = ir->root ? json_object_get(ir->root, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Authorised: the replay guard, then apply the data, mark initialised,
   refresh the sandbox ids from MMDS, answer 204. */
static void init_apply(struct init_req *ir)
{
	const char *tv = init_str(ir, "accessToken");
	const char *ts = init_str(ir, "timestamp");
	int64_t ts_ns = 0;

	/* Before the thaw scheduled below: what a snapshot would have held. */
	ir->audited = freeze_audit(ir->audit, sizeof(ir->audit));
	ir->thaw = true;
	if (ts)
		control_parse_rfc3339(ts, &ts_ns);
	/* Replay guard: only data at least as new as what was applied. */
	if (ts && ts_ns < state_last_init_ns) {
		initialised = true;
		init_finish(ir, 204, NULL);
		return;
	}
	if (ts) {
		state_last_init_ns = ts_ns;
		set_clock(ts_ns);
	}
	json_t *envv = ir->root ? json_object_get(ir->root, "envVars") : NULL;
	if (json_is_object(envv)) {
		size_t n = json_object_size(envv), i = 0;
		const char **keys = calloc(n + 1, sizeof(*keys));
		const char **vals = calloc(n + 1, sizeof(*vals));
		if (keys && vals) {
			const char *k;
			json_t *v;
			json_object_foreach(envv, k, v) {
				keys[i] = k;
				vals[i++] = json_string_value(v);
			}
			envstore_replace_user(keys, vals, i);
		}
		free(keys);
		free(vals);
	}
	if (tv)
		state_token_set(tv, strlen(tv));
	else if (state_token_is_set())
		state_token_clear();
	const char *hl = init_str(ir, "hyperloopIP");
	if (hl && *hl)
		update_hosts(hl);
	const char *du = init_str(ir, "defaultUser"), *dw = init_str(ir, "defaultWorkdir");
	if (du && *du)
		state_set_default_user(du);
	if (dw && *dw)
		state_set_default_workdir(dw);
	/* Kept for a restart after a crash: the token must survive it. */
	upgrade_keep_init_state();
	const char *ca = init_str(ir, "caBundle");
	if (ca && *ca) {
		char err[512];
		if (install_ca(ca, err, sizeof(err)) != 0) {
			init_finish(ir, 400, err);
			return;
		}
	}
	json_t *vm = ir->root ? json_object_get(ir->root, "volumeMounts") : NULL;
	if (json_is_array(vm) && json_array_size(vm) > 0) {
		struct nfs_volume vols[32];
		size_t n = 0, i;
		json_t *e;
		json_array_foreach(vm, i, e) {
			if (n == 32)
				break;
			vols[n].target = (char *)json_string_value(json_object_get(e, "nfs_target"));
			vols[n].path = (char *)json_string_value(json_object_get(e, "path"));
			n++;
		}
		if (nfs_mount_async(vols, n, init_str(ir, "lifecycleID"), init_nfs_done, ir) < 0) {
			init_finish(ir, 400, "failed to setup NFS volumes: cannot queue the mount job");
			return;
		}
		ir->nfs_pending = true;
		return;
	}
	init_complete(ir);
}

static void init_complete(struct init_req *ir)
{
	initialised = true;
	/* Refresh the sandbox ids for a while (the VM may be a resumed copy). */
	if (!control_not_fc)
		mmds_poll_ids(60.);
	init_finish(ir, 204, NULL);
}

/* Authorisation, once MMDS answered (or could not): current token, MMDS
   hash, or first set-up. */
static void init_decide(struct init_req *ir, bool mmds_exists, const char *hash)
{
	const char *tv = init_str(ir, "accessToken");
	bool matches = false;
	if (mmds_exists) {
		uint8_t d[SHA512_DIGEST_LEN];
		char hex[SHA512_DIGEST_LEN * 2 + 1];
		/* No token in the request matches only the explicit "reset
		 * allowed" marker: the hash of the empty string. */
		sha512(tv ? tv : "", tv ? strlen(tv) : 0, d);
		sha2_hex(d, sizeof(d), hex);
		matches = strcasecmp(hex, hash) == 0;
	}
	if (matches || (!state_token_is_set() && !mmds_exists)) {
		init_apply(ir);
		return;
	}
	init_finish(ir, 401, tv ? "access token validation failed" : "access token reset not authorized");
}

static void init_mmds_done(void *ud, int rc, const struct mmds_meta *m);

/* After the metadata route was repaired (user code had redirected the
 * metadata address; our RETURN rules now come first in the nat table's
 * OUTPUT and PREROUTING chains): the one retry. */
static void init_mmds_retry(void *ud)
{
	struct init_req *ir = ud;
	ir->healing = false;
	ir->fetch = mmds_fetch(init_mmds_done, ir);
	if (!ir->fetch)
		init_decide(ir, false, "");
}

static void init_mmds_done(void *ud, int rc, const struct mmds_meta *m)
{
	struct init_req *ir = ud;
	ir->fetch = NULL;
	if (rc < 0 && ++ir->mmds_tries < 2) {
		/* User code may have redirected the metadata address: re-pin
		 * the route, then try once more. */
		if (mmds_heal_route(init_mmds_retry, ir) == 0) {
			ir->healing = true;
			return;
		}
		ir->fetch = mmds_fetch(init_mmds_done, ir);
		if (ir->fetch)
			return;
	}
	init_decide(ir, rc == 0 && m->token_hash[0], rc == 0 ? m->token_hash : "");
}

static void init_run(struct init_req *ir)
{
	const char *tv = init_str(ir, "accessToken");
	init_current = ir;
	ir->running = true;
	if (state_token_is_set() && tv && state_token_equals(tv, strlen(tv))) {
		init_apply(ir);
		return;
	}
	if (control_not_fc) {
		init_decide(ir, false, "");
		return;
	}
	ir->fetch = mmds_fetch(init_mmds_done, ir);
	if (!ir->fetch)
		init_decide(ir, false, "");
}

static void init_run_next(void)
{
	while (!init_current && init_head) {
		struct init_req *ir = init_head;
		init_head = ir->next;
		if (!init_head)
			init_tail = NULL;
		ir->waiting = false;
		init_run(ir);
	}
}

static void init_body(struct http_req *r, const uint8_t *p, size_t n)
{
	struct init_req *ir = r->ud;
	/* Over the bound or out of memory: the body is refused with 400. */
	if (!ir->too_big && buf_append(&ir->body, p, n) < 0)
		ir->too_big = true;
}

static void init_body_end(struct http_req *r)
{
	struct init_req *ir = r->ud;
	if (ir->too_big || !init_parse(ir)) {
		r->ud = NULL;
		init_fail(r, 400, NULL);
		init_free(ir);
		return;
	}
	ir->waiting = true;
	if (init_tail)
		init_tail->next = ir;
	else
		init_head = ir;
	init_tail = ir;
	init_run_next();
}

static void init_close(struct http_req *r, bool completed)
{
	struct init_req *ir = r->ud;
	if (!ir)
		return;
	ir->r = NULL;
	if (ir->waiting) {
		/* Left while waiting for the lock: drop it from the queue. */
		struct init_req **pp = &init_head, *prev = NULL;
		while (*pp && *pp != ir) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (*pp)
			*pp = ir->next;
		if (init_tail == ir)
			init_tail = prev;
		init_free(ir);
	} else if (!ir->running) {
		init_free(ir);
	}
	/* A running /init completes on its own and is freed then. */
}

void control_init(struct http_req *r)
{
	struct init_req *ir = calloc(1, sizeof(*ir));
	if (!ir) {
		init_fail(r, 503, NULL);
		return;
	}
	ir->r = r;
	buf_init(&ir->body, INIT_MAX_BODY);
	r->ud = ir;
	r->on_body = init_body;
	r->on_body_end = init_body_end;
	r->on_close = init_close;
}

bool control_initialised(void) { return initialised; }

/* ---- orchestrator-only endpoints ---- */

void control_freeze(struct http_req *r)
{
	log_info("envd", "freeze requested");
	freeze_http(r);
}
void control_unfreeze(struct http_req *r) { freeze_http_unfreeze(r); }

void control_collapse(struct http_req *r)
{
	static const char body[] =
		"{\"regions\":0,\"chunks\":0,\"collapsed\":0,\"alreadyHuge\":0,\"skipped\":0,\"elapsedMs\":0}\n";
	http_respond(r, 200, "application/json", body, sizeof(body) - 1, &no_store, 1);
}

void control_fsfreeze(struct http_req *r) { freeze_http_fs(r, true); }
void control_fsthaw(struct http_req *r) { freeze_http_fs(r, false); }

void control_upgrade(struct http_req *r)
{
	if (!initialised) {
		http_respond_text_error(r, 409, "envd not initialized");
		return;
	}
	upgrade_request(r);
}
