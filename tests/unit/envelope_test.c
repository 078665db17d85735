/* SPDX-License-Identifier: Apache-2.0 */
/* The Connect/gRPC envelope decoder and gzip codec, driven directly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/envelope.h"

struct seen {
	int n;
	uint8_t flags[16];
	char msg[16][64];
	int stop_after; /* stop the drain after this many (0: never) */
};

static int collect(void *ud, uint8_t flags, const uint8_t *p, size_t n)
{
	struct seen *s = ud;
	if (s->n < 16) {
		s->flags[s->n] = flags;
		memcpy(s->msg[s->n], p, n < 63 ? n : 63);
		s->msg[s->n][n < 63 ? n : 63] = '\0';
	}
	s->n++;
	return s->stop_after && s->n >= s->stop_after ? 7 : 0;
}

static size_t put_env(uint8_t *b, uint8_t flags, const void *p, size_t n)
{
	b[0] = flags;
	b[1] = (uint8_t)(n >> 24);
	b[2] = (uint8_t)(n >> 16);
	b[3] = (uint8_t)(n >> 8);
	b[4] = (uint8_t)n;
	memcpy(b + 5, p, n);
	return n + 5;
}

Test(envelope, messages_come_out_whole_whatever_the_split)
{
	uint8_t wire[256];
	size_t n = put_env(wire, 0, "hello", 5);
	n += put_env(wire + n, 0, "", 0);
	n += put_env(wire + n, ENV_FLAG_END, "{}", 2);
	for (size_t step = 1; step <= n; step++) {
		struct env_dec d;
		struct seen s = {0};
		env_dec_init(&d, 1024, 4096, false);
		for (size_t off = 0; off < n; off += step) {
			size_t k = n - off < step ? n - off : step;
			cr_assert_eq(env_dec_push(&d, wire + off, k), 0);
			cr_assert_eq(env_dec_drain(&d, collect, &s), 0);
		}
		cr_assert_eq(s.n, 3, "step %zu", step);
		cr_assert_str_eq(s.msg[0], "hello");
		cr_assert_str_eq(s.msg[1], "");
		cr_assert_eq(s.flags[2], ENV_FLAG_END);
		cr_assert_eq(env_dec_pending(&d), 0);
		env_dec_free(&d);
	}
}

Test(envelope, a_partial_envelope_stays_pending)
{
	uint8_t wire[64];
	size_t n = put_env(wire, 0, "abcdef", 6);
	struct env_dec d;
	struct seen s = {0};
	env_dec_init(&d, 1024, 4096, false);
	env_dec_push(&d, wire, n - 1);
	cr_assert_eq(env_dec_drain(&d, collect, &s), 0);
	cr_assert_eq(s.n, 0);
	cr_assert_eq(env_dec_pending(&d), n - 1);
	env_dec_free(&d);
}

Test(envelope, compressed_messages_are_inflated_when_negotiated)
{
	uint8_t *z;
	size_t zn;
	cr_assert_eq(env_gzip((const uint8_t *)"squeeze me", 10, &z, &zn), 0);
	uint8_t wire[256];
	size_t n = put_env(wire, ENV_FLAG_COMPRESSED, z, zn);
	free(z);

	struct env_dec d;
	struct seen s = {0};
	env_dec_init(&d, 1024, 4096, true);
	env_dec_push(&d, wire, n);
	cr_assert_eq(env_dec_drain(&d, collect, &s), 0);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.msg[0], "squeeze me");
	env_dec_free(&d);

	env_dec_init(&d, 1024, 4096, false);
	env_dec_push(&d, wire, n);
	cr_assert_eq(env_dec_drain(&d, collect, &s), -EPROTO, "compression not negotiated");
	env_dec_free(&d);
}

Test(envelope, sizes_are_bounded)
{
	uint8_t wire[16] = {0, 0, 0, 4, 1}; /* declares 1025 bytes */
	struct env_dec d;
	struct seen s = {0};
	env_dec_init(&d, 1024, 4096, false);
	env_dec_push(&d, wire, 5);
	cr_assert_eq(env_dec_drain(&d, collect, &s), -EMSGSIZE);
	cr_assert_eq(d.last_len, 1025);
	env_dec_free(&d);

	env_dec_init(&d, 1024, 8, false);
	cr_assert_eq(env_dec_push(&d, wire, 9), -EMSGSIZE, "over the buffered bound");
	env_dec_free(&d);
}

Test(envelope, a_gzip_bomb_stops_at_the_bound)
{
	size_t big = 1 << 20;
	uint8_t *zeros = calloc(1, big), *z, *out = NULL;
	size_t zn, on;
	cr_assert_eq(env_gzip(zeros, big, &z, &zn), 0);
	cr_assert_lt(zn, 4096);
	cr_assert_eq(env_gunzip(z, zn, 64 * 1024, &out, &on), -EMSGSIZE);
	cr_assert_null(out);
	cr_assert_eq(env_gunzip(z, zn, big, &out, &on), 0);
	cr_assert_eq(on, big);
	free(out);
	free(z);
	free(zeros);
	cr_assert_eq(env_gunzip((const uint8_t *)"not gzip", 8, 1024, &out, &on), -EINVAL);
}

Test(envelope, the_callback_can_stop_the_drain)
{
	uint8_t wire[64];
	size_t n = put_env(wire, 0, "a", 1);
	n += put_env(wire + n, 0, "b", 1);
	struct env_dec d;
	struct seen s = {.stop_after = 1};
	env_dec_init(&d, 1024, 4096, false);
	env_dec_push(&d, wire, n);
	cr_assert_eq(env_dec_drain(&d, collect, &s), 7);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(env_dec_pending(&d), 6, "the second envelope is still there");
	env_dec_free(&d);
}
