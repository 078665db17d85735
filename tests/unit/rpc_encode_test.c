/* SPDX-License-Identifier: Apache-2.0 */
/* rpc_encode: replies encoded off the loop, in each codec, beyond -max-message. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "filesystem.pb-c.h"
#include "rpc/envelope.h"
#include "rpc/rpc.h"

static Filesystem__StatResponse *stat_resp(const char *name)
{
	static Filesystem__StatResponse resp;
	static Filesystem__EntryInfo e;

	filesystem__stat_response__init(&resp);
	filesystem__entry_info__init(&e);
	e.name = (char *)name;
	e.path = (char *)name;
	resp.entry = &e;
	return &resp;
}

Test(rpc_encode, binary_round_trips_with_room_for_the_envelope)
{
	struct rpc_codec codec = { .json = false, .gzip = false };
	struct rpc_encoded enc;
	Filesystem__StatResponse *back;

	cr_assert_eq(rpc_encode(&codec, &stat_resp("/tmp/x")->base, &enc), 0);
	cr_assert(!enc.gzipped);
	back = filesystem__stat_response__unpack(NULL, enc.len, (uint8_t *)enc.mem + RPC_ENC_HDR);
	cr_assert_not_null(back);
	cr_assert_str_eq(back->entry->path, "/tmp/x");
	filesystem__stat_response__free_unpacked(back, NULL);
	rpc_encoded_free(&enc);
	cr_assert_null(enc.mem);
}

Test(rpc_encode, json_is_canonical_json)
{
	struct rpc_codec codec = { .json = true, .gzip = false };
	struct rpc_encoded enc;

	cr_assert_eq(rpc_encode(&codec, &stat_resp("/a")->base, &enc), 0);
	cr_assert_eq(memcmp((char *)enc.mem + RPC_ENC_HDR, "{\"entry\":{", 10), 0);
	rpc_encoded_free(&enc);
}

Test(rpc_encode, gzip_codec_compresses)
{
	struct rpc_codec codec = { .json = true, .gzip = true };
	struct rpc_encoded enc;
	uint8_t *plain = NULL;
	size_t n = 0;

	cr_assert_eq(rpc_encode(&codec, &stat_resp("/gz")->base, &enc), 0);
	cr_assert(enc.gzipped);
	cr_assert_eq(env_gunzip((uint8_t *)enc.mem + RPC_ENC_HDR, enc.len, 1 << 20, &plain, &n), 0);
	cr_assert_eq(memcmp(plain, "{\"entry\":{", 10), 0);
	free(plain);
	rpc_encoded_free(&enc);
}

Test(rpc_encode, a_reply_larger_than_max_message_is_encoded)
{
	struct rpc_codec codec = { .json = false, .gzip = false };
	size_t n = 20000;
	Filesystem__ListDirResponse resp = FILESYSTEM__LIST_DIR_RESPONSE__INIT;
	Filesystem__EntryInfo *es = calloc(n, sizeof(*es));
	Filesystem__EntryInfo **ps = calloc(n, sizeof(*ps));
	char *name = malloc(256);
	struct rpc_encoded enc;
	size_t saved = rpc_max_message;

	cr_assert(es && ps && name);
	memset(name, 'n', 255);
	name[255] = '\0';
	for (size_t i = 0; i < n; i++) {
		filesystem__entry_info__init(&es[i]);
		es[i].name = name;
		es[i].path = name;
		ps[i] = &es[i];
	}
	resp.entries = ps;
	resp.n_entries = n;
	rpc_max_message = 1 << 20; /* what we accept from clients */
	cr_assert_eq(rpc_encode(&codec, &resp.base, &enc), 0);
	cr_assert_gt(enc.len, rpc_max_message);
	rpc_max_message = saved;
	rpc_encoded_free(&enc);
	free(name);
	free(ps);
	free(es);
}

/* rpc_encode_buf: a small proto reply is packed into the caller's buffer
 * (borrowed, never freed); one that does not fit, or JSON, is allocated. */
Test(rpc_encode, small_proto_reply_uses_the_callers_buffer)
{
	struct rpc_codec proto = { .json = false, .gzip = false }, json = { .json = true, .gzip = false };
	struct rpc_encoded enc;
	uint8_t buf[256], tiny[8];
	Filesystem__StatResponse *back;

	cr_assert_eq(rpc_encode_buf(&proto, &stat_resp("/tmp/b")->base, buf, sizeof(buf), &enc), 0);
	cr_assert(enc.borrowed);
	cr_assert_eq(enc.mem, (void *)buf);
	back = filesystem__stat_response__unpack(NULL, enc.len, buf + RPC_ENC_HDR);
	cr_assert_not_null(back);
	cr_assert_str_eq(back->entry->path, "/tmp/b");
	filesystem__stat_response__free_unpacked(back, NULL);
	rpc_encoded_free(&enc); /* must not free buf */
	cr_assert_null(enc.mem);
	cr_assert_not(enc.borrowed);

	cr_assert_eq(rpc_encode_buf(&proto, &stat_resp("/tmp/b")->base, tiny, sizeof(tiny), &enc), 0);
	cr_assert_not(enc.borrowed, "too big for the buffer: allocated");
	cr_assert_neq(enc.mem, (void *)tiny);
	rpc_encoded_free(&enc);

	cr_assert_eq(rpc_encode_buf(&json, &stat_resp("/j")->base, buf, sizeof(buf), &enc), 0);
	cr_assert_not(enc.borrowed, "JSON is always allocated");
	rpc_encoded_free(&enc);
}
