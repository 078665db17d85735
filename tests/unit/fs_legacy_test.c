/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "filesystem.pb-c.h"
#include "fs/legacy.h"

static Filesystem__EntryInfo *entry(const char *name)
{
	Filesystem__EntryInfo *e = calloc(1, sizeof(*e));
	filesystem__entry_info__init(e);
	e->name = (char *)name;
	e->type = FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE;
	e->path = (char *)"/p";
	e->size = 42;
	e->mode = 0644;
	e->permissions = (char *)"-rw-r--r--";
	e->owner = (char *)"root";
	return e;
}

static size_t packed(const ProtobufCMessage *m, uint8_t *buf)
{
	return protobuf_c_message_pack(m, buf);
}

Test(fs_legacy, user_agent_is_exact)
{
	cr_assert(legacy_user_agent("connect-python"));
	cr_assert_not(legacy_user_agent("connect-python/1.0"));
	cr_assert_not(legacy_user_agent("e2b-python-sdk/1.0"));
	cr_assert_not(legacy_user_agent(NULL));
}

Test(fs_legacy, entries_keep_fields_one_to_three)
{
	Filesystem__ListDirResponse r = FILESYSTEM__LIST_DIR_RESPONSE__INIT;
	Filesystem__EntryInfo *es[2] = { entry("a"), entry("b") };
	struct arena a = { 0 };
	uint8_t full[512], lean[512];

	r.entries = es;
	r.n_entries = 2;
	size_t nf = packed(&r.base, full);
	const ProtobufCMessage *v = legacy_view(&r.base, &a);
	cr_assert_not_null(v);
	size_t nl = packed(v, lean);
	cr_assert_lt(nl, nf);
	Filesystem__ListDirResponse *back = filesystem__list_dir_response__unpack(NULL, nl, lean);
	cr_assert_not_null(back);
	cr_assert_eq(back->n_entries, 2);
	cr_assert_str_eq(back->entries[1]->name, "b");
	cr_assert_str_eq(back->entries[1]->path, "/p");
	cr_assert_eq(back->entries[1]->type, FILESYSTEM__FILE_TYPE__FILE_TYPE_FILE);
	cr_assert_eq(back->entries[1]->size, 0);
	cr_assert_str_eq(back->entries[1]->owner, "");
	filesystem__list_dir_response__free_unpacked(back, NULL);
	/* The original is untouched. */
	cr_assert_eq(es[0]->size, 42);
	cr_assert_str_eq(es[0]->permissions, "-rw-r--r--");
	arena_free(&a);
	free(es[0]);
	free(es[1]);
}

Test(fs_legacy, events_lose_their_entry)
{
	Filesystem__FilesystemEvent ev = FILESYSTEM__FILESYSTEM_EVENT__INIT;
	Filesystem__EntryInfo *e = entry("n");
	struct arena a = { 0 };
	uint8_t buf[512];

	ev.name = (char *)"n";
	ev.type = FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE;
	ev.optional_entry_case = FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY_ENTRY;
	ev.entry = e;
	const ProtobufCMessage *v = legacy_view(&ev.base, &a);
	size_t n = packed(v, buf);
	Filesystem__FilesystemEvent *back = filesystem__filesystem_event__unpack(NULL, n, buf);
	cr_assert_not_null(back);
	cr_assert_str_eq(back->name, "n");
	cr_assert_eq(back->type, FILESYSTEM__EVENT_TYPE__EVENT_TYPE_CREATE);
	cr_assert_eq(back->optional_entry_case, FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY__NOT_SET);
	filesystem__filesystem_event__free_unpacked(back, NULL);
	cr_assert_eq(ev.optional_entry_case, FILESYSTEM__FILESYSTEM_EVENT__OPTIONAL_ENTRY_ENTRY);
	arena_free(&a);
	free(e);
}
