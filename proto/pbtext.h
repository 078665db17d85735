/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbtext.h - the text forms proto3 JSON (protojson) gives values, and the
 * descriptor facts that go with them. Pure functions: no allocation, no
 * I/O; callable from any thread.
 *
 * Errors: the readers return false for text protojson does not accept
 * (the caller words the message); nothing else fails.
 */
#ifndef ENVD_PBTEXT_H
#define ENVD_PBTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define PBTEXT_TIMESTAMP_NAME "google.protobuf.Timestamp"
/* protojson's Timestamp range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z. */
#define PBTEXT_TS_MIN_SECONDS (-62135596800LL)
#define PBTEXT_TS_MAX_SECONDS 253402300799LL

static inline char pbtext_upper(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/*
 * How many bytes of text[0..n) spell snake_case `name` in camel case
 * (each '_' dropped, the letter after it upper-cased; the first letter
 * too when upper_first), or -1 when text does not begin with it. protoc's
 * JSON names (lowerCamelCase) and protoc-c's map entry types
 * (`<CamelField>Entry`) both compare this way.
 */
static inline long pbtext_camel_prefix(const char *name, const char *text, size_t n, bool upper_first)
{
	const char *t = text, *end = text + n;
	bool up = upper_first;

	for (; *name; name++) {
		if (*name == '_') {
			up = true;
			continue;
		}
		if (t == end || *t++ != (up ? pbtext_upper(*name) : *name))
			return -1;
		up = false;
	}
	return (long)(t - text);
}

/* Is d google.protobuf.Timestamp (remembered once seen: a pointer compare). */
bool pbtext_is_timestamp(const ProtobufCMessageDescriptor *d);
/* Is f a map<K,V> field (protoc-c's repeated `<CamelField>Entry`). */
bool pbtext_field_is_map(const ProtobufCFieldDescriptor *f);
/* "int32", "string", ... for messages; "unknown" for anything else. */
const char *pbtext_type_name(ProtobufCType t);
/* f's JSON name (lowerCamelCase) in buf, cut to len; returns buf. */
const char *pbtext_json_name(const ProtobufCFieldDescriptor *f, char *buf, size_t len);
/* A Timestamp descriptor's seconds and nanos fields; false when it has not
 * exactly those (int64 and int32, not repeated). */
bool pbtext_ts_fields(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor **sf,
		      const ProtobufCFieldDescriptor **nf);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t pbtext_days_from_civil(int64_t y, unsigned m, unsigned d);
void pbtext_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d);

/* An integer read from JSON text: sign and magnitude, before range checks. */
struct pbtext_int {
	bool neg;
	uint64_t mag;
};

/* s (n bytes, a JSON number or the digits of a quoted one) as an integer:
 * JSON's number grammar, a fraction or exponent only when the value is
 * integral (`1e3`, `1.50e2`); false otherwise or beyond 64 bits. */
bool pbtext_parse_int(const char *s, size_t n, struct pbtext_int *iv);
/* iv within a signed type of maximum max (minimum -max-1), or false. */
bool pbtext_int_signed(const struct pbtext_int *iv, uint64_t max, int64_t *out);
/* iv within an unsigned type of maximum max, or false. */
bool pbtext_int_unsigned(const struct pbtext_int *iv, uint64_t max, uint64_t *out);
/* Is s (n bytes) a number by JSON's grammar (floats given as strings). */
bool pbtext_is_number(const char *s, size_t n);
/* RFC 3339 as Go's time.Parse(time.RFC3339Nano) takes it, to UTC seconds
 * and nanos; false for anything else, fields range-checked. */
bool pbtext_parse_rfc3339(const char *s, size_t n, int64_t *secs, int32_t *nanos);

#endif
