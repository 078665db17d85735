/* SPDX-License-Identifier: Apache-2.0 */
/* proto/pbwire: string fields holding a NUL are found at any depth; bytes
 * fields may hold one; malformed data is left to the unpack. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "filesystem.pb-c.h"
#include "process.pb-c.h"
#include "proto/pbwire.h"

/* Pack msg and run the check on it. */
static int check(const ProtobufCMessage *msg, char *err, size_t errlen)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *b = malloc(n ? n : 1);
	cr_assert(b);
	protobuf_c_message_pack(msg, b);
	int rc = pbwire_check_strings(msg->descriptor, b, n, err, errlen);
	free(b);
	return rc;
}

/* A string of `n` bytes that protobuf-c packs whole: pack uses strlen, so
 * the NUL is written by hand into the packed bytes below instead. */
Test(pbwire, nul_in_a_top_level_string_is_refused)
{
	/* StatRequest{path = "/tmp\0zz"}: tag 1, wire type 2, length 7. */
	static const uint8_t wire[] = { 0x0a, 7, '/', 't', 'm', 'p', 0, 'z', 'z' };
	char err[128];
	cr_assert_eq(pbwire_check_strings(&filesystem__stat_request__descriptor, wire, sizeof(wire), err,
					  sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "string field path holds a NUL byte");
}

Test(pbwire, clean_messages_pass)
{
	char *args[] = { "-c", "echo hi" };
	Process__ProcessConfig cfg = PROCESS__PROCESS_CONFIG__INIT;
	Process__StartRequest req = PROCESS__START_REQUEST__INIT;
	char err[128];
	cfg.cmd = "/bin/sh";
	cfg.n_args = 2;
	cfg.args = args;
	req.process = &cfg;
	cr_assert_eq(check(&req.base, err, sizeof(err)), 0);
	cr_assert_str_eq(err, "");
}

/* Find `needle` in the packed bytes and put a NUL at its offset `at`. */
static int check_with_nul(const ProtobufCMessage *msg, const char *needle, size_t at, char *err, size_t errlen)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *b = malloc(n);
	cr_assert(b);
	protobuf_c_message_pack(msg, b);
	uint8_t *hit = memmem(b, n, needle, strlen(needle));
	cr_assert(hit, "%s not in the packed message", needle);
	hit[at] = 0;
	int rc = pbwire_check_strings(msg->descriptor, b, n, err, errlen);
	free(b);
	return rc;
}

Test(pbwire, nul_in_nested_repeated_and_map_strings_is_refused)
{
	char *args[] = { "-c", "echo XYZ" };
	Process__ProcessConfig__EnvsEntry e = PROCESS__PROCESS_CONFIG__ENVS_ENTRY__INIT;
	Process__ProcessConfig__EnvsEntry *envs[] = { &e };
	Process__ProcessConfig cfg = PROCESS__PROCESS_CONFIG__INIT;
	Process__StartRequest req = PROCESS__START_REQUEST__INIT;
	char err[128];
	e.key = "KEY";
	e.value = "VALUE";
	cfg.cmd = "/bin/CMD";
	cfg.n_args = 2;
	cfg.args = args;
	cfg.n_envs = 1;
	cfg.envs = envs;
	req.process = &cfg;

	cr_assert_eq(check_with_nul(&req.base, "/bin/CMD", 4, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "string field cmd holds a NUL byte");
	cr_assert_eq(check_with_nul(&req.base, "echo XYZ", 4, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "string field args holds a NUL byte");
	cr_assert_eq(check_with_nul(&req.base, "VALUE", 2, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "string field value holds a NUL byte");
}

Test(pbwire, bytes_fields_may_hold_nul)
{
	static uint8_t data[] = { 'a', 0, 'b' };
	Process__ProcessInput in = PROCESS__PROCESS_INPUT__INIT;
	Process__SendInputRequest req = PROCESS__SEND_INPUT_REQUEST__INIT;
	char err[128];
	in.input_case = PROCESS__PROCESS_INPUT__INPUT_STDIN;
	in.stdin.data = data;
	in.stdin.len = sizeof(data);
	req.input = &in;
	cr_assert_eq(check(&req.base, err, sizeof(err)), 0);
}

Test(pbwire, malformed_data_is_left_to_the_unpack)
{
	static const uint8_t cut_len[] = { 0x0a, 50, '/', 't' };         /* length beyond the end */
	static const uint8_t cut_varint[] = { 0x08, 0xff, 0xff };         /* varint never ends */
	static const uint8_t group[] = { 0x0b, 0x0c };                    /* wire types 3 and 4 */
	static const uint8_t long_varint[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	char err[128];
	const ProtobufCMessageDescriptor *d = &filesystem__stat_request__descriptor;
	cr_assert_eq(pbwire_check_strings(d, cut_len, sizeof(cut_len), err, sizeof(err)), 0);
	cr_assert_eq(pbwire_check_strings(d, cut_varint, sizeof(cut_varint), err, sizeof(err)), 0);
	cr_assert_eq(pbwire_check_strings(d, group, sizeof(group), err, sizeof(err)), 0);
	cr_assert_eq(pbwire_check_strings(d, long_varint, sizeof(long_varint), err, sizeof(err)), 0);
	cr_assert_eq(pbwire_check_strings(d, NULL, 0, err, sizeof(err)), 0);
}

Test(pbwire, unknown_fields_are_skipped)
{
	/* field 99 (a string-shaped unknown) holding a NUL, then path = "/tmp" */
	static const uint8_t wire[] = { 0x9a, 0x06, 3, 'a', 0, 'b', 0x0a, 4, '/', 't', 'm', 'p' };
	char err[128];
	cr_assert_eq(pbwire_check_strings(&filesystem__stat_request__descriptor, wire, sizeof(wire), err,
					  sizeof(err)),
		     0);
}
