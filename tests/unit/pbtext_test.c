/* SPDX-License-Identifier: Apache-2.0 */
/* proto/pbtext: integers and numbers read from JSON text as protojson
 * reads them, RFC 3339 timestamps, the civil calendar, field names. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "filesystem.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"
#include "proto/pbtext.h"

static bool int_of(const char *s, struct pbtext_int *iv)
{
	return pbtext_parse_int(s, strlen(s), iv);
}

Test(pbtext, integers_from_text)
{
	struct pbtext_int iv;
	int64_t i;
	uint64_t u;

	cr_assert(int_of("0", &iv) && iv.mag == 0 && !iv.neg);
	cr_assert(int_of("-12", &iv) && iv.mag == 12 && iv.neg);
	cr_assert(int_of("1e3", &iv) && iv.mag == 1000, "an integral exponent");
	cr_assert(int_of("1.50e2", &iv) && iv.mag == 150, "an integral fraction");
	cr_assert(int_of("18446744073709551615", &iv) && iv.mag == UINT64_MAX);
	cr_assert(!int_of("18446744073709551616", &iv), "past 64 bits");
	cr_assert(!int_of("1.5", &iv), "not integral");
	cr_assert(!int_of("01", &iv), "a leading zero is not JSON");
	cr_assert(!int_of("+1", &iv));
	cr_assert(!int_of("", &iv));
	cr_assert(!int_of("1e", &iv));
	cr_assert(!int_of("1 ", &iv));

	cr_assert(int_of("-9223372036854775808", &iv) && pbtext_int_signed(&iv, INT64_MAX, &i) && i == INT64_MIN);
	cr_assert(int_of("9223372036854775808", &iv) && !pbtext_int_signed(&iv, INT64_MAX, &i));
	cr_assert(int_of("-2147483649", &iv) && !pbtext_int_signed(&iv, INT32_MAX, &i));
	cr_assert(int_of("4294967295", &iv) && pbtext_int_unsigned(&iv, UINT32_MAX, &u) && u == UINT32_MAX);
	cr_assert(int_of("-1", &iv) && !pbtext_int_unsigned(&iv, UINT32_MAX, &u));
	cr_assert(int_of("-0", &iv) && pbtext_int_unsigned(&iv, UINT32_MAX, &u) && u == 0, "minus zero is zero");
}

Test(pbtext, numbers_by_the_json_grammar)
{
	static const char *const good[] = { "0", "-0", "1.5", "-1.5e-3", "2E+10", "123" };
	static const char *const bad[] = { "", "-", ".5", "1.", "01", "1e", "0x10", "NaN", "1 ", " 1" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert(pbtext_is_number(good[i], strlen(good[i])), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert(!pbtext_is_number(bad[i], strlen(bad[i])), "%s", bad[i]);
}

static bool ts_of(const char *s, int64_t *secs, int32_t *nanos)
{
	return pbtext_parse_rfc3339(s, strlen(s), secs, nanos);
}

Test(pbtext, rfc3339)
{
	int64_t s;
	int32_t n;

	cr_assert(ts_of("1970-01-01T00:00:00Z", &s, &n) && s == 0 && n == 0);
	cr_assert(ts_of("2024-02-29T12:00:00.5Z", &s, &n) && s == 1709208000 && n == 500000000);
	cr_assert(ts_of("1970-01-01T01:00:00+01:00", &s, &n) && s == 0, "an offset, to UTC");
	cr_assert(ts_of("0001-01-01T00:00:00Z", &s, &n) && s == PBTEXT_TS_MIN_SECONDS);
	cr_assert(ts_of("9999-12-31T23:59:59.999999999Z", &s, &n) && s == PBTEXT_TS_MAX_SECONDS && n == 999999999);
	cr_assert(!ts_of("2023-02-29T00:00:00Z", &s, &n), "not a leap year");
	cr_assert(!ts_of("2024-01-01T24:00:00Z", &s, &n));
	cr_assert(!ts_of("2024-01-01T00:00:00", &s, &n), "no zone");
	cr_assert(!ts_of("2024-01-01T00:00:00.1234567890Z", &s, &n), "ten fraction digits");
	cr_assert(!ts_of("2024-01-01 00:00:00Z", &s, &n));
}

Test(pbtext, civil_calendar_round_trips)
{
	for (int64_t z = -800000; z <= 3000000; z += 997) {
		int64_t y;
		unsigned m, d;

		pbtext_civil_from_days(z, &y, &m, &d);
		cr_assert_eq(pbtext_days_from_civil(y, m, d), z);
	}
	cr_assert_eq(pbtext_days_from_civil(1970, 1, 1), 0);
	cr_assert_eq(pbtext_days_from_civil(2000, 3, 1), 11017);
}

Test(pbtext, descriptors)
{
	const ProtobufCFieldDescriptor *sf, *nf;
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(&filesystem__entry_info__descriptor, "modified_time");
	char buf[64];

	cr_assert(f);
	cr_assert(pbtext_is_timestamp(f->descriptor));
	cr_assert(pbtext_is_timestamp(f->descriptor), "remembered");
	cr_assert(!pbtext_is_timestamp(&filesystem__entry_info__descriptor));
	cr_assert(pbtext_ts_fields(&google__protobuf__timestamp__descriptor, &sf, &nf));
	cr_assert_str_eq(sf->name, "seconds");
	cr_assert_str_eq(nf->name, "nanos");
	cr_assert_str_eq(pbtext_json_name(f, buf, sizeof(buf)), "modifiedTime");
	cr_assert_str_eq(pbtext_json_name(f, buf, 5), "modi", "cut to the buffer");
	cr_assert_str_eq(pbtext_type_name(PROTOBUF_C_TYPE_SFIXED64), "sfixed64");
	cr_assert(!pbtext_field_is_map(f));
	f = protobuf_c_message_descriptor_get_field_by_name(&filesystem__entry_info__descriptor, "metadata");
	cr_assert(f && pbtext_field_is_map(f), "map<string, string> metadata");
}

Test(pbtext, camel_prefix)
{
	cr_assert_eq(pbtext_camel_prefix("if_version", "ifVersion", 9, false), 9);
	cr_assert_eq(pbtext_camel_prefix("if_version", "ifVersionX", 10, false), 9, "a longer text: the prefix");
	cr_assert_eq(pbtext_camel_prefix("if_version", "ifVers", 6, false), -1, "a shorter text");
	cr_assert_eq(pbtext_camel_prefix("if_version", "if_version", 10, false), -1, "the proto name is not the JSON name");
	cr_assert_eq(pbtext_camel_prefix("envs", "EnvsEntry", 9, true), 4, "a map entry's type, upper first");
	cr_assert_eq(pbtext_camel_prefix("envs", "envsEntry", 9, true), -1);
	cr_assert_eq(pbtext_camel_prefix("a", "ab", 1, false), 1, "only n bytes are looked at");
}
