/* SPDX-License-Identifier: Apache-2.0 */
/*
 * emuexec.c - lets Criterion start its test workers under qemu-user.
 * Linked only into the unit tests of a cross build (Makefile, ARCH=arm64).
 *
 * Criterion runs every test in a worker process that it starts by
 * execve()ing the test program again. Under qemu-user with no binfmt_misc
 * handler for aarch64 (none is registered on this host) the kernel refuses
 * an aarch64 program with ENOEXEC, so no test would run. This execve()
 * takes the place of libc's in the test program (libcriterion's call binds
 * to the executable's definition) and does what such a handler would do:
 * it execs as libc does and, only when the kernel answered ENOEXEC, the
 * file is an aarch64 ELF and ENVD_TEST_EMULATOR names the emulator
 * (scripts/run-tests.sh sets it, and QEMU_LD_PREFIX for the libraries),
 * runs the same file through the emulator: same pid, arguments and
 * environment. Everything else, the children our sources spawn included,
 * behaves as before. It may run in a vfork child: no allocation.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EMUEXEC_MAX_ARGS 256

static int emuexec_is_aarch64(const char *path)
{
	Elf64_Ehdr h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, &h, sizeof h);
	close(fd);
	return n == (ssize_t)sizeof h && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0 &&
	       h.e_machine == EM_AARCH64;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	const char *emu;
	char *eargv[EMUEXEC_MAX_ARGS + 4];
	int argc = 0, k = 0;

	syscall(SYS_execve, path, argv, envp);
	if (errno != ENOEXEC)
		return -1;
	emu = getenv("ENVD_TEST_EMULATOR");
	if (!emu || !*emu || !emuexec_is_aarch64(path)) {
		errno = ENOEXEC;
		return -1;
	}
	while (argv[argc])
		if (++argc > EMUEXEC_MAX_ARGS) {
			errno = E2BIG;
			return -1;
		}

	/* qemu-user's form: EMULATOR -0 ARGV0 FILE ARGS... */
	eargv[k++] = (char *)emu;
	eargv[k++] = "-0";
	eargv[k++] = argc ? argv[0] : (char *)path;
	eargv[k++] = (char *)path;
	for (int i = 1; i < argc; i++)
		eargv[k++] = argv[i];
	eargv[k] = NULL;
	syscall(SYS_execve, emu, eargv, envp);
	return -1;
}
