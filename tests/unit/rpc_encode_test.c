/* SPDX-License-Identifier: Apache-2.0 */
/* rpc_encode: replies encoded off the loop, in each codec, beyond -max-message. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "filesystem.pb-c.h"
#include "rpc/envelope.h"
#include "rpc/rpc.h"
#include "proto/pbjson.h"
#include <stdio.h>

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

/* rpc_encode_buf: a small reply, proto or JSON, is packed into the caller's
 * buffer (borrowed, never freed); one that does not fit is allocated. */
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
	cr_assert(enc.borrowed, "a small JSON reply is written in place");
	cr_assert_eq(enc.mem, (void *)buf);
	cr_assert_eq(enc.len, strlen("{\"entry\":{\"name\":\"/j\",\"path\":\"/j\"}}"));
	cr_assert_eq(memcmp(buf + RPC_ENC_HDR, "{\"entry\":{\"name\":\"/j\",\"path\":\"/j\"}}", enc.len), 0);
	rpc_encoded_free(&enc);

	cr_assert_eq(rpc_encode_buf(&json, &stat_resp("/j")->base, tiny, sizeof(tiny), &enc), 0);
	cr_assert_not(enc.borrowed, "JSON too big for the buffer: allocated");
	cr_assert_eq(memcmp((char *)enc.mem + RPC_ENC_HDR, "{\"entry\":{\"name\":\"/j\"", 20), 0);
	rpc_encoded_free(&enc);
}

/* rpc_list: a reply written element by element is, byte for byte, the
 * codec's encoding of the whole message, however it is cut into pieces. */
static Filesystem__ListDirResponse *listing(size_t n, Filesystem__EntryInfo **es_out)
{
	static Filesystem__ListDirResponse resp;
	Filesystem__EntryInfo *es = calloc(n ? n : 1, sizeof(*es));
	Filesystem__EntryInfo **ps = calloc(n ? n : 1, sizeof(*ps));

	cr_assert(es && ps);
	filesystem__list_dir_response__init(&resp);
	for (size_t i = 0; i < n; i++) {
		char *name = malloc(32);

		snprintf(name, 32, "f\"%zu\xc3\xa9", i);
		filesystem__entry_info__init(&es[i]);
		es[i].name = name;
		es[i].path = name;
		es[i].size = (int64_t)i * 1000;
		es[i].type = FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE;
		ps[i] = &es[i];
	}
	resp.entries = ps;
	resp.n_entries = n;
	*es_out = es;
	return &resp;
}

static void listing_free(Filesystem__ListDirResponse *r, Filesystem__EntryInfo *es)
{
	for (size_t i = 0; i < r->n_entries; i++)
		free(es[i].name);
	free(r->entries);
	free(es);
}

static void list_matches_whole(bool json, size_t n, size_t step)
{
	struct rpc_codec codec = { .json = json, .gzip = false };
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(&filesystem__list_dir_response__descriptor, "entries");
	Filesystem__EntryInfo *es;
	Filesystem__ListDirResponse *r = listing(n, &es);
	struct rpc_encoded whole, piece;
	struct rpc_list l;
	char *got = NULL;
	size_t glen = 0;

	cr_assert_eq(rpc_encode(&codec, &r->base, &whole), 0);
	rpc_list_init(&l, &codec, f);
	for (size_t i = 0; i <= n; i++) {
		bool last = i == n;

		if (!last)
			cr_assert_eq(rpc_list_add(&l, &r->entries[i]->base), 0);
		if (last || (i + 1) % step == 0) {
			cr_assert_eq(rpc_list_take(&l, last, &piece), 0);
			got = realloc(got, glen + piece.len + 1);
			memcpy(got + glen, (char *)piece.mem + RPC_ENC_HDR, piece.len);
			glen += piece.len;
			cr_assert_not(piece.gzipped);
			rpc_encoded_free(&piece);
		}
	}
	cr_assert_eq(glen, whole.len, "%s, %zu entries in steps of %zu: %zu bytes, want %zu", json ? "json" : "proto",
		     n, step, glen, whole.len);
	cr_assert_eq(memcmp(got, (char *)whole.mem + RPC_ENC_HDR, glen), 0);
	free(got);
	rpc_list_free(&l);
	rpc_encoded_free(&whole);
	listing_free(r, es);
}

Test(rpc_encode, list_in_pieces_is_the_whole_message)
{
	for (int json = 0; json < 2; json++) {
		list_matches_whole(json, 0, 1);
		list_matches_whole(json, 1, 1);
		list_matches_whole(json, 7, 1);
		list_matches_whole(json, 7, 3);
		list_matches_whole(json, 300, 64);
		list_matches_whole(json, 300, 1000);
	}
}

Test(rpc_encode, list_taken_whole_is_gzipped_when_asked)
{
	struct rpc_codec codec = { .json = true, .gzip = true };
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(&filesystem__list_dir_response__descriptor, "entries");
	Filesystem__EntryInfo *es;
	Filesystem__ListDirResponse *r = listing(50, &es);
	struct rpc_list l;
	struct rpc_encoded piece;
	uint8_t *plain = NULL;
	size_t n = 0;
	char *want;
	size_t wlen;

	rpc_list_init(&l, &codec, f);
	for (size_t i = 0; i < r->n_entries; i++)
		cr_assert_eq(rpc_list_add(&l, &r->entries[i]->base), 0);
	cr_assert_eq(rpc_list_take(&l, true, &piece), 0);
	cr_assert(piece.gzipped);
	cr_assert_eq(env_gunzip((uint8_t *)piece.mem + RPC_ENC_HDR, piece.len, 1 << 20, &plain, &n), 0);
	want = pbjson_encode(&r->base, &wlen);
	cr_assert_eq(n, wlen);
	cr_assert_eq(memcmp(plain, want, n), 0);
	free(want);
	free(plain);
	rpc_encoded_free(&piece);
	rpc_list_free(&l);
	listing_free(r, es);
}
