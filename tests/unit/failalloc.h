/* SPDX-License-Identifier: Apache-2.0 */
/*
 * failalloc.h - allocation-failure injection for unit tests.
 *
 * Every allocation made by the code under test goes through a counter that
 * can be armed to fail the i-th call. failalloc_run() does what nghttp2's
 * tests do: run an operation once to count its allocations N, then N more
 * times with the 1st, 2nd, ... N-th allocation failing, checking each time
 * that the operation reports failure and leaks nothing (LeakSanitizer).
 *
 * How it hooks in: tests named tests/unit/<name>_alloc_test.c are linked
 * (Makefile) with tests/unit/failalloc.c and -Wl,--wrap=malloc,calloc,
 * realloc,strdup,strndup, so every call to those from our objects (and the
 * test) lands in failalloc.c. Allocations made inside shared libraries are
 * not wrapped, except jansson's, which failalloc can route through the
 * counter with json_set_alloc_funcs() (failalloc_include_jansson()).
 *
 * jansson is left out by default: jansson 2.14 (Debian 12) ignores a failed
 * allocation while lexing (upstream issue akheron/jansson#362, still open)
 * and then writes past its buffer, so failing its allocations crashes inside
 * the library, not in our code. Its allocations are bounded by our message
 * limit (-max-message) and made on an overcommitting kernel. (Requests are
 * parsed by yajl, whose allocations go through proto/pbjson.c's arena and
 * so are counted and failed like ours.)
 *
 * Adding a core (for example the HTTP/1.1 parser or the Connect decoder):
 *   1. create tests/unit/<core>_alloc_test.c, #include "failalloc.h";
 *   2. write `static int op(void *ctx)` that runs the core on fixed input
 *      and returns 0 on success (checking the result) or a negative value
 *      when the core reported an error; it must free what it got;
 *   3. Test(<core>_alloc, every_failure) { failalloc_run("name", op, ctx, 0); }
 *      and, when the core is meant never to allocate,
 *      cr_assert_eq(failalloc_count(op, ctx), 0).
 * Nothing else: `make unit` builds and runs it with the wrapper.
 *
 * Debugging: FAILALLOC_TRACE=1 build/asan/tests/<core>_alloc_test prints
 * which allocation is failed in each run, with its stack.
 */
#ifndef ENVD_FAILALLOC_H
#define ENVD_FAILALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* op: 0 = success (result checked by op), < 0 = clean failure. */
typedef int (*failalloc_op)(void *ctx);

/* Flags for failalloc_run(). */
enum {
	/* Some failures are absorbed by design (a fallback path): a run whose
	   injected failure still ends in success is accepted. */
	FAILALLOC_MAY_ABSORB = 1,
};

/*
 * Fail the nth allocation from now (1-based); 0 counts without failing.
 * Resets the call counter and the tripped flag.
 */
void failalloc_arm(unsigned long nth);
void failalloc_disarm(void);
/* Allocation calls since the last arm/disarm. */
unsigned long failalloc_calls(void);
/* Whether the armed failure has happened. */
bool failalloc_tripped(void);

/* Count and fail jansson's allocations too (off by default; see above). */
void failalloc_include_jansson(bool on);

/* Allocations one successful run of op makes (asserts that op succeeds). */
unsigned long failalloc_count(failalloc_op op, void *ctx);

/*
 * Count op's allocations N, then run it N times failing the i-th; asserts
 * (Criterion) that each run fails cleanly and that no run leaks. Returns N.
 */
unsigned long failalloc_run(const char *name, failalloc_op op, void *ctx, int flags);

#endif
