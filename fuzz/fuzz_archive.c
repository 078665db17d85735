/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extractor's validation: bytes from the fuzzer are an archive (the
 * first byte picks tar, tar.gz or zip) extracted into a fresh directory.
 * Whatever the input, nothing may appear outside that directory: the
 * harness checks that its parent holds only the directory afterwards.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/archive.h"

static char base[64];
static int base_fd = -1;

static void remove_base(void)
{
	arch_remove_tree(AT_FDCWD, base);
}

static int entries_in(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY);
	DIR *d = fdopendir(fd);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	if (n < 1)
		return 0;
	if (base_fd < 0) {
		snprintf(base, sizeof(base), "/tmp/fuzz-archive.XXXXXX");
		if (!mkdtemp(base))
			abort();
		base_fd = open(base, O_RDONLY | O_DIRECTORY);
		atexit(remove_base);
		arch_limits = (struct arch_limits){ .max_entries = 64, .max_bytes = 1 << 20, .max_ratio = 200 };
	}
	if (mkdirat(base_fd, "root", 0700) < 0)
		abort();
	int root = openat(base_fd, "root", O_RDONLY | O_DIRECTORY);
	int in = memfd_create("in", 0), list = memfd_create("list", 0);
	if (root < 0 || in < 0 || list < 0 || write(in, data + 1, n - 1) != (ssize_t)(n - 1))
		abort();
	struct arch_extract *x = calloc(1, sizeof(*x));
	x->archive_fd = in;
	x->archive_size = n - 1;
	x->format = (enum arch_format)(data[0] % 3);
	x->root_fd = root;
	x->final_dir = "/fuzz";
	x->uid = getuid();
	x->gid = getgid();
	x->list_fd = list;
	if (arch_extract_run(x) < 0 && (x->status < 400 || !x->msg[0]))
		abort(); /* a failure always carries a status and a message */
	if (entries_in(base_fd) != 1)
		abort(); /* something was created beside the root */
	free(x);
	close(in);
	close(list);
	close(root);
	if (arch_remove_tree(base_fd, "root") < 0)
		abort();
	return 0;
}
