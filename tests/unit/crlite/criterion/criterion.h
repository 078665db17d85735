/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crlite: the part of Criterion's interface our unit tests use, for the
 * builds Criterion itself does not exist for (the static aarch64 build run
 * under qemu-user: Debian ships Criterion for the host's glibc only).
 *
 * Same shape as Criterion where the tests can tell: every test runs in a
 * child process of its own (fresh globals; a crash is that test's alone),
 * suite .init/.fini around each test of the suite, a test's own .init and
 * .fini in their place, .timeout in seconds, and the runner's last line is
 * Criterion's "Synthesis: Tested: N | Passing: N | Failing: N | Crashing: N"
 * (scripts/run-tests.sh reads it). Assertions compare with == and strcmp,
 * so operands need no type table; a failed cr_assert ends the test, a
 * failed cr_expect marks it failed and goes on.
 */
#ifndef CRLITE_CRITERION_H
#define CRLITE_CRITERION_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* musl defines stdin, stdout and stderr as "(stdin)" and so on, which breaks
 * member accesses such as data.stdout of the generated protobuf-c structs;
 * without the macros the names still denote the same objects. */
#undef stdin
#undef stdout
#undef stderr

struct crlite_opts {
	void (*init)(void);
	void (*fini)(void);
	double timeout;
	int disabled;
};

struct crlite_test {
	const char *suite, *name;
	void (*fn)(void);
	struct crlite_opts opts;
	struct crlite_test *next;
};

struct crlite_suite {
	const char *name;
	struct crlite_opts opts;
	struct crlite_suite *next;
};

void crlite_register(struct crlite_test *t);
void crlite_register_suite(struct crlite_suite *s);
/* Reports a failed check; never returns when fatal. */
void crlite_fail(const char *file, int line, bool fatal, const char *expr, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void crlite_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void crlite_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define Test(suite_, name_, ...)                                                                    \
	static void suite_##_##name_##_fn(void);                                                    \
	static struct crlite_test suite_##_##name_##_t = { #suite_, #name_, suite_##_##name_##_fn, \
							   { __VA_ARGS__ }, 0 };                   \
	__attribute__((constructor)) static void suite_##_##name_##_reg(void)                       \
	{                                                                                           \
		crlite_register(&suite_##_##name_##_t);                                             \
	}                                                                                           \
	static void suite_##_##name_##_fn(void)

#define TestSuite(suite_, ...)                                                                 \
	static struct crlite_suite suite_##_suite_s = { #suite_, { __VA_ARGS__ }, 0 };         \
	__attribute__((constructor)) static void suite_##_suite_reg(void)                       \
	{                                                                                       \
		crlite_register_suite(&suite_##_suite_s);                                       \
	}

#define CRLITE_CHECK(fatal, ok, expr, ...)                                     \
	do {                                                                   \
		if (!(ok))                                                     \
			crlite_fail(__FILE__, __LINE__, fatal, expr, "" __VA_ARGS__); \
	} while (0)

#define cr_assert(c, ...) CRLITE_CHECK(true, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) CRLITE_CHECK(false, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) CRLITE_CHECK(true, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) CRLITE_CHECK(false, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) crlite_fail(__FILE__, __LINE__, true, "cr_assert_fail", "" __VA_ARGS__)

#define CRLITE_CMP(fatal, op, a, b, ...) CRLITE_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) CRLITE_CMP(true, ==, a, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) CRLITE_CMP(true, !=, a, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) CRLITE_CMP(true, <, a, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) CRLITE_CMP(true, <=, a, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CRLITE_CMP(true, >, a, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) CRLITE_CMP(true, >=, a, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) CRLITE_CMP(false, ==, a, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) CRLITE_CMP(false, !=, a, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) CRLITE_CMP(false, <, a, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) CRLITE_CMP(false, <=, a, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) CRLITE_CMP(false, >, a, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) CRLITE_CMP(false, >=, a, b, __VA_ARGS__)

#define cr_assert_null(p, ...) CRLITE_CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) CRLITE_CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) CRLITE_CHECK(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) CRLITE_CHECK(false, (p) != NULL, #p " != NULL", __VA_ARGS__)

/* Strings: a NULL operand fails the check instead of crashing the test. */
static inline bool crlite_streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}
#define cr_assert_str_eq(a, b, ...) CRLITE_CHECK(true, crlite_streq((a), (b)), #a " == " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) CRLITE_CHECK(true, !crlite_streq((a), (b)), #a " != " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) CRLITE_CHECK(false, crlite_streq((a), (b)), #a " == " #b, __VA_ARGS__)

#define cr_skip_test(...) crlite_skip("" __VA_ARGS__)
#define cr_log_info(...) crlite_log(__VA_ARGS__)

#endif
