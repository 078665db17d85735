/* SPDX-License-Identifier: Apache-2.0 */
/*
 * failalloc.c - the wrapped allocator behind failalloc.h. Linked only into
 * *_alloc_test binaries, with -Wl,--wrap for each function below.
 */
#include "failalloc.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static unsigned long fa_calls, fa_nth;
static bool fa_tripped;

/* True when this allocation is the one to fail. */
static bool fa_fail(void)
{
	fa_calls++;
	if (fa_nth && fa_calls == fa_nth) {
		fa_tripped = true;
		/* FAILALLOC_TRACE=1: show where the failing allocation was made. */
		if (getenv("FAILALLOC_TRACE"))
			__sanitizer_print_stack_trace();
		errno = ENOMEM;
		return true;
	}
	return false;
}

void *__wrap_malloc(size_t n)
{
	return fa_fail() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
	return fa_fail() ? NULL : __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fa_fail() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return fa_fail() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	return fa_fail() ? NULL : __real_strndup(s, n);
}

static bool fa_jansson;

/* See failalloc_include_jansson() in failalloc.h. */
static void *fa_json_malloc(size_t n)
{
	return fa_jansson ? __wrap_malloc(n) : __real_malloc(n);
}

void failalloc_include_jansson(bool on)
{
	fa_jansson = on;
}

static void fa_json_free(void *p)
{
	free(p);
}

/* Before any test: jansson allocates through our hook. */
__attribute__((constructor)) static void fa_init(void)
{
	json_set_alloc_funcs(fa_json_malloc, fa_json_free);
}

void failalloc_arm(unsigned long nth)
{
	fa_nth = nth;
	fa_calls = 0;
	fa_tripped = false;
}

void failalloc_disarm(void)
{
	failalloc_arm(0);
}

unsigned long failalloc_calls(void)
{
	return fa_calls;
}

bool failalloc_tripped(void)
{
	return fa_tripped;
}

unsigned long failalloc_count(failalloc_op op, void *ctx)
{
	unsigned long n;
	int rc;

	failalloc_arm(0);
	rc = op(ctx);
	n = fa_calls;
	failalloc_disarm();
	cr_assert_eq(rc, 0, "the operation succeeds when no allocation fails (rc %d)", rc);
	return n;
}

unsigned long failalloc_run(const char *name, failalloc_op op, void *ctx, int flags)
{
	unsigned long n = failalloc_count(op, ctx);

	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "%s: leaks without failures", name);
	for (unsigned long i = 1; i <= n; i++) {
		int rc;

		if (getenv("FAILALLOC_TRACE"))
			fprintf(stderr, "failalloc: %s: failing %lu of %lu\n", name, i, n);
		failalloc_arm(i);
		rc = op(ctx);
		bool tripped = fa_tripped;
		failalloc_disarm();
		if (tripped && !(flags & FAILALLOC_MAY_ABSORB))
			cr_assert_lt(rc, 0, "%s: allocation %lu of %lu failed but the call succeeded",
				     name, i, n);
		if (!tripped)
			cr_assert_eq(rc, 0, "%s: run %lu of %lu failed without an injected failure",
				     name, i, n);
		cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,
			     "%s: leak after failing allocation %lu of %lu", name, i, n);
	}
	return n;
}
