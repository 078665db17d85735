/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbtext.c - the text forms proto3 JSON gives values, and the descriptor
 * facts that go with them: integers and numbers read from their JSON text,
 * RFC 3339 timestamps, field names, map fields. Pure; shared by the codec
 * (pbjson.c) and the tests' second decoder.
 */
#include "proto/pbtext.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The Timestamp descriptor once seen (every EntryInfo has one): a
   pointer compare instead of a string compare per message. */
static const ProtobufCMessageDescriptor *_Atomic ts_desc;

bool pbtext_is_timestamp(const ProtobufCMessageDescriptor *d)
{
	if (!d)
		return false;
	if (d == atomic_load_explicit(&ts_desc, memory_order_relaxed))
		return true;
	if (d->name && d->name[0] == 'g' && strcmp(d->name, PBTEXT_TIMESTAMP_NAME) == 0) {
		atomic_store_explicit(&ts_desc, d, memory_order_relaxed);
		return true;
	}
	return false;
}

/*
 * protoc-c has no map flag: a map<K,V> field is a repeated message whose
 * type is the nested `<CamelField>Entry` with key = 1 and value = 2. Check
 * all of that so an ordinary repeated message that happens to have two
 * fields is not mistaken for a map.
 */
bool pbtext_field_is_map(const ProtobufCFieldDescriptor *f)
{
	const ProtobufCMessageDescriptor *e = f->descriptor;
	long m;

	if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE || !e)
		return false;
	if (e->n_fields != 2 || e->fields[0].id != 1 || e->fields[1].id != 2 ||
	    strcmp(e->fields[0].name, "key") != 0 || strcmp(e->fields[1].name, "value") != 0 ||
	    e->fields[0].label == PROTOBUF_C_LABEL_REPEATED ||
	    e->fields[1].label == PROTOBUF_C_LABEL_REPEATED)
		return false;
	m = pbtext_camel_prefix(f->name, e->short_name, strlen(e->short_name), true);
	return m >= 0 && strcmp(e->short_name + m, "Entry") == 0;
}

const char *pbtext_type_name(ProtobufCType t)
{
	static const char *const names[] = {
		[PROTOBUF_C_TYPE_INT32] = "int32",
		[PROTOBUF_C_TYPE_SINT32] = "sint32",
		[PROTOBUF_C_TYPE_SFIXED32] = "sfixed32",
		[PROTOBUF_C_TYPE_INT64] = "int64",
		[PROTOBUF_C_TYPE_SINT64] = "sint64",
		[PROTOBUF_C_TYPE_SFIXED64] = "sfixed64",
		[PROTOBUF_C_TYPE_UINT32] = "uint32",
		[PROTOBUF_C_TYPE_FIXED32] = "fixed32",
		[PROTOBUF_C_TYPE_UINT64] = "uint64",
		[PROTOBUF_C_TYPE_FIXED64] = "fixed64",
		[PROTOBUF_C_TYPE_FLOAT] = "float",
		[PROTOBUF_C_TYPE_DOUBLE] = "double",
		[PROTOBUF_C_TYPE_BOOL] = "bool",
		[PROTOBUF_C_TYPE_ENUM] = "enum",
		[PROTOBUF_C_TYPE_STRING] = "string",
		[PROTOBUF_C_TYPE_BYTES] = "bytes",
		[PROTOBUF_C_TYPE_MESSAGE] = "message",
	};

	if ((unsigned)t < sizeof(names) / sizeof(names[0]) && names[t])
		return names[t];
	return "unknown";
}

/* Howard Hinnant's civil calendar conversions (proleptic Gregorian). */
int64_t pbtext_days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

void pbtext_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t era;
	unsigned doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

bool pbtext_ts_fields(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor **sf,
		      const ProtobufCFieldDescriptor **nf)
{
	/* protoc-c orders fields by number: seconds = 1, nanos = 2. */
	if (d->n_fields == 2 && d->fields[0].name[0] == 's' && strcmp(d->fields[0].name, "seconds") == 0 &&
	    strcmp(d->fields[1].name, "nanos") == 0) {
		*sf = &d->fields[0];
		*nf = &d->fields[1];
	} else {
		*sf = protobuf_c_message_descriptor_get_field_by_name(d, "seconds");
		*nf = protobuf_c_message_descriptor_get_field_by_name(d, "nanos");
	}
	return *sf && *nf && (*sf)->type == PROTOBUF_C_TYPE_INT64 &&
	       (*nf)->type == PROTOBUF_C_TYPE_INT32 && (*sf)->label != PROTOBUF_C_LABEL_REPEATED &&
	       (*nf)->label != PROTOBUF_C_LABEL_REPEATED;
}

/* The JSON name of a field, for error messages. */
const char *pbtext_json_name(const ProtobufCFieldDescriptor *f, char *buf, size_t len)
{
	size_t o = 0;
	bool up = false;

	for (const char *p = f->name; *p && o + 1 < len; p++) {
		if (*p == '_') {
			up = true;
			continue;
		}
		buf[o++] = up ? pbtext_upper(*p) : *p;
		up = false;
	}
	buf[o] = '\0';
	return buf;
}

/*
 * Integer value of a JSON number written as text (protojson accepts digit
 * strings for every integer type). Follows the JSON number grammar exactly;
 * fractions and exponents are allowed only when the value is integral
 * (`1e3`, `1.50e2`), as Go's protojson does.
 */
bool pbtext_parse_int(const char *s, size_t n, struct pbtext_int *iv)
{
	const char *end = s + n, *ip, *fp = NULL;
	size_t il, fl = 0;
	long exp = 0;
	long shift;
	char digits[48];
	size_t nd = 0;

	iv->neg = false;
	iv->mag = 0;
	if (s < end && *s == '-') {
		iv->neg = true;
		s++;
	}
	if (s >= end || *s < '0' || *s > '9')
		return false;
	ip = s;
	if (*s == '0')
		s++;
	else
		while (s < end && *s >= '0' && *s <= '9')
			s++;
	il = (size_t)(s - ip);
	if (s < end && *s == '.') {
		fp = ++s;
		while (s < end && *s >= '0' && *s <= '9')
			s++;
		fl = (size_t)(s - fp);
		if (fl == 0)
			return false;
	}
	if (s < end && (*s == 'e' || *s == 'E')) {
		bool eneg = false;

		s++;
		if (s < end && (*s == '+' || *s == '-'))
			eneg = *s++ == '-';
		if (s >= end || *s < '0' || *s > '9')
			return false;
		while (s < end && *s >= '0' && *s <= '9') {
			if (exp > 10000)
				return false;
			exp = exp * 10 + (*s++ - '0');
		}
		if (eneg)
			exp = -exp;
	}
	if (s != end)
		return false;
	/* Drop trailing fraction zeros: "1.0" is the integer 1. */
	while (fl > 0 && fp[fl - 1] == '0')
		fl--;
	/* Significant digits, leading zeros dropped. */
	for (size_t i = 0; i < il + fl; i++) {
		char c = i < il ? ip[i] : fp[i - il];

		if (nd == 0 && c == '0')
			continue;
		if (nd >= sizeof(digits))
			return false;
		digits[nd++] = c;
	}
	shift = exp - (long)fl;
	if (nd == 0)
		return true; /* zero, whatever the exponent */
	if (shift < 0) {
		/* The digits shifted behind the decimal point must be zeros. */
		if ((size_t)-shift > nd)
			return false;
		for (size_t i = nd - (size_t)-shift; i < nd; i++)
			if (digits[i] != '0')
				return false;
		nd -= (size_t)-shift;
		shift = 0;
	}
	if ((long)nd + shift > 20)
		return false;
	for (long i = 0; i < (long)nd + shift; i++) {
		unsigned dg = i < (long)nd ? (unsigned)(digits[i] - '0') : 0;

		if (iv->mag > (UINT64_MAX - dg) / 10)
			return false;
		iv->mag = iv->mag * 10 + dg;
	}
	return true;
}

/* Range-check iv for a signed type with the given maximum (min = -max-1). */
bool pbtext_int_signed(const struct pbtext_int *iv, uint64_t max, int64_t *out)
{
	if (iv->neg) {
		if (iv->mag > max + 1)
			return false;
		*out = iv->mag == 0 ? 0 : -(int64_t)(iv->mag - 1) - 1;
	} else {
		if (iv->mag > max)
			return false;
		*out = (int64_t)iv->mag;
	}
	return true;
}

bool pbtext_int_unsigned(const struct pbtext_int *iv, uint64_t max, uint64_t *out)
{
	if ((iv->neg && iv->mag != 0) || iv->mag > max)
		return false;
	*out = iv->mag;
	return true;
}

/* Text allowed by the JSON number grammar (for float fields given as strings). */
bool pbtext_is_number(const char *s, size_t n)
{
	const char *end = s + n;

	if (s < end && *s == '-')
		s++;
	if (s >= end || *s < '0' || *s > '9')
		return false;
	if (*s == '0')
		s++;
	else
		while (s < end && *s >= '0' && *s <= '9')
			s++;
	if (s < end && *s == '.') {
		const char *f = ++s;

		while (s < end && *s >= '0' && *s <= '9')
			s++;
		if (s == f)
			return false;
	}
	if (s < end && (*s == 'e' || *s == 'E')) {
		const char *e;

		s++;
		if (s < end && (*s == '+' || *s == '-'))
			s++;
		e = s;
		while (s < end && *s >= '0' && *s <= '9')
			s++;
		if (s == e)
			return false;
	}
	return s == end;
}

/*
 * RFC 3339 as Go's time.Parse(time.RFC3339Nano) accepts it:
 * YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM), fields range-checked (days per
 * month included), then converted to UTC.
 */
bool pbtext_parse_rfc3339(const char *s, size_t n, int64_t *secs, int32_t *nanos)
{
	static const unsigned mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	unsigned v[6], dim;
	size_t i = 19;
	int32_t ns = 0;
	int64_t t, off = 0;
	int64_t year;

	if (n < 20)
		return false;
	for (int k = 0; k < 19; k++) {
		bool sep = k == 4 || k == 7 || k == 10 || k == 13 || k == 16;

		if (sep != (s[k] < '0' || s[k] > '9'))
			return false;
	}
	if (s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
		return false;
	year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
	for (int k = 0; k < 5; k++) {
		const char *p = s + 5 + 3 * k;

		v[k] = (unsigned)((p[0] - '0') * 10 + (p[1] - '0'));
	}
	/* v: month, day, hour, minute, second */
	if (v[0] < 1 || v[0] > 12 || v[2] > 23 || v[3] > 59 || v[4] > 59)
		return false;
	dim = mdays[v[0] - 1];
	if (v[0] == 2 && year % 4 == 0 && (year % 100 != 0 || year % 400 == 0))
		dim = 29;
	if (v[1] < 1 || v[1] > dim)
		return false;
	if (s[i] == '.') {
		size_t start = ++i;

		while (i < n && s[i] >= '0' && s[i] <= '9') {
			if (i - start >= 9)
				return false;
			ns = ns * 10 + (s[i++] - '0');
		}
		if (i == start)
			return false;
		for (size_t k = i - start; k < 9; k++)
			ns *= 10;
	}
	if (i < n && s[i] == 'Z') {
		i++;
	} else if (i < n && (s[i] == '+' || s[i] == '-')) {
		const char *p = s + i + 1;

		if (n - i != 6 || p[2] != ':')
			return false;
		for (int k = 0; k < 5; k++)
			if (k != 2 && (p[k] < '0' || p[k] > '9'))
				return false;
		v[5] = (unsigned)((p[0] - '0') * 10 + (p[1] - '0'));
		if (v[5] > 23 || (p[3] - '0') * 10 + (p[4] - '0') > 59)
			return false;
		off = (int64_t)v[5] * 3600 + ((p[3] - '0') * 10 + (p[4] - '0')) * 60;
		if (s[i] == '-')
			off = -off;
		i += 6;
	} else {
		return false;
	}
	if (i != n)
		return false;
	t = pbtext_days_from_civil(year, v[0], v[1]) * 86400 + v[2] * 3600 + v[3] * 60 + v[4] - off;
	*secs = t;
	*nanos = ns;
	return true;
}
