/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <pthread.h>

#include <jansson.h>

#include "proto/pbjson.h"
#include "pbjson_tree.h"
#include "process.pb-c.h"
#include "filesystem.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */

static char *enc(const void *msg)
{
	size_t len = 0;
	char *s = pbjson_encode(msg, &len);

	cr_assert_not_null(s, "encode failed");
	cr_assert_eq(strlen(s), len, "length/NUL mismatch");
	return s;
}

static void expect_json(const void *msg, const char *want)
{
	char *got = enc(msg);

	cr_assert_str_eq(got, want);
	free(got);
}

static ProtobufCMessage *dec_ok(const ProtobufCMessageDescriptor *d, const char *json)
{
	char err[256];
	ProtobufCMessage *m = pbjson_decode(d, json, strlen(json), err, sizeof(err));

	cr_assert_not_null(m, "decode of %s failed: %s", json, err);
	cr_assert(protobuf_c_message_check(m), "decoded message fails check: %s", json);
	return m;
}

static void dec_err(const ProtobufCMessageDescriptor *d, const char *json, size_t len,
		    const char *want_substr)
{
	char err[256];
	ProtobufCMessage *m = pbjson_decode(d, json, len, err, sizeof(err));

	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	cr_assert_null(m, "decode of %.*s should fail", (int)len, json);
	cr_assert_neq(err[0], '\0', "no error message for %.*s", (int)len, json);
	if (want_substr)
		cr_assert(strstr(err, want_substr), "error for %.*s is \"%s\", want \"%s\"", (int)len,
			  json, err, want_substr);
}

#define DEC_ERR(d, json, substr) dec_err(d, json, strlen(json), substr)

/* Decoding `in` must give a message that re-encodes as `out`. */
static void reencode(const ProtobufCMessageDescriptor *d, const char *in, const char *out)
{
	ProtobufCMessage *m = dec_ok(d, in);

	expect_json(m, out);
	protobuf_c_message_free_unpacked(m, NULL);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	cr_assert_not_null(p);
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	cr_assert_not_null(p);
	return p;
}

/* ---------------------------------------------------------------------- */
/* Round trips of every message type                                       */

static const ProtobufCMessageDescriptor *const all_types[] = {
	&filesystem__move_request__descriptor,
	&filesystem__move_response__descriptor,
	&filesystem__make_dir_request__descriptor,
	&filesystem__make_dir_response__descriptor,
	&filesystem__remove_request__descriptor,
	&filesystem__remove_response__descriptor,
	&filesystem__stat_request__descriptor,
	&filesystem__stat_response__descriptor,
	&filesystem__entry_info__descriptor,
	&filesystem__entry_info__metadata_entry__descriptor,
	&filesystem__list_dir_request__descriptor,
	&filesystem__list_dir_response__descriptor,
	&filesystem__watch_dir_request__descriptor,
	&filesystem__filesystem_event__descriptor,
	&filesystem__watch_dir_response__descriptor,
	&filesystem__watch_dir_response__start_event__descriptor,
	&filesystem__watch_dir_response__keep_alive__descriptor,
	&filesystem__create_watcher_request__descriptor,
	&filesystem__create_watcher_response__descriptor,
	&filesystem__get_watcher_events_request__descriptor,
	&filesystem__get_watcher_events_response__descriptor,
	&filesystem__remove_watcher_request__descriptor,
	&filesystem__remove_watcher_response__descriptor,
	&process__pty__descriptor,
	&process__pty__size__descriptor,
	&process__process_config__descriptor,
	&process__process_config__envs_entry__descriptor,
	&process__process_limits__descriptor,
	&process__resource_usage__descriptor,
	&process__list_request__descriptor,
	&process__process_info__descriptor,
	&process__list_response__descriptor,
	&process__start_request__descriptor,
	&process__update_request__descriptor,
	&process__update_response__descriptor,
	&process__process_event__descriptor,
	&process__process_event__start_event__descriptor,
	&process__process_event__data_event__descriptor,
	&process__process_event__end_event__descriptor,
	&process__process_event__keep_alive__descriptor,
	&process__process_event__gap_event__descriptor,
	&process__start_response__descriptor,
	&process__connect_response__descriptor,
	&process__send_input_request__descriptor,
	&process__send_input_response__descriptor,
	&process__process_input__descriptor,
	&process__stream_input_request__descriptor,
	&process__stream_input_request__start_event__descriptor,
	&process__stream_input_request__data_event__descriptor,
	&process__stream_input_request__keep_alive__descriptor,
	&process__stream_input_response__descriptor,
	&process__send_signal_request__descriptor,
	&process__send_signal_response__descriptor,
	&process__close_stdin_request__descriptor,
	&process__close_stdin_response__descriptor,
	&process__connect_request__descriptor,
	&process__process_selector__descriptor,
	&process__session_info__descriptor,
	&process__create_session_request__descriptor,
	&process__create_session_request__envs_entry__descriptor,
	&process__create_session_response__descriptor,
	&process__list_sessions_request__descriptor,
	&process__list_sessions_response__descriptor,
	&process__close_session_request__descriptor,
	&process__close_session_response__descriptor,
	/* commands an agent can trust */
	&process__output_budget__descriptor,
	&process__output_withheld__descriptor,
	&process__end_reason__descriptor,
	&process__wait_for_request__descriptor,
	&process__wait_port__descriptor,
	&process__wait_http__descriptor,
	&process__wait_output__descriptor,
	&process__wait_path__descriptor,
	&process__wait_for_response__descriptor,
	&google__protobuf__timestamp__descriptor,
	&filesystem__changes_request__descriptor,
	&filesystem__changes_response__descriptor,
	&filesystem__change__descriptor,
	&process__command_changes__descriptor,
	&filesystem__glob_request__descriptor,
	&filesystem__glob_response__descriptor,
	&filesystem__grep_request__descriptor,
	&filesystem__grep_response__descriptor,
	&filesystem__grep_match__descriptor,
	&filesystem__grep_summary__descriptor,
	&filesystem__read_lines_request__descriptor,
	&filesystem__read_lines_response__descriptor,
	&filesystem__edit_request__descriptor,
	&filesystem__edit_response__descriptor,
	&filesystem__text_edit__descriptor,
	&process__try_run__descriptor,
	&process__try_change__descriptor,
	&process__try_diff__descriptor,
	&process__try_diff_request__descriptor,
	&process__try_diff_response__descriptor,
	&process__commit_try_request__descriptor,
	&process__commit_try_response__descriptor,
	&process__discard_try_request__descriptor,
	&process__discard_try_response__descriptor,
};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

static bool in_all_types(const ProtobufCMessageDescriptor *d)
{
	for (size_t i = 0; i < N_TYPES; i++)
		if (all_types[i] == d)
			return true;
	return false;
}

static void check_reachable(const ProtobufCMessageDescriptor *d, int depth)
{
	cr_assert(in_all_types(d), "message type %s missing from all_types", d->name);
	if (depth > 8)
		return;
	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].type == PROTOBUF_C_TYPE_MESSAGE)
			check_reachable(d->fields[i].descriptor, depth + 1);
}

/* The list above really is every message of both services. */
Test(pbjson, type_list_is_complete)
{
	const ProtobufCServiceDescriptor *svcs[] = { &process__process__descriptor,
						      &filesystem__filesystem__descriptor };

	for (size_t s = 0; s < 2; s++)
		for (unsigned m = 0; m < svcs[s]->n_methods; m++) {
			check_reachable(svcs[s]->methods[m].input, 0);
			check_reachable(svcs[s]->methods[m].output, 0);
		}
}

enum variant { V_TYPICAL, V_EXTREME, V_ZERO, V_ALT, N_VARIANTS };

static const char *const strings[N_VARIANTS] = {
	"hello",
	"\xc3\xbc" "n\xc3\xaf" "c\xc3\xb8" "d\xc3\xa9 \"q\" \\ / \n\t\b\f\r\x01\x1f\x7f "
	"\xe6\x97\xa5 \xf0\x9f\x98\x80 \xe2\x80\xa8",
	"",
	"/home/user/a b.txt",
};

static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d, int v, int depth);

static void fill_value(const ProtobufCFieldDescriptor *f, int v, int depth, void *p, int elem)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32: {
		static const int32_t vals[] = { 7, INT32_MIN, 0, -1 };
		*(int32_t *)p = vals[v] + (v == V_ZERO ? 0 : elem);
		break;
	}
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32: {
		static const uint32_t vals[] = { 412, UINT32_MAX, 0, 1 };
		*(uint32_t *)p = vals[v] - (v == V_ZERO ? 0 : (uint32_t)elem);
		break;
	}
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64: {
		static const int64_t vals[] = { 4096, INT64_MIN, 0, INT64_MAX };
		*(int64_t *)p = vals[v];
		break;
	}
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64: {
		static const uint64_t vals[] = { 5, UINT64_MAX, 0, UINT64_C(1) << 63 };
		*(uint64_t *)p = vals[v];
		break;
	}
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)p = v != V_ZERO;
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		int32_t vals[] = { ed->values[1 % ed->n_values].value,
				   ed->values[ed->n_values - 1].value, 0, 77 };
		*(int32_t *)p = vals[v];
		break;
	}
	case PROTOBUF_C_TYPE_STRING:
		*(char **)p = xstrdup(strings[v]);
		break;
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *bd = p;

		if (v == V_TYPICAL) {
			bd->len = 3;
			bd->data = xmalloc(3);
			memcpy(bd->data, "hi\n", 3);
		} else if (v == V_EXTREME) {
			bd->len = 256 + (size_t)elem;
			bd->data = xmalloc(bd->len);
			for (size_t i = 0; i < bd->len; i++)
				bd->data[i] = (uint8_t)(255 - i);
		} else if (v == V_ALT) {
			bd->len = 1;
			bd->data = xmalloc(1);
			bd->data[0] = 0xff;
		} else {
			bd->len = 0;
			bd->data = NULL;
		}
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		*(ProtobufCMessage **)p = fill(f->descriptor, v, depth + 1);
		break;
	default:
		cr_assert_fail("unexpected field type %d", f->type);
	}
}

/*
 * Build a message of type d with every field set in a way that depends on
 * the variant; variant v selects member v (mod size) of each oneof, so the
 * variants together cover every oneof member of our schemas.
 */
static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d, int v, int depth)
{
	ProtobufCMessage *m = xmalloc(d->sizeof_message);
	char *base = (char *)m;

	protobuf_c_message_init(d, m);
	cr_assert_lt(depth, 10, "schema recursion?");
	if (strcmp(d->name, "google.protobuf.Timestamp") == 0) {
		static const int64_t secs[] = { 1735787045, -1, 0, 253402300799 };
		static const int32_t nanos[] = { 123456789, 1, 0, 999999999 };
		Google__Protobuf__Timestamp *ts = (Google__Protobuf__Timestamp *)m;

		ts->seconds = secs[v];
		ts->nanos = nanos[v];
		return m;
	}
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			unsigned members = 0, idx = 0;

			for (unsigned j = 0; j < d->n_fields; j++) {
				if (!(d->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
				    d->fields[j].quantifier_offset != f->quantifier_offset)
					continue;
				if (j == i)
					idx = members;
				members++;
			}
			if (idx != (unsigned)v % members)
				continue;
			fill_value(f, v, depth, base + f->offset, 0);
			*(uint32_t *)(base + f->quantifier_offset) = f->id;
		} else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t es;

			switch (f->type) {
			case PROTOBUF_C_TYPE_STRING: es = sizeof(char *); break;
			case PROTOBUF_C_TYPE_MESSAGE: es = sizeof(void *); break;
			case PROTOBUF_C_TYPE_BYTES: es = sizeof(ProtobufCBinaryData); break;
			case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
			case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_UINT64:
			case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE: es = 8; break;
			default: es = 4;
			}
			char *arr = calloc(2, es);
			const ProtobufCMessageDescriptor *ed = f->descriptor;

			cr_assert_not_null(arr);
			for (int k = 0; k < 2; k++)
				fill_value(f, v, depth, arr + (size_t)k * es, k);
			/* Map keys must be distinct (and sorted, to compare the
			   binary forms): overwrite the key of each entry. */
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && ed->n_fields == 2 &&
			    strcmp(ed->fields[0].name, "key") == 0) {
				static const char *const keys[N_VARIANTS][2] = {
					{ "A", "B" }, { "LANG", "\xc3\xa9t\xc3\xa9" }, { "", "z" }, { "a_b", "a~b" },
				};
				for (int k = 0; k < 2; k++) {
					ProtobufCMessage *e = ((ProtobufCMessage **)arr)[k];
					char **key = (char **)((char *)e + ed->fields[0].offset);

					free(*key);
					*key = xstrdup(keys[v][k]);
				}
			}
			*(size_t *)(base + f->quantifier_offset) = 2;
			*(void **)(base + f->offset) = arr;
		} else {
			fill_value(f, v, depth, base + f->offset, 0);
		}
	}
	return m;
}

static void round_trip(const ProtobufCMessageDescriptor *d, int v)
{
	ProtobufCMessage *orig = fill(d, v, 0), *back;
	char *json, *json2, err[256];
	size_t len, plen1, plen2;
	uint8_t *p1, *p2;

	json = pbjson_encode(orig, &len);
	cr_assert_not_null(json);
	back = pbjson_decode(d, json, len, err, sizeof(err));
	cr_assert_not_null(back, "%s variant %d: decode of %s failed: %s", d->name, v, json, err);

	plen1 = protobuf_c_message_get_packed_size(orig);
	plen2 = protobuf_c_message_get_packed_size(back);
	p1 = xmalloc(plen1);
	p2 = xmalloc(plen2);
	protobuf_c_message_pack(orig, p1);
	protobuf_c_message_pack(back, p2);
	cr_assert(plen1 == plen2 && memcmp(p1, p2, plen1) == 0,
		  "%s variant %d: binary differs after JSON round trip via %s", d->name, v, json);

	json2 = enc(back);
	cr_assert_str_eq(json2, json, "%s variant %d: JSON not stable", d->name, v);

	free(p1);
	free(p2);
	free(json);
	free(json2);
	protobuf_c_message_free_unpacked(orig, NULL);
	protobuf_c_message_free_unpacked(back, NULL);
}

Test(pbjson, round_trip_every_message_type)
{
	for (size_t i = 0; i < N_TYPES; i++)
		for (int v = 0; v < N_VARIANTS; v++)
			round_trip(all_types[i], v);
}

Test(pbjson, round_trip_empty_messages)
{
	for (size_t i = 0; i < N_TYPES; i++) {
		ProtobufCMessage *m = xmalloc(all_types[i]->sizeof_message), *back;
		char *json;

		protobuf_c_message_init(all_types[i], m);
		json = enc(m);
		if (strcmp(all_types[i]->name, "google.protobuf.Timestamp") == 0)
			cr_assert_str_eq(json, "\"1970-01-01T00:00:00Z\"");
		else
			cr_assert_str_eq(json, "{}", "%s", all_types[i]->name);
		back = dec_ok(all_types[i], json);
		cr_assert_eq(protobuf_c_message_get_packed_size(back), 0);
		free(json);
		free(m);
		protobuf_c_message_free_unpacked(back, NULL);
	}
}

/* ---------------------------------------------------------------------- */
/* Golden outputs: the JSON the SDKs parse                                 */

static void expect_event(Process__ProcessEvent *ev, const char *want)
{
	Process__StartResponse r = PROCESS__START_RESPONSE__INIT;

	r.event = ev;
	expect_json(&r, want);
}

Test(pbjson, golden_process_events)
{
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__ProcessEvent__StartEvent st = PROCESS__PROCESS_EVENT__START_EVENT__INIT;
	Process__ProcessEvent__DataEvent data;
	Process__ProcessEvent__EndEvent end = PROCESS__PROCESS_EVENT__END_EVENT__INIT;
	Process__ProcessEvent__KeepAlive ka = PROCESS__PROCESS_EVENT__KEEP_ALIVE__INIT;

	/* The generated initializer macro trips -Wmissing-braces for
	   messages with a oneof union; the init function does not. */
	process__process_event__data_event__init(&data);
	st.pid = 412;
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_START;
	ev.start = &st;
	expect_event(&ev, "{\"event\":{\"start\":{\"pid\":412}}}");

	data.output_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDOUT;
	data.stdout.data = (uint8_t *)"hi\n";
	data.stdout.len = 3;
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_DATA;
	ev.data = &data;
	expect_event(&ev, "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}");
	data.output_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDERR;
	expect_event(&ev, "{\"event\":{\"data\":{\"stderr\":\"aGkK\"}}}");
	data.output_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_PTY;
	data.optional_offset_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OPTIONAL_OFFSET_OFFSET;
	data.offset = 0;
	expect_event(&ev, "{\"event\":{\"data\":{\"pty\":\"aGkK\",\"offset\":\"0\"}}}");
	/* A set oneof member is emitted even when empty. */
	data.optional_offset_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OPTIONAL_OFFSET__NOT_SET;
	data.output_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDOUT;
	data.stdout.data = NULL;
	data.stdout.len = 0;
	expect_event(&ev, "{\"event\":{\"data\":{\"stdout\":\"\"}}}");

	end.exited = 1;
	end.status = "exit status 0";
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_END;
	ev.end = &end;
	expect_event(&ev, "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}");
	end.exit_code = -1;
	end.status = "signal: killed";
	end.optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR_ERROR;
	end.error = "signal: killed";
	expect_event(&ev, "{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":true,"
			  "\"status\":\"signal: killed\",\"error\":\"signal: killed\"}}}");
	end.exit_code = 0;
	end.exited = 0;
	end.status = "";
	end.error = "";
	expect_event(&ev, "{\"event\":{\"end\":{\"error\":\"\"}}}");

	/* Additive usage: uint64 as strings, zero members omitted. */
	{
		Process__ResourceUsage use = PROCESS__RESOURCE_USAGE__INIT;

		end.optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR__NOT_SET;
		end.exited = 1;
		end.status = "exit status 0";
		use.cpu_user_usec = 1234;
		use.memory_peak_bytes = 18446744073709551615ull;
		use.oom_killed = 1;
		use.wall_usec = 5;
		end.usage = &use;
		expect_event(&ev, "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\","
				  "\"usage\":{\"cpuUserUsec\":\"1234\",\"memoryPeakBytes\":"
				  "\"18446744073709551615\",\"oomKilled\":true,\"wallUsec\":\"5\"}}}}");
		end.usage = NULL;
		end.exited = 0;
		end.status = "";
		end.optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR_ERROR;
	}

	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_KEEPALIVE;
	ev.keepalive = &ka;
	expect_event(&ev, "{\"event\":{\"keepalive\":{}}}");

	/* The sint32 -1 is one zig-zag byte on the wire, not ten. */
	{
		uint8_t buf[16];

		end.exit_code = -1;
		end.exited = 0;
		end.status = "";
		end.optional_error_case = PROCESS__PROCESS_EVENT__END_EVENT__OPTIONAL_ERROR__NOT_SET;
		cr_assert_eq(protobuf_c_message_pack(&end.base, buf), 2);
		cr_assert_eq(buf[0], 0x08);
		cr_assert_eq(buf[1], 0x01);
	}
}

Test(pbjson, golden_stat_response)
{
	Filesystem__StatResponse r = FILESYSTEM__STAT_RESPONSE__INIT;
	Filesystem__EntryInfo e = FILESYSTEM__ENTRY_INFO__INIT;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;

	e.name = "a.txt";
	e.type = FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE;
	e.path = "/home/user/a.txt";
	e.size = 3;
	e.mode = 0644;
	e.permissions = "-rw-r--r--";
	e.owner = "user";
	e.group = "user";
	ts.seconds = 1735787045; /* 2025-01-02T03:04:05Z */
	ts.nanos = 123456789;
	e.modified_time = &ts;
	r.entry = &e;
	expect_json(&r, "{\"entry\":{\"name\":\"a.txt\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/home/user/a.txt\","
			"\"size\":\"3\",\"mode\":420,\"permissions\":\"-rw-r--r--\",\"owner\":\"user\","
			"\"group\":\"user\",\"modifiedTime\":\"2025-01-02T03:04:05.123456789Z\"}}");

	/* Optional symlink target and the metadata map. */
	{
		Filesystem__EntryInfo__MetadataEntry m1 = FILESYSTEM__ENTRY_INFO__METADATA_ENTRY__INIT;
		Filesystem__EntryInfo__MetadataEntry m2 = FILESYSTEM__ENTRY_INFO__METADATA_ENTRY__INIT;
		Filesystem__EntryInfo__MetadataEntry *md[] = { &m1, &m2 };
		Filesystem__EntryInfo l = FILESYSTEM__ENTRY_INFO__INIT;

		m1.key = "z";
		m1.value = "2";
		m2.key = "a";
		m2.value = "1";
		l.name = "l";
		l.type = FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY;
		l.optional_symlink_target_case =
			FILESYSTEM__ENTRY_INFO__OPTIONAL_SYMLINK_TARGET_SYMLINK_TARGET;
		l.symlink_target = "";
		l.n_metadata = 2;
		l.metadata = md;
		/* Map keys come out sorted, like protojson's. */
		expect_json(&l, "{\"name\":\"l\",\"type\":\"FILE_TYPE_DIRECTORY\",\"symlinkTarget\":\"\","
				"\"metadata\":{\"a\":\"1\",\"z\":\"2\"}}");
	}
}

Test(pbjson, golden_watch_events)
{
	Filesystem__WatchDirResponse r = FILESYSTEM__WATCH_DIR_RESPONSE__INIT;
	Filesystem__WatchDirResponse__StartEvent st = FILESYSTEM__WATCH_DIR_RESPONSE__START_EVENT__INIT;
	Filesystem__WatchDirResponse__KeepAlive ka = FILESYSTEM__WATCH_DIR_RESPONSE__KEEP_ALIVE__INIT;
	Filesystem__FilesystemEvent fe = FILESYSTEM__FILESYSTEM_EVENT__INIT;

	expect_json(&r, "{}");
	r.event_case = FILESYSTEM__WATCH_DIR_RESPONSE__EVENT_START;
	r.start = &st;
	expect_json(&r, "{\"start\":{}}");
	fe.name = "a.txt";
	fe.type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE;
	r.event_case = FILESYSTEM__WATCH_DIR_RESPONSE__EVENT_FILESYSTEM;
	r.filesystem = &fe;
	expect_json(&r, "{\"filesystem\":{\"name\":\"a.txt\",\"type\":\"EVENT_TYPE_CREATE\"}}");
	r.event_case = FILESYSTEM__WATCH_DIR_RESPONSE__EVENT_KEEPALIVE;
	r.keepalive = &ka;
	expect_json(&r, "{\"keepalive\":{}}");
}

Test(pbjson, golden_list_and_watcher)
{
	Process__ListResponse lr = PROCESS__LIST_RESPONSE__INIT;
	Process__ProcessInfo pi = PROCESS__PROCESS_INFO__INIT, *pis[] = { &pi };
	Process__ProcessConfig cfg = PROCESS__PROCESS_CONFIG__INIT;
	char *args[] = { "-l", "-c", "echo hi" };
	Filesystem__CreateWatcherResponse cw = FILESYSTEM__CREATE_WATCHER_RESPONSE__INIT;

	cfg.cmd = "/bin/bash";
	cfg.n_args = 3;
	cfg.args = args;
	pi.config = &cfg;
	pi.pid = 7;
	pi.optional_tag_case = PROCESS__PROCESS_INFO__OPTIONAL_TAG_TAG;
	pi.tag = "";
	lr.n_processes = 1;
	lr.processes = pis;
	expect_json(&lr, "{\"processes\":[{\"config\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"]},"
			 "\"pid\":7,\"tag\":\"\"}]}");
	cw.watcher_id = "w1";
	expect_json(&cw, "{\"watcherId\":\"w1\"}");
}

Test(pbjson, golden_requests_decode)
{
	const char *start = "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
			    "\"envs\":{\"A\":\"1\"},\"cwd\":\"/home/user\"},\"stdin\":false}";
	const char *pty = "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-i\",\"-l\"],\"envs\":"
			  "{\"TERM\":\"xterm-256color\",\"LANG\":\"C.UTF-8\",\"LC_ALL\":\"C.UTF-8\"}},"
			  "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}}}";
	Process__StartRequest *sr;
	Process__SendInputRequest *si;
	Process__SendSignalRequest *ss;

	sr = (Process__StartRequest *)dec_ok(&process__start_request__descriptor, start);
	cr_assert_str_eq(sr->process->cmd, "/bin/bash");
	cr_assert_eq(sr->process->n_args, 3);
	cr_assert_str_eq(sr->process->args[2], "echo hi");
	cr_assert_eq(sr->process->n_envs, 1);
	cr_assert_str_eq(sr->process->envs[0]->key, "A");
	cr_assert_str_eq(sr->process->envs[0]->value, "1");
	cr_assert_eq(sr->process->optional_cwd_case, PROCESS__PROCESS_CONFIG__OPTIONAL_CWD_CWD);
	cr_assert_str_eq(sr->process->cwd, "/home/user");
	/* stdin:false is present-and-false, not absent. */
	cr_assert_eq(sr->optional_stdin_case, PROCESS__START_REQUEST__OPTIONAL_STDIN_STDIN);
	cr_assert_eq(sr->stdin, 0);
	cr_assert_eq(sr->optional_pty_case, PROCESS__START_REQUEST__OPTIONAL_PTY__NOT_SET);
	expect_json(sr, start);
	protobuf_c_message_free_unpacked(&sr->base, NULL);

	sr = (Process__StartRequest *)dec_ok(&process__start_request__descriptor, pty);
	cr_assert_eq(sr->optional_stdin_case, PROCESS__START_REQUEST__OPTIONAL_STDIN__NOT_SET);
	cr_assert_eq(sr->optional_pty_case, PROCESS__START_REQUEST__OPTIONAL_PTY_PTY);
	cr_assert_eq(sr->pty->size->cols, 80);
	cr_assert_eq(sr->pty->size->rows, 24);
	cr_assert_eq(sr->process->n_envs, 3);
	cr_assert_eq(sr->process->optional_cwd_case, PROCESS__PROCESS_CONFIG__OPTIONAL_CWD__NOT_SET);
	expect_json(sr, "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-i\",\"-l\"],\"envs\":"
			"{\"LANG\":\"C.UTF-8\",\"LC_ALL\":\"C.UTF-8\",\"TERM\":\"xterm-256color\"}},"
			"\"pty\":{\"size\":{\"cols\":80,\"rows\":24}}}");
	protobuf_c_message_free_unpacked(&sr->base, NULL);

	si = (Process__SendInputRequest *)dec_ok(&process__send_input_request__descriptor,
		"{\"process\":{\"pid\":412},\"input\":{\"stdin\":\"aGVsbG8K\"}}");
	cr_assert_eq(si->process->selector_case, PROCESS__PROCESS_SELECTOR__SELECTOR_PID);
	cr_assert_eq(si->process->pid, 412);
	cr_assert_eq(si->input->input_case, PROCESS__PROCESS_INPUT__INPUT_STDIN);
	cr_assert_eq(si->input->stdin.len, 6);
	cr_assert(memcmp(si->input->stdin.data, "hello\n", 6) == 0);
	protobuf_c_message_free_unpacked(&si->base, NULL);

	/* Empty stdin from commands.sendStdin("") is a set, empty member. */
	si = (Process__SendInputRequest *)dec_ok(&process__send_input_request__descriptor,
		"{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"\"}}");
	cr_assert_eq(si->input->input_case, PROCESS__PROCESS_INPUT__INPUT_STDIN);
	cr_assert_eq(si->input->stdin.len, 0);
	protobuf_c_message_free_unpacked(&si->base, NULL);

	ss = (Process__SendSignalRequest *)dec_ok(&process__send_signal_request__descriptor,
		"{\"process\":{\"pid\":412},\"signal\":\"SIGNAL_SIGKILL\"}");
	cr_assert_eq(ss->signal, PROCESS__SIGNAL__SIGNAL_SIGKILL);
	expect_json(ss, "{\"process\":{\"pid\":412},\"signal\":\"SIGNAL_SIGKILL\"}");
	protobuf_c_message_free_unpacked(&ss->base, NULL);

	reencode(&process__list_request__descriptor, "{}", "{}");
	reencode(&filesystem__list_dir_request__descriptor, "{\"path\":\"..\",\"depth\":1}",
		 "{\"path\":\"..\",\"depth\":1}");
	reencode(&filesystem__watch_dir_request__descriptor,
		 "{\"path\":\"/a\",\"recursive\":true,\"includeEntry\":true,\"allowNetworkMounts\":true}",
		 "{\"path\":\"/a\",\"recursive\":true,\"includeEntry\":true,\"allowNetworkMounts\":true}");
	reencode(&process__update_request__descriptor,
		 "{\"process\":{\"pid\":3},\"pty\":{\"size\":{\"cols\":100,\"rows\":30}}}",
		 "{\"process\":{\"pid\":3},\"pty\":{\"size\":{\"cols\":100,\"rows\":30}}}");
	reencode(&process__connect_request__descriptor, "{\"process\":{\"tag\":\"t\"},\"replayFrom\":\"0\"}",
		 "{\"process\":{\"tag\":\"t\"},\"replayFrom\":\"0\"}");
}

/* ---------------------------------------------------------------------- */
/* Numbers                                                                 */

Test(pbjson, int64_as_strings)
{
	Filesystem__EntryInfo e = FILESYSTEM__ENTRY_INFO__INIT;
	const ProtobufCMessageDescriptor *d = &filesystem__entry_info__descriptor;
	Filesystem__EntryInfo *m;

	e.size = 4096;
	expect_json(&e, "{\"size\":\"4096\"}");
	e.size = -5;
	expect_json(&e, "{\"size\":\"-5\"}");
	e.size = INT64_MIN;
	expect_json(&e, "{\"size\":\"-9223372036854775808\"}");

	reencode(d, "{\"size\":4096}", "{\"size\":\"4096\"}");
	reencode(d, "{\"size\":\"4096\"}", "{\"size\":\"4096\"}");
	reencode(d, "{\"size\":\"-4096\"}", "{\"size\":\"-4096\"}");
	reencode(d, "{\"size\":\"1e3\"}", "{\"size\":\"1000\"}");
	reencode(d, "{\"size\":1.5e2}", "{\"size\":\"150\"}");
	reencode(d, "{\"size\":\"2.50e1\"}", "{\"size\":\"25\"}");
	reencode(d, "{\"size\":\"1200e-2\"}", "{\"size\":\"12\"}");
	reencode(d, "{\"size\":\"0\"}", "{}");
	reencode(d, "{\"size\":-0}", "{}");
	reencode(d, "{\"size\":9223372036854775807}", "{\"size\":\"9223372036854775807\"}");
	reencode(d, "{\"size\":-9223372036854775808}", "{\"size\":\"-9223372036854775808\"}");
	reencode(d, "{\"size\":\"-9223372036854775808\"}", "{\"size\":\"-9223372036854775808\"}");
	m = (Filesystem__EntryInfo *)dec_ok(d, "{\"size\":\"9223372036854775807\"}");
	cr_assert_eq(m->size, INT64_MAX);
	protobuf_c_message_free_unpacked(&m->base, NULL);

	DEC_ERR(d, "{\"size\":\"9223372036854775808\"}", "invalid value for int64 field size");
	DEC_ERR(d, "{\"size\":\"-9223372036854775809\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":\"12a\"}", "int64 field size: \"12a\"");
	DEC_ERR(d, "{\"size\":\" 12\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":\"12 \"}", "int64 field size");
	DEC_ERR(d, "{\"size\":\"+12\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":\"012\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":\"\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":\"1.5\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":1.5}", "int64 field size: 1.5");
	DEC_ERR(d, "{\"size\":\"1e-1\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":\"1e99999\"}", "int64 field size");
	DEC_ERR(d, "{\"size\":true}", "int64 field size: true");
	DEC_ERR(d, "{\"size\":[1]}", "int64 field size: [...]");
}

Test(pbjson, uint64_range)
{
	const ProtobufCMessageDescriptor *d = &process__process_event__gap_event__descriptor;

	reencode(d, "{\"from\":\"18446744073709551615\",\"to\":9223372036854775807}",
		 "{\"from\":\"18446744073709551615\",\"to\":\"9223372036854775807\"}");
	DEC_ERR(d, "{\"from\":\"18446744073709551616\"}", "invalid value for uint64 field from");
	DEC_ERR(d, "{\"from\":-1}", "uint64 field from: -1");
	DEC_ERR(d, "{\"from\":\"-1\"}", "uint64 field from");
	/* Numbers are read from their text: the whole uint64 range either way. */
	reencode(d, "{\"from\":18446744073709551615}", "{\"from\":\"18446744073709551615\"}");
	DEC_ERR(d, "{\"from\":18446744073709551616}", "invalid value for uint64 field from: 18446744073709551616");
}

Test(pbjson, int32_numbers)
{
	const ProtobufCMessageDescriptor *sel = &process__process_selector__descriptor;
	const ProtobufCMessageDescriptor *end = &process__process_event__end_event__descriptor;

	reencode(sel, "{\"pid\":412}", "{\"pid\":412}");
	reencode(sel, "{\"pid\":\"412\"}", "{\"pid\":412}");
	reencode(sel, "{\"pid\":4294967295}", "{\"pid\":4294967295}");
	reencode(sel, "{\"pid\":1.0}", "{\"pid\":1}");
	reencode(sel, "{\"pid\":1e2}", "{\"pid\":100}");
	/* A set oneof member with value 0 stays set. */
	reencode(sel, "{\"pid\":0}", "{\"pid\":0}");
	DEC_ERR(sel, "{\"pid\":\"x\"}", "invalid value for uint32 field pid: \"x\"");
	DEC_ERR(sel, "{\"pid\":4294967296}", "invalid value for uint32 field pid: 4294967296");
	DEC_ERR(sel, "{\"pid\":-1}", "uint32 field pid: -1");
	DEC_ERR(sel, "{\"pid\":1.5}", "uint32 field pid");
	DEC_ERR(sel, "{\"pid\":true}", "uint32 field pid: true");
	DEC_ERR(sel, "{\"pid\":{}}", "uint32 field pid: {...}");

	reencode(end, "{\"exitCode\":-2147483648}", "{\"exitCode\":-2147483648}");
	reencode(end, "{\"exit_code\":2147483647}", "{\"exitCode\":2147483647}");
	reencode(end, "{\"exitCode\":\"-1\"}", "{\"exitCode\":-1}");
	DEC_ERR(end, "{\"exitCode\":-2147483649}", "invalid value for sint32 field exitCode");
	DEC_ERR(end, "{\"exitCode\":2147483648}", "sint32 field exitCode");
}

Test(pbjson, huge_numbers)
{
	const ProtobufCMessageDescriptor *d = &filesystem__list_dir_request__descriptor;

	/* Out of range for the field (what protojson says), however large. */
	DEC_ERR(d, "{\"depth\":123456789012345678901234567890}",
		"invalid value for uint32 field depth: 123456789012345678901234567890");
	DEC_ERR(d, "{\"depth\":1e400}", "invalid value for uint32 field depth: 1e400");
	DEC_ERR(d, "{\"depth\":1e300}", "uint32 field depth");
	DEC_ERR(d, "{\"depth\":\"123456789012345678901234567890\"}", "uint32 field depth");
	DEC_ERR(d, "{\"depth\":\"1e20\"}", "uint32 field depth");
	DEC_ERR(d, "{\"depth\":\"100000000000000000000000000000000000000000000000000000000\"}",
		"uint32 field depth");
	/* Unknown fields may hold any valid number, whatever its size. */
	reencode(d, "{\"x\":1e300,\"y\":-0.5,\"depth\":2}", "{\"depth\":2}");
	reencode(d, "{\"x\":1e400,\"y\":-123456789012345678901234567890.5e-999,\"depth\":2}", "{\"depth\":2}");
}

/* ---------------------------------------------------------------------- */
/* Bytes, enums, timestamps                                                */

Test(pbjson, bytes_forms)
{
	const ProtobufCMessageDescriptor *d = &process__process_input__descriptor;
	Process__ProcessInput *m;

	reencode(d, "{\"stdin\":\"aGkK\"}", "{\"stdin\":\"aGkK\"}");
	reencode(d, "{\"stdin\":\"aGk=\"}", "{\"stdin\":\"aGk=\"}");
	reencode(d, "{\"stdin\":\"aGk\"}", "{\"stdin\":\"aGk=\"}");
	reencode(d, "{\"stdin\":\"aA==\"}", "{\"stdin\":\"aA==\"}");
	reencode(d, "{\"stdin\":\"aA\"}", "{\"stdin\":\"aA==\"}");
	reencode(d, "{\"pty\":\"-_-_\"}", "{\"pty\":\"+/+/\"}");
	reencode(d, "{\"pty\":\"-_-_-w\"}", "{\"pty\":\"+/+/+w==\"}");
	reencode(d, "{\"pty\":\"-_-_-w==\"}", "{\"pty\":\"+/+/+w==\"}");
	reencode(d, "{\"pty\":\"\"}", "{\"pty\":\"\"}");

	m = (Process__ProcessInput *)dec_ok(d, "{\"stdin\":\"AP8=\"}");
	cr_assert_eq(m->stdin.len, 2);
	cr_assert_eq(m->stdin.data[0], 0x00);
	cr_assert_eq(m->stdin.data[1], 0xff);
	protobuf_c_message_free_unpacked(&m->base, NULL);

	DEC_ERR(d, "{\"stdin\":\"a\"}", "invalid value for bytes field stdin: \"a\"");
	DEC_ERR(d, "{\"stdin\":\"aGk==\"}", "bytes field stdin");
	DEC_ERR(d, "{\"stdin\":\"aG=\"}", "bytes field stdin");
	DEC_ERR(d, "{\"stdin\":\"+-AA\"}", "bytes field stdin");
	DEC_ERR(d, "{\"stdin\":\"aG k\"}", "bytes field stdin");
	DEC_ERR(d, "{\"stdin\":\"\\u00e9AAA\"}", "bytes field stdin");
	DEC_ERR(d, "{\"stdin\":5}", "bytes field stdin: 5");
	DEC_ERR(d, "{\"stdin\":[104,105]}", "bytes field stdin");
}

Test(pbjson, enums)
{
	const ProtobufCMessageDescriptor *d = &process__send_signal_request__descriptor;
	Process__SendSignalRequest *m;
	Process__SendSignalRequest out = PROCESS__SEND_SIGNAL_REQUEST__INIT;

	reencode(d, "{\"signal\":\"SIGNAL_SIGTERM\"}", "{\"signal\":\"SIGNAL_SIGTERM\"}");
	reencode(d, "{\"signal\":9}", "{\"signal\":\"SIGNAL_SIGKILL\"}");
	reencode(d, "{\"signal\":9.0}", "{\"signal\":\"SIGNAL_SIGKILL\"}");
	/* Unknown numbers are kept and written back as numbers. */
	reencode(d, "{\"signal\":77}", "{\"signal\":77}");
	reencode(d, "{\"signal\":-3}", "{\"signal\":-3}");
	/* Unknown names are ignored like unknown fields. */
	m = (Process__SendSignalRequest *)dec_ok(d, "{\"signal\":\"SIGNAL_NOPE\",\"process\":{\"pid\":1}}");
	cr_assert_eq(m->signal, 0);
	cr_assert_eq(m->process->pid, 1);
	protobuf_c_message_free_unpacked(&m->base, NULL);
	/* Enum names are case sensitive; a digit string is a (unknown) name. */
	reencode(d, "{\"signal\":\"signal_sigkill\"}", "{}");
	reencode(d, "{\"signal\":\"9\"}", "{}");
	reencode(d, "{\"signal\":\"SIGNAL_UNSPECIFIED\"}", "{}");

	DEC_ERR(d, "{\"signal\":true}", "invalid value for enum field signal: true");
	DEC_ERR(d, "{\"signal\":9.5}", "enum field signal");
	DEC_ERR(d, "{\"signal\":2147483648}", "enum field signal");
	DEC_ERR(d, "{\"signal\":{}}", "enum field signal");

	out.signal = 42;
	expect_json(&out, "{\"signal\":42}");

	/* Enum-typed field in filesystem messages, by name and number. */
	reencode(&filesystem__filesystem_event__descriptor, "{\"name\":\"x\",\"type\":1000}",
		 "{\"name\":\"x\",\"type\":\"EVENT_TYPE_OVERFLOW\"}");
}

static void expect_ts(int64_t secs, int32_t nanos, const char *want)
{
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	Filesystem__EntryInfo e = FILESYSTEM__ENTRY_INFO__INIT;
	char buf[128];

	ts.seconds = secs;
	ts.nanos = nanos;
	e.modified_time = &ts;
	snprintf(buf, sizeof(buf), "{\"modifiedTime\":\"%s\"}", want);
	expect_json(&e, buf);
}

static void expect_ts_dec(const char *in, int64_t secs, int32_t nanos)
{
	char buf[128];
	Filesystem__EntryInfo *e;

	snprintf(buf, sizeof(buf), "{\"modifiedTime\":\"%s\"}", in);
	e = (Filesystem__EntryInfo *)dec_ok(&filesystem__entry_info__descriptor, buf);
	cr_assert_not_null(e->modified_time);
	cr_assert_eq(e->modified_time->seconds, secs, "%s: %" PRId64, in, e->modified_time->seconds);
	cr_assert_eq(e->modified_time->nanos, nanos, "%s: %d", in, e->modified_time->nanos);
	protobuf_c_message_free_unpacked(&e->base, NULL);
}

Test(pbjson, timestamps_encode)
{
	expect_ts(1735787045, 0, "2025-01-02T03:04:05Z");
	expect_ts(1735787045, 120000000, "2025-01-02T03:04:05.120Z");
	expect_ts(1735787045, 123456000, "2025-01-02T03:04:05.123456Z");
	expect_ts(1735787045, 123456789, "2025-01-02T03:04:05.123456789Z");
	expect_ts(1735787045, 1, "2025-01-02T03:04:05.000000001Z");
	expect_ts(0, 0, "1970-01-01T00:00:00Z");
	expect_ts(-1, 0, "1969-12-31T23:59:59Z");
	expect_ts(951782400, 0, "2000-02-29T00:00:00Z");
	expect_ts(-62135596800LL, 0, "0001-01-01T00:00:00Z");
	expect_ts(253402300799LL, 999999999, "9999-12-31T23:59:59.999999999Z");
	/* Unrepresentable values are clamped instead of producing junk. */
	expect_ts(INT64_MAX, 0, "9999-12-31T23:59:59.999999999Z");
	expect_ts(INT64_MIN, 0, "0001-01-01T00:00:00Z");
	/* Nanos outside [0, 1e9) are normalised. */
	expect_ts(10, -1, "1970-01-01T00:00:09.999999999Z");
	expect_ts(10, 1500000000, "1970-01-01T00:00:11.500Z");
}

Test(pbjson, timestamps_decode)
{
	const ProtobufCMessageDescriptor *d = &filesystem__entry_info__descriptor;

	expect_ts_dec("2025-01-02T03:04:05Z", 1735787045, 0);
	expect_ts_dec("2025-01-02T03:04:05.1Z", 1735787045, 100000000);
	expect_ts_dec("2025-01-02T03:04:05.120Z", 1735787045, 120000000);
	expect_ts_dec("2025-01-02T03:04:05.123456789Z", 1735787045, 123456789);
	expect_ts_dec("2025-01-02T05:04:05+02:00", 1735787045, 0);
	expect_ts_dec("2025-01-01T21:34:05.5-05:30", 1735787045, 500000000);
	expect_ts_dec("2025-01-02T03:04:05+00:00", 1735787045, 0);
	expect_ts_dec("1969-12-31T23:59:59Z", -1, 0);
	expect_ts_dec("2024-02-29T00:00:00Z", 1709164800, 0);
	expect_ts_dec("0001-01-01T00:00:00Z", -62135596800LL, 0);
	expect_ts_dec("9999-12-31T23:59:59.999999999Z", 253402300799LL, 999999999);
	reencode(d, "{\"modifiedTime\":\"2025-01-02T05:04:05.100+02:00\"}",
		 "{\"modifiedTime\":\"2025-01-02T03:04:05.100Z\"}");
	reencode(d, "{\"modified_time\":null}", "{}");

	static const char *const bad[] = {
		"2025-01-02T03:04:05",           /* no zone */
		"2025-01-02 03:04:05Z",          /* space */
		"2025-01-02t03:04:05Z",
		"2025-01-02T03:04:05z",
		"2025-13-01T00:00:00Z",
		"2025-00-01T00:00:00Z",
		"2025-01-32T00:00:00Z",
		"2025-02-29T00:00:00Z",          /* not a leap year */
		"1900-02-29T00:00:00Z",
		"2025-01-02T24:00:00Z",
		"2025-01-02T03:60:00Z",
		"2025-01-02T03:04:60Z",
		"2025-01-02T03:04:05.Z",
		"2025-01-02T03:04:05.1234567891Z", /* 10 digits */
		"2025-01-02T03:04:05+2:00",
		"2025-01-02T03:04:05+02:0",
		"2025-01-02T03:04:05+0200",
		"2025-01-02T03:04:05+24:00",
		"2025-01-02T03:04:05Z ",
		"25-01-02T03:04:05Z",
		"+2025-01-02T03:04:05Z",
		"2025-1-02T03:04:05Z",
		"",
		"0000-12-31T23:59:59Z",          /* before year 1 */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char buf[128];

		snprintf(buf, sizeof(buf), "{\"modifiedTime\":\"%s\"}", bad[i]);
		DEC_ERR(d, buf, "google.protobuf.Timestamp");
	}
	DEC_ERR(d, "{\"modifiedTime\":1735787045}", "google.protobuf.Timestamp field modifiedTime");
	DEC_ERR(d, "{\"modifiedTime\":{\"seconds\":1}}", "google.protobuf.Timestamp");
	DEC_ERR(d, "{\"modifiedTime\":\"0000-01-01T00:00:00Z\"}", "out of range");
}

/* ---------------------------------------------------------------------- */
/* Field names, unknown fields, null, oneofs                               */

Test(pbjson, snake_case_and_unknown_fields)
{
	reencode(&filesystem__get_watcher_events_request__descriptor, "{\"watcher_id\":\"w1\"}",
		 "{\"watcherId\":\"w1\"}");
	reencode(&filesystem__create_watcher_request__descriptor,
		 "{\"path\":\"/p\",\"include_entry\":true,\"allow_network_mounts\":true}",
		 "{\"path\":\"/p\",\"includeEntry\":true,\"allowNetworkMounts\":true}");
	reencode(&filesystem__entry_info__descriptor,
		 "{\"symlink_target\":\"/t\",\"modified_time\":\"2025-01-02T03:04:05Z\"}",
		 "{\"modifiedTime\":\"2025-01-02T03:04:05Z\",\"symlinkTarget\":\"/t\"}");
	reencode(&process__process_event__end_event__descriptor, "{\"exit_code\":3}", "{\"exitCode\":3}");
	/* Unknown fields of every JSON type are skipped. */
	reencode(&filesystem__stat_request__descriptor,
		 "{\"foo\":{\"bar\":[1,2,{\"a\":null}],\"s\":\"x\"},\"path\":\"/x\",\"n\":1.5,\"t\":true,"
		 "\"z\":null,\"Path\":\"case matters\",\"watcherId\":\"w\"}",
		 "{\"path\":\"/x\"}");
	/* Both spellings of one field: a duplicate. */
	DEC_ERR(&filesystem__get_watcher_events_request__descriptor,
		"{\"watcherId\":\"a\",\"watcher_id\":\"b\"}", "duplicate field");
	DEC_ERR(&filesystem__stat_request__descriptor, "{\"path\":\"a\",\"path\":\"b\"}", "duplicate");
}

Test(pbjson, null_means_unset)
{
	Process__StartRequest *sr;

	reencode(&filesystem__list_dir_request__descriptor, "{\"path\":null,\"depth\":null}", "{}");
	sr = (Process__StartRequest *)dec_ok(&process__start_request__descriptor,
		"{\"process\":null,\"pty\":null,\"tag\":null,\"stdin\":null}");
	cr_assert_null(sr->process);
	cr_assert_eq(sr->optional_pty_case, 0);
	cr_assert_eq(sr->optional_tag_case, 0);
	cr_assert_eq(sr->optional_stdin_case, 0);
	protobuf_c_message_free_unpacked(&sr->base, NULL);
	reencode(&process__process_config__descriptor, "{\"args\":null,\"envs\":null,\"cwd\":null}", "{}");
	/* A null oneof member does not count as set. */
	reencode(&process__process_event__data_event__descriptor, "{\"stdout\":null,\"stderr\":\"aGk=\"}",
		 "{\"stderr\":\"aGk=\"}");
	reencode(&process__process_event__descriptor, "{\"start\":null,\"keepalive\":{}}",
		 "{\"keepalive\":{}}");
	/* But null inside a list or as a map value is not a value. */
	DEC_ERR(&process__process_config__descriptor, "{\"args\":[\"a\",null]}", "args");
	DEC_ERR(&process__process_config__descriptor, "{\"envs\":{\"A\":null}}", "envs");
}

Test(pbjson, duplicate_oneof_members)
{
	DEC_ERR(&process__process_selector__descriptor, "{\"pid\":1,\"tag\":\"x\"}",
		"oneof fields pid and tag are both set");
	DEC_ERR(&process__process_selector__descriptor, "{\"pid\":0,\"tag\":\"\"}", "oneof");
	DEC_ERR(&process__process_event__descriptor, "{\"start\":{},\"end\":{}}", "oneof");
	DEC_ERR(&process__process_event__data_event__descriptor, "{\"stdout\":\"\",\"pty\":\"\"}",
		"oneof");
	DEC_ERR(&process__start_response__descriptor,
		"{\"event\":{\"data\":{\"stdout\":\"aGk=\",\"stderr\":\"aGk=\"}}}", "oneof");
	DEC_ERR(&filesystem__watch_dir_response__descriptor, "{\"keepalive\":{},\"start\":{}}", "oneof");
	/* Members of different oneofs combine freely. */
	reencode(&process__process_event__data_event__descriptor, "{\"stdout\":\"\",\"offset\":\"7\"}",
		 "{\"stdout\":\"\",\"offset\":\"7\"}");
}

/* ---------------------------------------------------------------------- */
/* Malformed input                                                         */

Test(pbjson, malformed_json)
{
	const ProtobufCMessageDescriptor *d = &filesystem__stat_request__descriptor;
	static const char nul_doc[] = "{\"path\":\"a\"}\0";
	static const char nul_str[] = "{\"path\":\"a\0b\"}";

	DEC_ERR(d, "", "syntax error");
	DEC_ERR(d, "{", "syntax error at line 1");
	DEC_ERR(d, "{\"path\":}", "syntax error at line 1 column");
	DEC_ERR(d, "{\"path\":\"a\",}", "syntax error");
	DEC_ERR(d, "{\"path\":'a'}", "syntax error");
	DEC_ERR(d, "{path:\"a\"}", "syntax error");
	DEC_ERR(d, "{\"path\":\"a\"} x", "syntax error");
	DEC_ERR(d, "{\"path\":\"a\"}{}", "syntax error");
	DEC_ERR(d, "{\"path\":\"\\x\"}", "syntax error");
	DEC_ERR(d, "{\"path\":\"\\u12\"}", "syntax error");
	DEC_ERR(d, "{\"path\":\"\\ud800\"}", "syntax error");
	DEC_ERR(d, "{\"path\":\"\\u0000\"}", "syntax error");
	DEC_ERR(d, "{\"path\":NaN}", "syntax error");
	DEC_ERR(d, "{\"path\":01}", "syntax error");
	DEC_ERR(d, "\xef\xbb\xbf{}", "syntax error");
	dec_err(d, nul_doc, sizeof(nul_doc) - 1, "syntax error");
	dec_err(d, nul_str, sizeof(nul_str) - 1, "syntax error");
	/* A NULL buffer is an empty document. */
	dec_err(d, NULL, 0, "syntax error");
	/* Valid JSON that is not an object. */
	DEC_ERR(d, "[]", "expected a JSON object, got [...]");
	DEC_ERR(d, "[{\"path\":\"a\"}]", "expected a JSON object");
	DEC_ERR(d, "5", "expected a JSON object, got 5");
	DEC_ERR(d, "\"str\"", "expected a JSON object, got \"str\"");
	DEC_ERR(d, "null", "expected a JSON object, got null");
	DEC_ERR(d, "true", "expected a JSON object");
	/* Surrounding whitespace is fine. */
	reencode(d, " \n\t{ \"path\" : \"a\" }\r\n ", "{\"path\":\"a\"}");
	/* Error buffer handling: tiny and zero-length buffers. */
	{
		char small[8];

		cr_assert_null(pbjson_decode(d, "{", 1, small, sizeof(small)));
		cr_assert_eq(strlen(small), sizeof(small) - 1);
		cr_assert_null(pbjson_decode(d, "{", 1, NULL, 0));
	}
}

Test(pbjson, wrong_types)
{
	const ProtobufCMessageDescriptor *cfg = &process__process_config__descriptor;

	DEC_ERR(cfg, "{\"cmd\":5}", "invalid value for string field cmd: 5");
	DEC_ERR(cfg, "{\"cmd\":{}}", "string field cmd");
	DEC_ERR(cfg, "{\"cmd\":[\"a\"]}", "string field cmd");
	DEC_ERR(cfg, "{\"cmd\":true}", "string field cmd");
	DEC_ERR(cfg, "{\"args\":\"a\"}", "invalid value for repeated string field args: \"a\"");
	DEC_ERR(cfg, "{\"args\":{}}", "repeated string field args");
	DEC_ERR(cfg, "{\"args\":[1]}", "args");
	DEC_ERR(cfg, "{\"envs\":[]}", "invalid value for map field envs: [...]");
	DEC_ERR(cfg, "{\"envs\":\"A=1\"}", "map field envs");
	DEC_ERR(cfg, "{\"envs\":{\"A\":1}}", "string field envs: 1");
	DEC_ERR(cfg, "{\"cwd\":1}", "string field cwd");
	DEC_ERR(&process__start_request__descriptor, "{\"process\":[]}",
		"invalid value for message field process: [...]");
	DEC_ERR(&process__start_request__descriptor, "{\"process\":\"x\"}", "message field process");
	DEC_ERR(&process__start_request__descriptor, "{\"stdin\":\"false\"}",
		"invalid value for bool field stdin: \"false\"");
	DEC_ERR(&process__start_request__descriptor, "{\"stdin\":0}", "bool field stdin: 0");
	DEC_ERR(&process__start_request__descriptor, "{\"pty\":{\"size\":{\"cols\":\"wide\"}}}",
		"uint32 field cols");
	DEC_ERR(&process__process_event__descriptor, "{\"keepalive\":[]}", "message field keepalive");
	DEC_ERR(&filesystem__list_dir_response__descriptor, "{\"entries\":[{\"name\":1}]}",
		"string field name");
	DEC_ERR(&filesystem__list_dir_response__descriptor, "{\"entries\":[{}, 5]}", "entries");
	DEC_ERR(&filesystem__entry_info__descriptor, "{\"metadata\":{\"k\":[\"v\"]}}", "metadata");
	/* Long offending strings are cut in the message, which stays valid UTF-8. */
	{
		char err[256];
		const char *j = "{\"cmd\":[\"\"],\"args\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
				"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
				"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}";

		cr_assert_null(pbjson_decode(cfg, j, strlen(j), err, sizeof(err)));
		cr_assert(strstr(err, "...") || strstr(err, "string field cmd"), "%s", err);
	}
}

Test(pbjson, deep_nesting)
{
	const ProtobufCMessageDescriptor *d = &filesystem__stat_request__descriptor;
	size_t n = 200000;
	char *buf = xmalloc(2 * n + 32);
	size_t o = 0;

	/* Exactly the limit (object + 63 nested arrays) is accepted. */
	o = (size_t)sprintf(buf, "{\"x\":");
	for (int i = 0; i < PBJSON_MAX_DEPTH - 1; i++)
		buf[o++] = '[';
	for (int i = 0; i < PBJSON_MAX_DEPTH - 1; i++)
		buf[o++] = ']';
	o += (size_t)sprintf(buf + o, ",\"path\":\"p\"}");
	reencode(d, buf, "{\"path\":\"p\"}");

	/* One more level is refused. */
	o = (size_t)sprintf(buf, "{\"x\":");
	for (int i = 0; i < PBJSON_MAX_DEPTH; i++)
		buf[o++] = '[';
	for (int i = 0; i < PBJSON_MAX_DEPTH; i++)
		buf[o++] = ']';
	o += (size_t)sprintf(buf + o, "}");
	dec_err(d, buf, o, "nesting depth");

	/* Brackets inside strings do not count. */
	o = (size_t)sprintf(buf, "{\"path\":\"");
	for (int i = 0; i < 1000; i++)
		buf[o++] = i % 2 ? '{' : '[';
	o += (size_t)sprintf(buf + o, "\\\"\"}");
	{
		Filesystem__StatRequest *m = (Filesystem__StatRequest *)dec_ok(d, buf);

		cr_assert_eq(strlen(m->path), 1001);
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}

	/* A huge unbalanced prefix neither crashes nor recurses. (`{{` is
	   malformed at the second brace, before any depth is reached.) */
	memset(buf, '[', n);
	dec_err(d, buf, n, "nesting depth");
	memset(buf, '{', n);
	dec_err(d, buf, n, "syntax error at line 1");
	free(buf);
}

Test(pbjson, utf8_handling)
{
	Filesystem__StatRequest r = FILESYSTEM__STAT_REQUEST__INIT;
	const ProtobufCMessageDescriptor *d = &filesystem__stat_request__descriptor;
	Filesystem__StatRequest *m;

	r.path = "a\"b\\c/\b\f\n\r\t\x01\x1f\x7f";
	expect_json(&r, "{\"path\":\"a\\\"b\\\\c/\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\"}");
	r.path = "\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\xe2\x80\xa8<>&";
	expect_json(&r, "{\"path\":\"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\xe2\x80\xa8<>&\"}");
	/* Invalid UTF-8 becomes U+FFFD, one per bad byte, as Go does. */
	r.path = "a\xff" "b\xc3" "c\xe2\x82" "d\xed\xa0\x80" "e\xc0\xaf" "f\xf4\x90\x80\x80";
	expect_json(&r, "{\"path\":\"a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd"
			"d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "e\xef\xbf\xbd\xef\xbf\xbd"
			"f\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"}");
	r.path = "\xe2\x82";
	expect_json(&r, "{\"path\":\"\xef\xbf\xbd\xef\xbf\xbd\"}");

	/* Escapes are decoded; surrogate pairs combine. */
	m = (Filesystem__StatRequest *)dec_ok(d, "{\"path\":\"\\u00e9\\ud83d\\ude00\\n\\/\"}");
	cr_assert_str_eq(m->path, "\xc3\xa9\xf0\x9f\x98\x80\n/");
	protobuf_c_message_free_unpacked(&m->base, NULL);

	/* Invalid UTF-8 in the input is a syntax error, in values and keys. */
	DEC_ERR(d, "{\"path\":\"a\xff\"}", "syntax error");
	DEC_ERR(d, "{\"path\":\"a\xc3\"}", "syntax error");
	DEC_ERR(d, "{\"path\":\"\xed\xa0\x80\"}", "syntax error");
	DEC_ERR(d, "{\"p\xff\":1}", "syntax error");
	DEC_ERR(d, "{\"path\":\"a\x01\"}", "syntax error");

	/* Error messages are valid UTF-8 even when they quote bad input or
	   are truncated in the middle of a character. */
	{
		static const char *const docs[] = {
			"{\"path\":\"a\xff\xfe\"}", "{\"p\xc3\":1}", "\xff", "{\"path\":\xc3\xa9}",
			"{\"cmd\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\",\"args\":7}",
		};
		for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
			for (size_t errlen = 1; errlen < 120; errlen++) {
				char err[128];
				json_t *js;

				cr_assert_null(pbjson_decode(&process__process_config__descriptor, docs[i],
							     strlen(docs[i]), err, errlen));
				js = json_string(err);
				cr_assert_not_null(js, "error message is not UTF-8: %s", err);
				json_decref(js);
			}
	}
}

/* Encoder never emits invalid JSON: every output parses back. */
Test(pbjson, encoder_output_is_valid_json)
{
	Filesystem__StatRequest r = FILESYSTEM__STAT_REQUEST__INIT;
	char s[64];
	uint32_t seed = 99;

	for (int it = 0; it < 5000; it++) {
		size_t n = 1 + it % 40;
		char *js;
		Filesystem__StatRequest *back;
		char err[128];

		for (size_t i = 0; i < n; i++) {
			seed = seed * 1664525u + 1013904223u;
			s[i] = (char)((seed >> 24) | 1); /* no NUL */
		}
		s[n] = '\0';
		r.path = s;
		js = enc(&r);
		back = (Filesystem__StatRequest *)pbjson_decode(&filesystem__stat_request__descriptor, js,
								 strlen(js), err, sizeof(err));
		cr_assert_not_null(back, "%s: %s", js, err);
		protobuf_c_message_free_unpacked(&back->base, NULL);
		free(js);
	}
}

/* ---------------------------------------------------------------------- */
/* Robustness: mutated documents never crash or leak                       */

/*
 * Does the text hold a number the tree decoder read through a double (a
 * fraction, an exponent, 16 digits or more)? There the two decoders may
 * differ by design: the streaming one reads integers from the number's
 * text, exactly, as protojson does.
 */
static bool has_inexact_number(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"') {
			for (i++; i < n && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			continue;
		}
		if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
			size_t digits = 0;

			for (; i < n && strchr("-+.eE0123456789", s[i]); i++) {
				if (s[i] == '.' || s[i] == 'e' || s[i] == 'E')
					return true;
				digits += s[i] >= '0' && s[i] <= '9';
			}
			if (digits >= 16)
				return true;
			i--;
		}
	}
	return false;
}

/*
 * The streaming decoder against the tree-walking one it replaced: on every
 * text one of them accepts, both accept and build the same message.
 * Where jansson itself refused the text for a reason protojson does not
 * have (a key repeated in an unknown object, a number beyond long long or
 * double), the streaming decoder may accept; where numbers went through a
 * double, values may differ; a raw NUL byte between tokens, which jansson
 * lets through after a number, only the streaming decoder refuses.
 * Returns whether the new decoder accepted.
 */
static bool agrees_with_tree(const ProtobufCMessageDescriptor *d, const char *json, size_t n)
{
	char err[256], terr[256];
	bool parser_error;
	ProtobufCMessage *m = pbjson_decode(d, json, n, err, sizeof(err));
	ProtobufCMessage *t = pbjson_tree_decode(d, json, n, terr, sizeof(terr), &parser_error);
	bool exempt = has_inexact_number(json, n) ||
		      (!t && parser_error && (strstr(terr, "duplicate object key") || strstr(terr, "too big") ||
					      strstr(terr, "overflow"))) ||
		      (t && !m && memchr(json, '\0', n));

	if (!m)
		cr_assert_neq(err[0], '\0');
	if (m && t) {
		size_t l1 = protobuf_c_message_get_packed_size(m), l2 = protobuf_c_message_get_packed_size(t);
		uint8_t *p1 = xmalloc(l1), *p2 = xmalloc(l2);

		protobuf_c_message_pack(m, p1);
		protobuf_c_message_pack(t, p2);
		cr_assert(exempt || (l1 == l2 && memcmp(p1, p2, l1) == 0),
			  "the decoders build different messages from %.*s", (int)n, json);
		free(p1);
		free(p2);
	} else {
		cr_assert(exempt || (!m && !t), "%.*s: streaming decoder %s, tree decoder %s", (int)n, json,
			  m ? "accepts" : err, t ? "accepts" : terr);
	}
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	if (t)
		protobuf_c_message_free_unpacked(t, NULL);
	return m != NULL;
}

Test(pbjson, mutation_fuzz)
{
	static const struct {
		const ProtobufCMessageDescriptor *d;
		const char *json;
	} seeds[] = {
		{ &process__start_request__descriptor,
		  "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],\"envs\":{\"A\":\"1\","
		  "\"B\":\"2\"},\"cwd\":\"/home/user\"},\"pty\":{\"size\":{\"cols\":80,\"rows\":24}},"
		  "\"tag\":\"t\",\"stdin\":false}" },
		{ &process__start_response__descriptor,
		  "{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":true,\"status\":\"signal: killed\","
		  "\"error\":\"signal: killed\"}}}" },
		{ &process__connect_response__descriptor,
		  "{\"event\":{\"data\":{\"stdout\":\"aGVsbG8gd29ybGQK\",\"offset\":\"12\"}}}" },
		{ &filesystem__list_dir_response__descriptor,
		  "{\"entries\":[{\"name\":\"a.txt\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/a.txt\","
		  "\"size\":\"3\",\"mode\":420,\"permissions\":\"-rw-r--r--\",\"owner\":\"user\","
		  "\"group\":\"user\",\"modifiedTime\":\"2025-01-02T03:04:05.123Z\",\"symlinkTarget\":\"x\","
		  "\"metadata\":{\"k\":\"v\"}},{\"name\":\"b\",\"type\":2}]}" },
		{ &filesystem__get_watcher_events_response__descriptor,
		  "{\"events\":[{\"name\":\"a\",\"type\":\"EVENT_TYPE_WRITE\",\"entry\":{\"name\":\"a\"}}]}" },
		{ &process__stream_input_request__descriptor,
		  "{\"data\":{\"input\":{\"pty\":\"-_8=\"}}}" },
		{ &process__send_signal_request__descriptor,
		  "{\"process\":{\"pid\":412},\"signal\":\"SIGNAL_SIGKILL\"}" },
	};
	static const char tokens[] = "{}[]\":,0123456789-+.eE\\tfnul \x00\xff\xc3\xa9";
	uint32_t seed = 4242;
	char buf[1024], err[256];
	int accepted = 0;

#define RND() (seed = seed * 1103515245u + 12345u, (seed >> 8) & 0xffffff)
	for (int it = 0; it < 60000; it++) {
		size_t si = RND() % (sizeof(seeds) / sizeof(seeds[0]));
		size_t n = strlen(seeds[si].json);
		int muts = 1 + (int)(RND() % 4);
		ProtobufCMessage *m;

		memcpy(buf, seeds[si].json, n);
		for (int k = 0; k < muts && n > 0; k++) {
			size_t pos = RND() % n;
			char c = tokens[RND() % (sizeof(tokens) - 1)];

			switch (RND() % 4) {
			case 0: /* replace */
				buf[pos] = c;
				break;
			case 1: /* insert */
				if (n + 1 < sizeof(buf)) {
					memmove(buf + pos + 1, buf + pos, n - pos);
					buf[pos] = c;
					n++;
				}
				break;
			case 2: /* delete */
				memmove(buf + pos, buf + pos + 1, n - pos - 1);
				n--;
				break;
			default: /* truncate */
				n = pos;
			}
		}
		agrees_with_tree(seeds[si].d, buf, n);
		m = pbjson_decode(seeds[si].d, buf, n, err, sizeof(err));
		if (m) {
			char *js = enc(m);

			accepted++;
			protobuf_c_message_free_unpacked(m, NULL);
			free(js);
		} else {
			cr_assert_neq(err[0], '\0');
		}
	}
#undef RND
	cr_log_info("mutation fuzz: %d of 60000 mutated documents accepted", accepted);
	cr_assert_gt(accepted, 0);
}

/* ---------------------------------------------------------------------- */
/* Throughput (logged, not asserted)                                       */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(pbjson, data_event_encode_speed)
{
	enum { CHUNK = 64 * 1024, ITERS = 400 };
	Process__StartResponse r = PROCESS__START_RESPONSE__INIT;
	Process__ProcessEvent ev = PROCESS__PROCESS_EVENT__INIT;
	Process__ProcessEvent__DataEvent data;
	uint8_t *payload = xmalloc(CHUNK);
	double t0, t1, t2;
	size_t total = 0, len = 0;
	char *js;
	Process__StartResponse *back;
	char err[128];

	process__process_event__data_event__init(&data);
	for (size_t i = 0; i < CHUNK; i++)
		payload[i] = (uint8_t)(i * 31 + (i >> 7));
	data.output_case = PROCESS__PROCESS_EVENT__DATA_EVENT__OUTPUT_STDOUT;
	data.stdout.data = payload;
	data.stdout.len = CHUNK;
	ev.event_case = PROCESS__PROCESS_EVENT__EVENT_DATA;
	ev.data = &data;
	r.event = &ev;

	t0 = now_s();
	for (int i = 0; i < ITERS; i++) {
		js = pbjson_encode(&r.base, &len);
		cr_assert_not_null(js);
		total += len;
		free(js);
	}
	t1 = now_s();
	cr_assert_eq(len, strlen("{\"event\":{\"data\":{\"stdout\":\"\"}}}") + (CHUNK + 2) / 3 * 4);

	js = pbjson_encode(&r.base, &len);
	for (int i = 0; i < ITERS / 4; i++) {
		back = (Process__StartResponse *)pbjson_decode(&process__start_response__descriptor, js, len,
							       err, sizeof(err));
		cr_assert_not_null(back, "%s", err);
		cr_assert_eq(back->event->data->stdout.len, CHUNK);
		if (i == 0)
			cr_assert(memcmp(back->event->data->stdout.data, payload, CHUNK) == 0);
		protobuf_c_message_free_unpacked(&back->base, NULL);
	}
	t2 = now_s();
	free(js);
	cr_log_info("pbjson: encode 64 KiB DataEvent: %.1f us/msg, %.0f MB/s of raw output "
		    "(%.0f MB/s of JSON); decode: %.1f us/msg",
		    (t1 - t0) * 1e6 / ITERS, (double)CHUNK * ITERS / (t1 - t0) / 1e6,
		    (double)total / (t1 - t0) / 1e6, (t2 - t1) * 1e6 / (ITERS / 4));
	free(payload);
}

/* ---------------------------------------------------------------------- */
/* The decoder on its arena, the encoder into fixed buffers                */

/* A counting allocator: every block the decoder hands the message comes
   from it and goes back to it. */
static size_t ca_live, ca_calls;

static void *ca_alloc(void *ud, size_t n)
{
	ca_live++;
	ca_calls++;
	return malloc(n);
}

static void ca_free(void *ud, void *p)
{
	ca_live--;
	free(p);
}

static ProtobufCAllocator counting = { ca_alloc, ca_free, NULL };

static Filesystem__StatRequest *dec_path(const char *json, size_t len)
{
	char err[256];
	Filesystem__StatRequest *m = (Filesystem__StatRequest *)pbjson_decode_with(
		&filesystem__stat_request__descriptor, json, len, &counting, err, sizeof(err));

	cr_assert_not_null(m, "decode of %.*s failed: %s", (int)len, json, err);
	return m;
}

Test(pbjson, decoder_escapes_and_surrogates)
{
	static const struct { const char *json, *want; } cases[] = {
		{ "{\"path\":\"a\\\"b\\\\c\\/d\"}", "a\"b\\c/d" },
		{ "{\"path\":\"\\b\\f\\n\\r\\t\"}", "\b\f\n\r\t" },
		{ "{\"path\":\"\\u0041\\u00e9\\u20ac\"}", "A\xc3\xa9\xe2\x82\xac" },
		/* a surrogate pair is one code point, four bytes of UTF-8 */
		{ "{\"path\":\"\\ud83d\\ude00\"}", "\xf0\x9f\x98\x80" },
		{ "{\"path\":\"\\uD834\\uDD1E x\"}", "\xf0\x9d\x84\x9e x" },
		{ "{\"path\":\"\xf0\x9f\x98\x80 raw\"}", "\xf0\x9f\x98\x80 raw" },
		{ "{\"path\":\"\"}", "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		Filesystem__StatRequest *m = dec_path(cases[i].json, strlen(cases[i].json));

		cr_assert_str_eq(m->path, cases[i].want, "case %zu", i);
		protobuf_c_message_free_unpacked(&m->base, &counting);
	}
	cr_assert_eq(ca_live, 0, "every block went back to the allocator");
	/* A lone or reversed surrogate, a bad escape: syntax errors. */
	DEC_ERR(&filesystem__stat_request__descriptor, "{\"path\":\"\\ud83d\"}", "syntax error");
	DEC_ERR(&filesystem__stat_request__descriptor, "{\"path\":\"\\ude00\\ud83d\"}", "syntax error");
	DEC_ERR(&filesystem__stat_request__descriptor, "{\"path\":\"\\x41\"}", "syntax error");
	DEC_ERR(&filesystem__stat_request__descriptor, "{\"path\":\"\\u12\"}", "syntax error");
}

Test(pbjson, decoder_numbers)
{
	const ProtobufCMessageDescriptor *d = &process__process_selector__descriptor;
	static const struct { const char *json; uint32_t pid; } ok[] = {
		{ "{\"pid\":1e2}", 100 },        { "{\"pid\":1E2}", 100 },     { "{\"pid\":\"1e2\"}", 100 },
		{ "{\"pid\":-0}", 0 },           { "{\"pid\":\"-0\"}", 0 },   { "{\"pid\":100.0}", 100 },
		{ "{\"pid\":1.5e1}", 15 },       { "{\"pid\":4294967295}", 4294967295u },
		{ "{\"pid\":0.00e5}", 0 },
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		Process__ProcessSelector *m = (Process__ProcessSelector *)dec_ok(d, ok[i].json);

		cr_assert_eq(m->pid, ok[i].pid, "%s", ok[i].json);
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	DEC_ERR(d, "{\"pid\":1.5}", "invalid value for uint32 field pid: 1.5");
	DEC_ERR(d, "{\"pid\":-1}", "invalid value for uint32 field pid: -1");
	DEC_ERR(d, "{\"pid\":1e10}", "invalid value for uint32 field pid");
	DEC_ERR(d, "{\"pid\":01}", "syntax error");
	DEC_ERR(d, "{\"pid\":+1}", "syntax error");
	DEC_ERR(d, "{\"pid\":.5}", "syntax error");
	DEC_ERR(d, "{\"pid\":NaN}", "syntax error");
}

Test(pbjson, decoder_duplicate_keys)
{
	const ProtobufCMessageDescriptor *d = &filesystem__stat_request__descriptor;

	/* The same key twice is refused by the parser, one field under both
	   its names by the decoder. */
	DEC_ERR(d, "{\"path\":\"a\",\"path\":\"b\"}", "duplicate");
	DEC_ERR(&process__send_signal_request__descriptor,
		"{\"process\":{\"pid\":1,\"pid\":2}}", "duplicate");
	DEC_ERR(&filesystem__create_watcher_request__descriptor,
		"{\"path\":\"/\",\"recursive\":true,\"recursive\":false}", "duplicate");
	DEC_ERR(&filesystem__get_watcher_events_request__descriptor,
		"{\"watcherId\":\"a\",\"watcher_id\":\"b\"}", "duplicate field");
}

Test(pbjson, decoder_huge_strings)
{
	/* Strings past the arena's blocks come from blocks of their own; a
	   string with escapes all the way is decoded whole. */
	size_t sizes[] = { 100, 8191, 8192, 40000, 1 << 20, 5 << 20 };

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k], o = 0;
		char *j = xmalloc(2 * n + 32);
		Filesystem__StatRequest *m;

		o = (size_t)sprintf(j, "{\"path\":\"");
		for (size_t i = 0; i < n; i++) {
			if (i % 1000 == 999) {
				j[o++] = '\\';
				j[o++] = 'n';
			} else {
				j[o++] = (char)('a' + i % 26);
			}
		}
		o += (size_t)sprintf(j + o, "\",\"unknown\":[1,2,{\"x\":\"%s\"}]}", "y");
		m = dec_path(j, o);
		cr_assert_eq(strlen(m->path), n);
		if (n > 1000) {
			cr_assert_eq(m->path[998], (char)('a' + 998 % 26));
			cr_assert_eq(m->path[999], '\n');
		}
		protobuf_c_message_free_unpacked(&m->base, &counting);
		free(j);
	}
	cr_assert_eq(ca_live, 0);
}

Test(pbjson, decode_with_uses_the_allocator_only)
{
	const char *j = "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"x\"],"
			"\"envs\":{\"A\":\"1\",\"B\":\"2\"},\"cwd\":\"/tmp\"},\"tag\":\"t\",\"stdin\":true}";
	char err[256];
	ProtobufCMessage *m;

	ca_calls = 0;
	m = pbjson_decode_with(&process__start_request__descriptor, j, strlen(j), &counting, err, sizeof(err));
	cr_assert_not_null(m, "%s", err);
	cr_assert_gt(ca_calls, 8, "the message, its strings, arrays and map entries");
	protobuf_c_message_free_unpacked(m, &counting);
	cr_assert_eq(ca_live, 0);
	/* A failure part-way gives everything back too. */
	j = "{\"process\":{\"cmd\":\"x\",\"args\":[\"a\",5]}}";
	m = pbjson_decode_with(&process__start_request__descriptor, j, strlen(j), &counting, err, sizeof(err));
	cr_assert_null(m);
	cr_assert_eq(ca_live, 0);
}

enum { MT_THREADS = 4, MT_N = 2000 };

struct mt_job {
	int id;
	int bad;
};

static void *mt_decode(void *arg)
{
	struct mt_job *jb = arg;
	char j[128], want[64], err[128];

	for (int i = 0; i < MT_N; i++) {
		Filesystem__StatRequest *m;

		snprintf(want, sizeof(want), "/t%d/%d", jb->id, i);
		snprintf(j, sizeof(j), "{\"path\":\"%s\",\"x\":[{},{\"y\":1}]}", want);
		m = (Filesystem__StatRequest *)pbjson_decode(&filesystem__stat_request__descriptor, j, strlen(j), err,
							    sizeof(err));
		if (!m || strcmp(m->path, want) != 0) {
			jb->bad++;
		} else {
			size_t len;
			char *e = pbjson_encode(&m->base, &len);

			if (!e || !strstr(e, want))
				jb->bad++;
			free(e);
		}
		if (m)
			protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	return NULL;
}

Test(pbjson, decoder_on_many_threads)
{
	/* The parser's arena is per thread: decodes on several threads at
	   once, with encodes beside them, stay exact. */
	pthread_t th[MT_THREADS];
	struct mt_job jobs[MT_THREADS];
	json_t *o;
	char *s;

	for (int i = 0; i < MT_THREADS; i++) {
		jobs[i] = (struct mt_job){ i, 0 };
		cr_assert_eq(pthread_create(&th[i], NULL, mt_decode, &jobs[i]), 0);
	}
	for (int i = 0; i < MT_THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(jobs[i].bad, 0, "thread %d", i);
	}
	/* jansson, which the other users of JSON keep, is untouched. */
	o = json_pack("{s:s}", "a", "b");
	s = json_dumps(o, JSON_COMPACT);
	cr_assert_str_eq(s, "{\"a\":\"b\"}");
	free(s);
	json_decref(o);
}

Test(pbjson, encode_to_a_fixed_buffer)
{
	Filesystem__EntryInfo e = FILESYSTEM__ENTRY_INFO__INIT;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	Filesystem__StatResponse r = FILESYSTEM__STAT_RESPONSE__INIT;
	char buf[512];
	size_t len, wlen;
	char *want;

	e.name = "n\"\x01";
	e.path = "/p/n";
	e.size = -1234567890123LL;
	e.mode = 0755;
	e.type = FILESYSTEM__FILE_TYPE__FILE_TYPE_DIRECTORY;
	ts.seconds = 1700000000;
	ts.nanos = 120000000;
	e.modified_time = &ts;
	r.entry = &e;
	want = pbjson_encode(&r.base, &wlen);
	cr_assert_str_eq(want, "{\"entry\":{\"name\":\"n\\\"\\u0001\",\"type\":\"FILE_TYPE_DIRECTORY\","
			       "\"path\":\"/p/n\",\"size\":\"-1234567890123\",\"mode\":493,"
			       "\"modifiedTime\":\"2023-11-14T22:13:20.120Z\"}}");
	cr_assert_eq(pbjson_encode_to(&r.base, buf, sizeof(buf), &len), 0);
	cr_assert_eq(len, wlen);
	cr_assert_eq(memcmp(buf, want, len), 0);
	/* Every buffer too small says so, and never writes past its end. */
	for (size_t cap = 0; cap <= wlen; cap++) {
		char *b = xmalloc(cap ? cap : 1);

		cr_assert_eq(pbjson_encode_to(&r.base, b, cap, &len), -ENOBUFS, "cap %zu", cap);
		free(b);
	}
	/* The writer asks for room by the value (a number: 23 bytes): with
	   that much to spare the JSON fits. */
	cr_assert_eq(pbjson_encode_to(&r.base, buf, wlen + 33, &len), 0);
	cr_assert_eq(len, wlen);
	free(want);
}

Test(pbjson, numbers_without_printf)
{
	/* The digit writer at its edges: each 64-bit extreme, each length. */
	Filesystem__EntryInfo e = FILESYSTEM__ENTRY_INFO__INIT;
	Process__ProcessSelector sel = PROCESS__PROCESS_SELECTOR__INIT;
	int64_t vals[] = { 0, 1, 9, 10, 99, 100, 12345678, INT64_MAX, INT64_MIN, -1, -10, 1000000000000000000LL };
	uint32_t pids[] = { 0, 7, 10, 4294967295u, 1000000000u };
	char want[64], *got;

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		e.size = vals[i];
		got = enc(&e);
		snprintf(want, sizeof(want), vals[i] ? "{\"size\":\"%" PRId64 "\"}" : "{}", vals[i]);
		cr_assert_str_eq(got, want);
		free(got);
	}
	for (size_t i = 0; i < sizeof(pids) / sizeof(pids[0]); i++) {
		sel.selector_case = PROCESS__PROCESS_SELECTOR__SELECTOR_PID;
		sel.pid = pids[i];
		got = enc(&sel);
		snprintf(want, sizeof(want), "{\"pid\":%" PRIu32 "}", pids[i]);
		cr_assert_str_eq(got, want);
		free(got);
	}
}

Test(pbjson, field_names_for_pieces)
{
	const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
		&filesystem__entry_info__descriptor, "modified_time");
	char out[32];

	cr_assert_eq(pbjson_field_name(f, out, sizeof(out)), strlen("\"modifiedTime\":"));
	cr_assert_eq(memcmp(out, "\"modifiedTime\":", 15), 0);
	cr_assert_eq(pbjson_field_name(f, out, 10), 0, "too small: nothing");
}

/* ---------------------------------------------------------------------- */
/* The streaming decoder at its edges                                      */

Test(pbjson, keys_with_escapes_and_repeated_keys)
{
	const ProtobufCMessageDescriptor *st = &filesystem__stat_request__descriptor;
	const ProtobufCMessageDescriptor *sel = &process__process_selector__descriptor;

	/* A key with escapes is decoded before it is looked up, in either
	   spelling of the field. */
	reencode(st, "{\"pa\\u0074h\":\"/x\"}", "{\"path\":\"/x\"}");
	reencode(st, "{\"\\u0070\\u0061\\u0074\\u0068\":\"/x\"}", "{\"path\":\"/x\"}");
	reencode(&filesystem__get_watcher_events_request__descriptor, "{\"watcher\\u005fid\":\"w\"}",
		 "{\"watcherId\":\"w\"}");
	DEC_ERR(st, "{\"path\":\"a\",\"p\\u0061th\":\"b\"}", "duplicate field p");
	/* An unknown key may repeat (protojson does not look at it), at any
	   depth; a known one may not, null or not. */
	reencode(st, "{\"x\":1,\"x\":[2],\"path\":\"/x\",\"y\":{\"z\":1,\"z\":{\"z\":2,\"z\":3}}}",
		 "{\"path\":\"/x\"}");
	DEC_ERR(st, "{\"path\":null,\"path\":\"a\"}", "duplicate field path");
	DEC_ERR(st, "{\"path\":\"a\",\"path\":null}", "duplicate field path");
	/* One oneof member twice is a duplicate field; two members, a oneof
	   error; a member and null, one member. */
	DEC_ERR(sel, "{\"pid\":1,\"pid\":1}", "duplicate field pid");
	DEC_ERR(sel, "{\"tag\":\"a\",\"pid\":1}", "oneof fields tag and pid are both set");
	reencode(sel, "{\"tag\":null,\"pid\":3}", "{\"pid\":3}");
	DEC_ERR(&process__process_event__descriptor, "{\"start\":{\"pid\":1},\"start\":{}}", "duplicate field start");
	/* Keys that only look like a field. */
	reencode(st, "{\"path \":\"a\",\"pat\":\"b\",\"pathx\":\"c\",\"PATH\":\"d\",\"\":1}", "{}");
}

Test(pbjson, map_keys)
{
	const ProtobufCMessageDescriptor *cfg = &process__process_config__descriptor;
	char *j = xmalloc(64 * 1024);
	size_t o;
	Process__ProcessConfig *m;

	DEC_ERR(cfg, "{\"envs\":{\"A\":\"1\",\"A\":\"2\"}}", "duplicate key in map field envs: \"A\"");
	DEC_ERR(cfg, "{\"envs\":{\"A\":\"1\",\"\\u0041\":\"2\"}}", "duplicate key in map field envs");
	reencode(cfg, "{\"envs\":{\"A\":\"1\",\"a\":\"2\",\"\":\"3\"}}", "{\"envs\":{\"\":\"3\",\"A\":\"1\",\"a\":\"2\"}}");
	/* Many keys: distinct ones are kept in order, a repeated one is
	   found however far apart. */
	o = (size_t)sprintf(j, "{\"envs\":{");
	for (int i = 0; i < 2000; i++)
		o += (size_t)sprintf(j + o, "%s\"K%d\":\"%d\"", i ? "," : "", i, i);
	strcpy(j + o, "}}");
	m = (Process__ProcessConfig *)dec_ok(cfg, j);
	cr_assert_eq(m->n_envs, 2000);
	cr_assert_str_eq(m->envs[1999]->key, "K1999");
	cr_assert_str_eq(m->envs[7]->value, "7");
	protobuf_c_message_free_unpacked(&m->base, NULL);
	o += (size_t)sprintf(j + o, ",\"K3\":\"x\"}}");
	DEC_ERR(cfg, j, "duplicate key in map field envs: \"K3\"");
	free(j);
}

Test(pbjson, depth_limit_in_every_position)
{
	const ProtobufCMessageDescriptor *d = &filesystem__stat_request__descriptor;
	char buf[1024];
	size_t o;

	/* Objects of an unknown field: the top object and 63 more pass, one
	   more is refused. */
	for (int extra = 0; extra < 2; extra++) {
		o = (size_t)sprintf(buf, "{\"path\":\"p\"");
		for (int i = 0; i < PBJSON_MAX_DEPTH - 1 + extra; i++)
			o += (size_t)sprintf(buf + o, i ? "\"x\":{" : ",\"x\":{");
		for (int i = 0; i < PBJSON_MAX_DEPTH - 1 + extra; i++)
			buf[o++] = '}';
		buf[o++] = '}';
		buf[o] = '\0';
		if (extra)
			DEC_ERR(d, buf, "exceeds maximum nesting depth 64");
		else
			reencode(d, buf, "{\"path\":\"p\"}");
	}
	/* Known messages nested: the limit counts the same. */
	o = (size_t)sprintf(buf, "{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"\"}}");
	reencode(&process__send_input_request__descriptor, buf, buf);
	/* The bound holds after an invalid value, where nothing is stored. */
	o = (size_t)sprintf(buf, "{\"path\":5,\"x\":");
	for (int i = 0; i < 100; i++)
		buf[o++] = '[';
	DEC_ERR(d, buf, "nesting depth");
}

Test(pbjson, numbers_from_their_text)
{
	const ProtobufCMessageDescriptor *sel = &process__process_selector__descriptor;
	const ProtobufCMessageDescriptor *ent = &filesystem__entry_info__descriptor;

	reencode(sel, "{\"pid\":1.0}", "{\"pid\":1}");
	reencode(sel, "{\"pid\":-0}", "{\"pid\":0}");
	reencode(sel, "{\"pid\":-0.0e5}", "{\"pid\":0}");
	reencode(sel, "{\"pid\":0.42e2}", "{\"pid\":42}");
	DEC_ERR(sel, "{\"pid\":0.42e1}", "invalid value for uint32 field pid: 0.42e1");
	/* Exact, not through a double: 2^63 - 1 written with a fraction and
	   an exponent, and one more than the largest uint64. */
	reencode(ent, "{\"size\":9223372036854775807.0}", "{\"size\":\"9223372036854775807\"}");
	reencode(ent, "{\"size\":922337203685477580.7e1}", "{\"size\":\"9223372036854775807\"}");
	DEC_ERR(ent, "{\"size\":9223372036854775807.5}", "int64 field size");
	DEC_ERR(ent, "{\"size\":1.0000000000000001}", "int64 field size");
	DEC_ERR(ent, "{\"size\":1e400}", "invalid value for int64 field size: 1e400");
	DEC_ERR(ent, "{\"size\":-1e400}", "int64 field size");
	/* A long number is quoted cut in the message. */
	DEC_ERR(sel, "{\"pid\":123456789012345678901234567890123456789012345678901234567890}",
		"uint32 field pid: 1234567890123456789012345678901234567890...");
	/* Malformed numbers are the parser's. */
	DEC_ERR(sel, "{\"pid\":1.}", "syntax error");
	DEC_ERR(sel, "{\"pid\":1e}", "syntax error");
	DEC_ERR(sel, "{\"pid\":-}", "syntax error");
	DEC_ERR(sel, "{\"pid\":0x10}", "syntax error");
	DEC_ERR(sel, "{\"pid\":Infinity}", "syntax error");
	/* A number is no enum name in a string, nor a bool. */
	DEC_ERR(&process__start_request__descriptor, "{\"stdin\":1}", "bool field stdin: 1");
}

Test(pbjson, strings_where_the_parser_is_lenient)
{
	const ProtobufCMessageDescriptor *d = &filesystem__stat_request__descriptor;

	/* \v and \f are no JSON white space, anywhere between tokens. */
	DEC_ERR(d, "{\v\"path\":\"a\"}", "syntax error at line 1 column 2");
	DEC_ERR(d, "{\"path\"\f:\"a\"}", "syntax error");
	DEC_ERR(d, "{\"x\":[1,\v2],\"path\":\"a\"}", "syntax error");
	DEC_ERR(d, "{\"path\":\"a\"}\v", "syntax error");
	DEC_ERR(d, "\f{\"path\":\"a\"}", "syntax error");
	reencode(d, "\r\n\t {\"path\" \t:\r\n\"a\"\n}\n", "{\"path\":\"a\"}");
	/* UTF-8 by Go's rules, in values, keys and skipped values alike:
	   overlong forms, surrogates, beyond U+10FFFF, a cut sequence. */
	DEC_ERR(d, "{\"path\":\"\xc0\xaf\"}", "syntax error at line 1 column 10: invalid UTF-8");
	DEC_ERR(d, "{\"path\":\"\xe0\x80\xaf\"}", "invalid UTF-8");
	DEC_ERR(d, "{\"path\":\"\xf4\x90\x80\x80\"}", "invalid UTF-8");
	DEC_ERR(d, "{\"path\":\"ok\xf0\x9f\x98\"}", "invalid UTF-8");
	DEC_ERR(d, "{\"x\":[\"\xed\xbf\xbf\"],\"path\":\"a\"}", "invalid UTF-8");
	DEC_ERR(d, "{\"\xed\xa0\x80\":1}", "invalid UTF-8");
	DEC_ERR(d, "{\"path\":\"\\n\xc3\"}", "invalid UTF-8");
	/* Escapes: NUL, lone or misordered surrogates, a high one followed
	   by something else, in every position. */
	DEC_ERR(d, "{\"path\":\"a\\u0000b\"}", "\\u0000 in a string");
	DEC_ERR(d, "{\"x\":\"\\u0000\",\"path\":\"a\"}", "\\u0000");
	DEC_ERR(d, "{\"a\\u0000\":1}", "\\u0000");
	DEC_ERR(d, "{\"path\":\"\\ud800x\"}", "unpaired UTF-16 surrogate");
	DEC_ERR(d, "{\"path\":\"\\ud800\\u0041\"}", "unpaired UTF-16 surrogate");
	DEC_ERR(d, "{\"path\":\"\\ud800\\ud800\"}", "unpaired UTF-16 surrogate");
	DEC_ERR(d, "{\"path\":\"\\udc00\"}", "unpaired UTF-16 surrogate");
	DEC_ERR(d, "{\"path\":\"x\\uDBFF\"}", "unpaired UTF-16 surrogate");
	{
		Filesystem__StatRequest *m = (Filesystem__StatRequest *)dec_ok(
			d, "{\"path\":\"\\uDBFF\\uDFFF\\u0001\\\"\\\\\xc3\xa9\"}");

		cr_assert_str_eq(m->path, "\xf4\x8f\xbf\xbf\x01\"\\\xc3\xa9");
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	/* An unfinished token after the value is not the end of the text. */
	DEC_ERR(d, "{}\"", "syntax error");
	DEC_ERR(d, "{} 1", "syntax error");
	DEC_ERR(d, "{} t", "syntax error");
	DEC_ERR(d, "{\"path\":\"a\"", "syntax error");
	/* An invalid value, then malformed text: the syntax error is told. */
	DEC_ERR(d, "{\"path\":5,\"x\":}", "syntax error");
	DEC_ERR(d, "{\"path\":5,\"x\":\"\xff\"}", "syntax error");
	DEC_ERR(d, "{\"path\":5}", "invalid value for string field path: 5");
}

Test(pbjson, huge_arrays_and_unfinished_text)
{
	const ProtobufCMessageDescriptor *cfg = &process__process_config__descriptor;
	size_t n = 200000, o;
	char *j = xmalloc(n * 8 + 64);
	Process__ProcessConfig *m;

	o = (size_t)sprintf(j, "{\"args\":[");
	for (size_t i = 0; i < n; i++)
		o += (size_t)sprintf(j + o, "%s\"%zu\"", i ? "," : "", i % 10);
	o += (size_t)sprintf(j + o, "]}");
	m = (Process__ProcessConfig *)pbjson_decode_with(cfg, j, o, &counting, NULL, 0);
	cr_assert_not_null(m);
	cr_assert_eq(m->n_args, n);
	cr_assert_str_eq(m->args[n - 1], "9");
	protobuf_c_message_free_unpacked(&m->base, &counting);
	cr_assert_eq(ca_live, 0);
	/* A list of messages, thousands long. */
	{
		const ProtobufCMessageDescriptor *ld = &filesystem__list_dir_response__descriptor;
		Filesystem__ListDirResponse *r;

		o = (size_t)sprintf(j, "{\"entries\":[");
		for (size_t i = 0; i < 20000; i++)
			o += (size_t)sprintf(j + o, "%s{\"name\":\"f%zu\",\"size\":\"%zu\"}", i ? "," : "", i, i);
		o += (size_t)sprintf(j + o, "]}");
		r = (Filesystem__ListDirResponse *)pbjson_decode_with(ld, j, o, &counting, NULL, 0);
		cr_assert_not_null(r);
		cr_assert_eq(r->n_entries, 20000);
		cr_assert_eq(r->entries[19999]->size, 19999);
		protobuf_c_message_free_unpacked(&r->base, &counting);
		cr_assert_eq(ca_live, 0);
	}
	/* Cut anywhere, a long document fails cleanly (the parser keeps an
	   unfinished last token: a long string cut is a long buffer). */
	o = (size_t)sprintf(j, "{\"cmd\":\"");
	memset(j + o, 'a', 1 << 20);
	o += 1 << 20;
	for (size_t cut = o; cut > o - 4; cut--)
		cr_assert_null(pbjson_decode_with(cfg, j, cut, &counting, NULL, 0));
	cr_assert_eq(ca_live, 0);
	free(j);
}

Test(pbjson, timestamp_at_the_top)
{
	const ProtobufCMessageDescriptor *d = &google__protobuf__timestamp__descriptor;
	Google__Protobuf__Timestamp *ts = (Google__Protobuf__Timestamp *)dec_ok(d, " \"2025-01-02T03:04:05.5Z\" ");

	cr_assert_eq(ts->seconds, 1735787045);
	cr_assert_eq(ts->nanos, 500000000);
	protobuf_c_message_free_unpacked(&ts->base, NULL);
	DEC_ERR(d, "{}", "invalid value for google.protobuf.Timestamp field (top level): {...}");
	DEC_ERR(d, "\"2025-01-02T03:04:05Z\" 1", "syntax error");
	DEC_ERR(d, "\"2025\"", "invalid google.protobuf.Timestamp value \"2025\"");
}

Test(pbjson, decoders_agree_on_every_type)
{
	/* The round-trip documents of every message type and variant, and
	   their mutations, through both decoders. */
	static const char tokens[] = "{}[]\":,0-e.\\nu \x01\xff";
	uint32_t seed = 77;

	for (size_t i = 0; i < N_TYPES; i++)
		for (int v = 0; v < N_VARIANTS; v++) {
			ProtobufCMessage *orig = fill(all_types[i], v, 0);
			size_t len;
			char *json = pbjson_encode(orig, &len);

			cr_assert_not_null(json);
			cr_assert(agrees_with_tree(all_types[i], json, len));
			for (int k = 0; k < 40 && len > 0; k++) {
				char *c = xmalloc(len);
				size_t pos;

				memcpy(c, json, len);
				seed = seed * 1103515245u + 12345u;
				pos = (seed >> 8) % len;
				c[pos] = tokens[(seed >> 20) % (sizeof(tokens) - 1)];
				agrees_with_tree(all_types[i], c, len);
				agrees_with_tree(all_types[i], c, pos);
				free(c);
			}
			free(json);
			protobuf_c_message_free_unpacked(orig, NULL);
		}
}

/*
 * The trusted-command and try-run messages as clients write them (either
 * field name, 64-bit numbers as strings or numbers, enums by name or
 * number, each member of a oneof, a member of another package's enum,
 * an unknown enum name ignored as protojson's DiscardUnknown does):
 * both decoders accept them and build the same message; the texts they
 * refuse, both refuse.
 */
Test(pbjson, trusted_and_try_messages_decode_alike)
{
	static const struct {
		const ProtobufCMessageDescriptor *d;
		const char *json;
		bool ok;
	} docs[] = {
		{ &process__start_request__descriptor,
		  "{\"process\":{\"cmd\":\"make\"},\"idempotencyKey\":\"k-1\","
		  "\"outputBudget\":{\"headBytes\":4096,\"tailBytes\":\"8192\"},\"tryRun\":{\"paths\":[\"/app\",\"/tmp/x\"]}}",
		  true },
		{ &process__start_request__descriptor,
		  "{\"process\":{\"cmd\":\"make\"},\"idempotency_key\":\"k-1\",\"output_budget\":{\"head_bytes\":1,"
		  "\"tail_bytes\":2},\"try_run\":{\"paths\":[]},\"track_changes\":true}",
		  true },
		{ &process__start_request__descriptor, "{\"idempotencyKey\":\"a\",\"idempotency_key\":\"b\"}", false },
		{ &process__start_request__descriptor, "{\"outputBudget\":{\"headBytes\":-1}}", false },
		{ &process__start_request__descriptor, "{\"tryRun\":{\"paths\":\"/app\"}}", false },
		{ &process__output_budget__descriptor, "{\"headBytes\":4294967295,\"tailBytes\":null}", true },
		{ &process__output_budget__descriptor, "{\"headBytes\":4294967296}", false },
		{ &process__send_input_request__descriptor,
		  "{\"process\":{\"pid\":7},\"input\":{\"stdin\":\"aGk=\"},\"offset\":\"18446744073709551615\"}", true },
		{ &process__send_input_request__descriptor, "{\"process\":{\"tag\":\"t\"},\"input\":{\"pty\":\"aGk\"},\"offset\":12}",
		  true },
		{ &process__send_input_request__descriptor, "{\"offset\":\"-1\"}", false },
		{ &process__stream_input_request__descriptor,
		  "{\"data\":{\"input\":{\"stdin\":\"_-8=\"},\"offset\":\"40\"}}", true },
		{ &process__stream_input_request__descriptor, "{\"start\":{\"process\":{\"pid\":1}},\"keepalive\":{}}",
		  false },
		{ &process__send_input_response__descriptor, "{\"inputOffset\":\"9007199254740993\"}", true },
		{ &process__stream_input_response__descriptor, "{\"input_offset\":3}", true },
		{ &process__wait_for_request__descriptor, "{\"port\":{\"port\":8080,\"address\":\"127.0.0.1\"},\"timeoutMs\":60000}",
		  true },
		{ &process__wait_for_request__descriptor,
		  "{\"http\":{\"port\":3000,\"path\":\"/health\",\"statusMin\":200,\"status_max\":399},\"timeout_ms\":1}", true },
		{ &process__wait_for_request__descriptor,
		  "{\"output\":{\"process\":{\"tag\":\"srv\"},\"pattern\":\"listening on \\\\d+\",\"ignoreCase\":true,"
		  "\"fixed\":false,\"stream\":\"stdout\"}}",
		  true },
		{ &process__wait_for_request__descriptor, "{\"exit\":{\"pid\":42}}", true },
		{ &process__wait_for_request__descriptor, "{\"path\":{\"path\":\"/tmp/ready\"},\"exit\":null}", true },
		{ &process__wait_for_request__descriptor, "{\"port\":{\"port\":1},\"path\":{\"path\":\"/x\"}}", false },
		{ &process__wait_for_request__descriptor, "{\"port\":{\"port\":1},\"port\":{\"port\":2}}", false },
		{ &process__wait_for_request__descriptor, "{\"timeoutMs\":1.5}", false },
		{ &process__wait_for_response__descriptor,
		  "{\"detail\":\"port 8080 listens\",\"waitedMs\":\"28\",\"address\":\"0.0.0.0:8080\",\"httpStatus\":200,"
		  "\"line\":\"ready\",\"lineOffset\":1024,\"end\":{\"exitCode\":0,\"exited\":true,\"status\":\"exit status 0\"}}",
		  true },
		{ &process__end_reason__descriptor,
		  "{\"kind\":\"KIND_OOM_KILLED\",\"message\":\"killed\",\"memoryMaxBytes\":\"536870912\","
		  "\"memory_peak_bytes\":536870912,\"timeoutMs\":0,\"session\":\"s\"}",
		  true },
		{ &process__end_reason__descriptor, "{\"kind\":2,\"signal\":9}", true },
		{ &process__end_reason__descriptor, "{\"kind\":\"KIND_NOPE\"}", true }, /* unknown names ignored */
		{ &process__end_reason__descriptor, "{\"kind\":\"KIND_TIMEOUT\",\"kind\":1}", false },
		{ &process__output_withheld__descriptor,
		  "{\"from\":\"1\",\"to\":2,\"bytes\":\"3\",\"readableFrom\":\"4\"}", true },
		{ &process__try_run__descriptor, "{\"paths\":[\"/a\",null]}", false },
		{ &process__try_change__descriptor,
		  "{\"path\":\"/app/a.c\",\"kind\":\"TRY_CHANGE_KIND_RENAMED\",\"type\":\"FILE_TYPE_FILE\",\"from\":\"/app/b.c\","
		  "\"size\":\"-1\",\"oldSize\":12,\"mode\":420,\"old_mode\":493,\"contentChanged\":true,\"modeChanged\":true,"
		  "\"ownerChanged\":false,\"binary\":false,\"unified\":\"--- a\\n+++ b\\n\",\"unifiedTruncated\":true,"
		  "\"symlinkTarget\":\"\"}",
		  true },
		{ &process__try_change__descriptor, "{\"kind\":5,\"type\":3}", true },
		{ &process__try_change__descriptor, "{\"type\":\"TRY_CHANGE_KIND_CREATED\"}", true }, /* not a FileType: ignored */
		{ &process__try_diff_request__descriptor, "{\"pid\":12,\"unified\":true,\"maxBytes\":262144,\"limit\":1000}",
		  true },
		{ &process__try_diff_request__descriptor, "{\"pid\":\"12\",\"max_bytes\":\"1\"}", true },
		{ &process__try_diff_request__descriptor, "{\"pid\":true}", false },
		{ &process__try_diff_response__descriptor,
		  "{\"diff\":{\"paths\":[\"/app\"],\"state\":\"running\",\"changes\":[{\"path\":\"/app/x\",\"kind\":1},"
		  "{\"path\":\"/app/y\",\"kind\":\"TRY_CHANGE_KIND_DELETED\",\"size\":-1}],\"truncated\":false,"
		  "\"layerBytes\":\"18446744073709551615\",\"layer_max_bytes\":1073741824,\"expiresUnixMs\":\"-5\"}}",
		  true },
		{ &process__commit_try_request__descriptor, "{\"pid\":4294967295}", true },
		{ &process__commit_try_request__descriptor, "{\"pid\":-1}", false },
		{ &process__commit_try_response__descriptor, "{\"applied\":{\"changes\":[],\"state\":\"committed\"}}", true },
		{ &process__discard_try_request__descriptor, "{\"pid\":9,\"unknownField\":{\"a\":[1,2,{}]}}", true },
		{ &process__discard_try_response__descriptor, "{}", true },
		{ &process__discard_try_response__descriptor, "{\"x\":1,\"x\":2}", true },
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
		cr_assert_eq(agrees_with_tree(docs[i].d, docs[i].json, strlen(docs[i].json)), docs[i].ok, "%s: %s",
			     docs[i].d->name, docs[i].json);

	/* And the values land where they belong. */
	Process__StartRequest *s = (Process__StartRequest *)dec_ok(&process__start_request__descriptor, docs[0].json);

	cr_assert_str_eq(s->idempotency_key, "k-1");
	cr_assert_eq(s->output_budget->head_bytes, 4096);
	cr_assert_eq(s->output_budget->tail_bytes, 8192);
	cr_assert_eq(s->try_run->n_paths, 2);
	cr_assert_str_eq(s->try_run->paths[1], "/tmp/x");
	protobuf_c_message_free_unpacked(&s->base, NULL);

	Process__SendInputRequest *in = (Process__SendInputRequest *)dec_ok(&process__send_input_request__descriptor,
									    docs[7].json);
	cr_assert_eq(in->optional_offset_case, PROCESS__SEND_INPUT_REQUEST__OPTIONAL_OFFSET_OFFSET);
	cr_assert_eq(in->offset, UINT64_MAX);
	protobuf_c_message_free_unpacked(&in->base, NULL);

	Process__WaitForRequest *w = (Process__WaitForRequest *)dec_ok(&process__wait_for_request__descriptor,
									docs[15].json);
	cr_assert_eq(w->condition_case, PROCESS__WAIT_FOR_REQUEST__CONDITION_HTTP);
	cr_assert_str_eq(w->http->path, "/health");
	cr_assert_eq(w->http->status_max, 399);
	cr_assert_eq(w->timeout_ms, 1);
	protobuf_c_message_free_unpacked(&w->base, NULL);

	w = (Process__WaitForRequest *)dec_ok(&process__wait_for_request__descriptor, docs[18].json);
	cr_assert_eq(w->condition_case, PROCESS__WAIT_FOR_REQUEST__CONDITION_PATH);
	protobuf_c_message_free_unpacked(&w->base, NULL);

	Process__TryChange *c = (Process__TryChange *)dec_ok(&process__try_change__descriptor, docs[29].json);
	cr_assert_eq(c->kind, PROCESS__TRY_CHANGE_KIND__TRY_CHANGE_KIND_RENAMED);
	cr_assert_eq(c->type, FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE);
	cr_assert_str_eq(c->from, "/app/b.c");
	cr_assert_eq(c->size, -1);
	cr_assert_eq(c->old_mode, 493);
	protobuf_c_message_free_unpacked(&c->base, NULL);

	Process__TryDiffResponse *r = (Process__TryDiffResponse *)dec_ok(&process__try_diff_response__descriptor,
									 docs[35].json);
	cr_assert_eq(r->diff->n_changes, 2);
	cr_assert_eq(r->diff->changes[1]->kind, PROCESS__TRY_CHANGE_KIND__TRY_CHANGE_KIND_DELETED);
	cr_assert_eq(r->diff->layer_bytes, UINT64_MAX);
	cr_assert_eq(r->diff->expires_unix_ms, -5);
	protobuf_c_message_free_unpacked(&r->base, NULL);
}
