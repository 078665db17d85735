/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sandbox/workload.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "base/errstr.h"
#include "process/cgroup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static char root_dir[PATH_MAX - 32], user_dir[PATH_MAX], ptys_dir[PATH_MAX];
static bool on;
/* What the start-up line says about cgroups (workload_status()). */
static char status[PATH_MAX + 128] = "cgroups off";

const char *workload_root(void) { return on ? root_dir : NULL; }
const char *workload_user_dir(void) { return on ? user_dir : NULL; }
const char *workload_ptys_dir(void) { return on ? ptys_dir : NULL; }

/* Start-up notes go to stderr, like the other start-up messages. */
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Why cgroups are off: said once, in the start-up line (workload_status()). */
static void off(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void off(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(status, sizeof(status), fmt, ap);
	va_end(ap);
}

const char *workload_status(void) { return status; }

static bool is_cgroup2(const char *dir)
{
	struct statfs sf;

	return statfs(dir, &sf) == 0 && (unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
		    r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

const char *workload_find_root(char *out, size_t len)
{
	static const char std[] = "/sys/fs/cgroup";
	char line[4096];
	FILE *f;

	if (is_cgroup2(std)) {
		snprintf(out, len, "%s", std);
		return out;
	}
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mountpoint options... - fstype source */
		char *sep = strstr(line, " - cgroup2 ");
		char *mp = line;

		if (!sep)
			continue;
		for (int i = 0; i < 4 && mp; i++) {
			mp = strchr(mp, ' ');
			if (mp)
				mp++;
		}
		if (!mp)
			continue;
		char *end = strchr(mp, ' ');
		if (!end || end > sep)
			continue;
		*end = '\0';
		unescape(mp);
		if (strlen(mp) >= len || !is_cgroup2(mp))
			continue;
		snprintf(out, len, "%s", mp);
		fclose(f);
		return out;
	}
	fclose(f);
	return NULL;
}

static unsigned long long mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	char line[256];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* Missing or refused property files are skipped: one line each, no more. */
static void prop(const char *dir, const char *file, const char *val)
{
	int rc = pcg_write(dir, file, val);

	/* A controller the kernel or the parent does not offer has no files:
	 * the start-up line lists the controllers there are. */
	if (rc < 0 && rc != -ENOENT)
		note("cgroups: skipping %s/%s=%s: %s", dir, file, val, go_strerror(-rc));
}

/* Hand controllers down; each separately, since any may be absent. */
static void delegate(const char *dir)
{
	static const char *const ctl[] = { "+cpu", "+io", "+memory", "+pids" };
	char have[256];

	if (pcg_read(dir, "cgroup.controllers", have, sizeof(have)) < 0)
		return;
	for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++)
		if (strstr(have, ctl[i] + 1))
			prop(dir, "cgroup.subtree_control", ctl[i]);
}

static bool make(const char *dir)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		off("cgroups off: mkdir %s: %s", dir, go_strerror(errno));
		return false;
	}
	return true;
}

bool workload_setup(const char *root, bool disabled)
{
	unsigned long long total, reserve, mem_max;
	char v[32];
	size_t n;

	if (disabled) {
		off("cgroups off (-no-cgroups)");
		return false;
	}
	if (!root) {
		off("cgroups off: no cgroup2 filesystem is mounted");
		return false;
	}
	if (!is_cgroup2(root)) {
		off("cgroups off: %s is not a cgroup2 filesystem", root);
		return false;
	}
	if (geteuid() != 0) {
		off("cgroups off: not running as root (cgroup2 at %s)", root);
		return false;
	}
	n = strlen(root);
	while (n > 1 && root[n - 1] == '/')
		n--;
	if (n >= sizeof(root_dir)) {
		off("cgroups off: root path too long");
		return false;
	}
	memcpy(root_dir, root, n);
	root_dir[n] = '\0';
	snprintf(user_dir, sizeof(user_dir), "%s/user", root_dir);
	snprintf(ptys_dir, sizeof(ptys_dir), "%s/ptys", root_dir);

	/* Keep an eighth of RAM (at most 128 MiB) out of the workload's reach. */
	total = mem_total();
	reserve = total / 8 < (128ull << 20) ? total / 8 : (128ull << 20);
	mem_max = total - reserve;

	delegate(root_dir);
	if (!make(ptys_dir) || !make(user_dir))
		return false;
	prop(ptys_dir, "cpu.weight", "200");
	prop(ptys_dir, "io.weight", "default 50");
	prop(user_dir, "cpu.weight", "50");
	prop(user_dir, "io.weight", "default 10");
	if (total) {
		snprintf(v, sizeof(v), "%llu", mem_max);
		prop(ptys_dir, "memory.high", v);
		prop(ptys_dir, "memory.max", v);
		prop(user_dir, "memory.high", v);
		prop(user_dir, "memory.max", v);
	}
	/* Each command gets a leaf below these: pass the controllers on. */
	delegate(user_dir);
	delegate(ptys_dir);
	if (pcg_configure(user_dir, ptys_dir) < 0) {
		off("cgroups off: bad paths under %s", root_dir);
		return false;
	}
	on = true;
	snprintf(status, sizeof(status), "cgroups under %s (controllers for limits:%s%s%s%s)", root_dir,
		 pcg_controllers() & PCG_CPU ? " cpu" : "", pcg_controllers() & PCG_MEMORY ? " memory" : "",
		 pcg_controllers() & PCG_PIDS ? " pids" : "",
		 pcg_controllers() & (PCG_CPU | PCG_MEMORY | PCG_PIDS) ? "" : " none");
	return true;
}
