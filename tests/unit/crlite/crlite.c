// SPDX-License-Identifier: Apache-2.0
// crlite runner (criterion/criterion.h here): runs every registered test in
// a child process of its own and prints Criterion's summary line last.
#include <criterion/criterion.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_FAILED 1
#define EXIT_SKIPPED 77

static struct crlite_test *tests;
static struct crlite_suite *suites;
static size_t n_tests;
/* In a test's process: where a fatal check returns to, so .fini runs. */
static jmp_buf bail;
static bool failed;

void crlite_register(struct crlite_test *t)
{
	t->next = tests;
	tests = t;
	n_tests++;
}

void crlite_register_suite(struct crlite_suite *s)
{
	s->next = suites;
	suites = s;
}

void crlite_fail(const char *file, int line, bool fatal, const char *expr, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[----] %s:%d: %s failed: %s", file, line, fatal ? "Assertion" : "Expectation", expr);
	if (*fmt) {
		fputs(": ", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	failed = true;
	if (fatal)
		longjmp(bail, 1);
}

void crlite_skip(const char *fmt, ...)
{
	va_list ap;

	fputs("[SKIP] ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(EXIT_SKIPPED);
}

void crlite_log(const char *fmt, ...)
{
	va_list ap;

	fputs("[----] ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const struct crlite_suite *suite_of(const struct crlite_test *t)
{
	for (const struct crlite_suite *s = suites; s; s = s->next)
		if (strcmp(s->name, t->suite) == 0)
			return s;
	return NULL;
}

static int by_name(const void *a, const void *b)
{
	const struct crlite_test *x = *(struct crlite_test *const *)a, *y = *(struct crlite_test *const *)b;
	int c = strcmp(x->suite, y->suite);
	return c ? c : strcmp(x->name, y->name);
}

static int run_one(const struct crlite_test *t)
{
	const struct crlite_suite *s = suite_of(t);
	/* volatile: read again after the longjmp of a failed assertion */
	void (*volatile init)(void) = t->opts.init ? t->opts.init : s ? s->opts.init : NULL;
	void (*volatile fini)(void) = t->opts.fini ? t->opts.fini : s ? s->opts.fini : NULL;
	double timeout = t->opts.timeout > 0 ? t->opts.timeout : s ? s->opts.timeout : 0;

	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("crlite: fork");
		return -1;
	}
	if (pid == 0) {
		if (timeout > 0)
			alarm((unsigned)(timeout + 0.999));
		if (setjmp(bail) == 0) {
			if (init)
				init();
			t->fn();
		}
		if (fini)
			fini();
		fflush(NULL);
		_exit(failed ? EXIT_FAILED : 0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		;
	return st;
}

int main(int argc, char **argv)
{
	struct crlite_test **list = calloc(n_tests ? n_tests : 1, sizeof(*list));
	size_t n = 0, pass = 0, fail = 0, crash = 0, skip = 0;

	(void)argc;
	(void)argv; /* Criterion's options (-j2) change nothing here */
	if (!list)
		return 2;
	for (struct crlite_test *t = tests; t; t = t->next)
		list[n++] = t;
	qsort(list, n, sizeof(*list), by_name);
	for (size_t i = 0; i < n; i++) {
		const struct crlite_test *t = list[i];
		if (t->opts.disabled) {
			skip++;
			continue;
		}
		int st = run_one(t);
		if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			pass++;
		} else if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SKIPPED) {
			skip++;
		} else if (st >= 0 && WIFSIGNALED(st)) {
			crash++;
			fail++;
			fprintf(stderr, "[FAIL] %s::%s: CRASH (signal %d%s)\n", t->suite, t->name, WTERMSIG(st),
				WTERMSIG(st) == SIGALRM ? ", timed out" : "");
		} else {
			fail++;
			fprintf(stderr, "[FAIL] %s::%s\n", t->suite, t->name);
		}
	}
	fprintf(stderr, "[====] Synthesis: Tested: %zu | Passing: %zu | Failing: %zu | Crashing: %zu\n",
		pass + fail, pass, fail, crash);
	free(list);
	return fail ? 1 : 0;
}
