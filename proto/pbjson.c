/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbjson.c - canonical proto3 JSON over protobuf-c descriptors.
 *
 * Encoding writes JSON text directly into one growing buffer: process
 * output is encoded chunk by chunk as base64 `bytes`, and building a jansson
 * tree per chunk would cost an allocation per node plus a second copy of
 * the payload. Decoding parses with jansson and then walks the tree with the
 * descriptor, allocating exactly what protobuf_c_message_free_unpacked()
 * expects to free (malloc'd strings, bytes, arrays and sub-messages).
 */
#include "proto/pbjson.h"
#include "base/base64.h"
#include "base/buf.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define TIMESTAMP_NAME "google.protobuf.Timestamp"
/* protojson's Timestamp range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z. */
#define TS_MIN_SECONDS (-62135596800LL)
#define TS_MAX_SECONDS 253402300799LL

/* ---------------------------------------------------------------------- */
/* Descriptor helpers shared by both directions                            */

/* The Timestamp descriptor once seen (every EntryInfo has one): a
   pointer compare instead of a string compare per message. */
static const ProtobufCMessageDescriptor *_Atomic ts_desc;

static bool is_timestamp(const ProtobufCMessageDescriptor *d)
{
	if (!d)
		return false;
	if (d == atomic_load_explicit(&ts_desc, memory_order_relaxed))
		return true;
	if (d->name && d->name[0] == 'g' && strcmp(d->name, TIMESTAMP_NAME) == 0) {
		atomic_store_explicit(&ts_desc, d, memory_order_relaxed);
		return true;
	}
	return false;
}

static char ascii_upper(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* Does `key` equal protoc's JSON name (lowerCamelCase) of `proto`? */
static bool json_name_eq(const char *proto, const char *key)
{
	bool up = false;

	for (; *proto; proto++) {
		if (*proto == '_') {
			up = true;
			continue;
		}
		if (*key++ != (up ? ascii_upper(*proto) : *proto))
			return false;
		up = false;
	}
	return *key == '\0';
}

/*
 * protoc-c has no map flag: a map<K,V> field is a repeated message whose
 * type is the nested `<CamelField>Entry` with key = 1 and value = 2. Check
 * all of that so an ordinary repeated message that happens to have two
 * fields is not mistaken for a map.
 */
static bool field_is_map(const ProtobufCFieldDescriptor *f)
{
	const ProtobufCMessageDescriptor *e = f->descriptor;
	const char *p, *s;
	bool up = true;

	if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE || !e)
		return false;
	if (e->n_fields != 2 || e->fields[0].id != 1 || e->fields[1].id != 2 ||
	    strcmp(e->fields[0].name, "key") != 0 || strcmp(e->fields[1].name, "value") != 0 ||
	    e->fields[0].label == PROTOBUF_C_LABEL_REPEATED ||
	    e->fields[1].label == PROTOBUF_C_LABEL_REPEATED)
		return false;
	s = e->short_name;
	for (p = f->name; *p; p++) {
		if (*p == '_') {
			up = true;
			continue;
		}
		if (*s++ != (up ? ascii_upper(*p) : *p))
			return false;
		up = false;
	}
	return strcmp(s, "Entry") == 0;
}

size_t pbjson_value_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	default: /* 32-bit integers, float, enum */
		return 4;
	}
}

static const char *type_name(ProtobufCType t)
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
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
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

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
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

/* ---------------------------------------------------------------------- */
/* Output buffer                                                           */

/*
 * The output and a sticky failure, so the encoder writes without checking
 * every append and tests once at the end. Every writer asks for the room
 * it needs (jb_room) and then stores bytes with plain pointer writes: a
 * Stat reply is ~40 appends, and a bounds check plus a call per byte (the
 * field names went out a character at a time) was most of its cost.
 * A fixed buffer (the caller's, never grown) fails with -ENOBUFS when the
 * message does not fit, and the caller falls back to a growable one.
 */
struct jbuf {
	char *p;
	size_t len, cap;  /* cap: bytes at p; room is kept for a NUL */
	bool fixed;       /* p is the caller's and cannot grow */
	int err;          /* 0, -ENOMEM or -ENOBUFS: sticky */
};

static char *jb_grow(struct jbuf *b, size_t n)
{
	size_t want, nc;
	char *np;

	if (b->err)
		return NULL;
	if (b->fixed || n > SIZE_MAX / 4 - b->len) {
		b->err = b->fixed ? -ENOBUFS : -ENOMEM;
		return NULL;
	}
	want = b->len + n + 1;
	nc = b->cap ? b->cap : 256;
	while (nc < want)
		nc *= 2;
	np = realloc(b->p, nc);
	if (!np) {
		b->err = -ENOMEM;
		return NULL;
	}
	b->p = np;
	b->cap = nc;
	return np + b->len;
}

/* Room for n more bytes (plus a NUL) at the end; NULL after any failure. */
static inline char *jb_room(struct jbuf *b, size_t n)
{
	if (__builtin_expect(!b->err && b->cap - b->len > n, 1))
		return b->p + b->len;
	return jb_grow(b, n);
}

static inline void jb_put(struct jbuf *b, const void *s, size_t n)
{
	char *w = jb_room(b, n);

	if (!w)
		return;
	memcpy(w, s, n);
	b->len += n;
}

static inline void jb_putc(struct jbuf *b, char c)
{
	char *w = jb_room(b, 1);

	if (!w)
		return;
	*w = c;
	b->len++;
}

#define jb_lit(b, s) jb_put((b), (s), sizeof(s) - 1)

static void jb_puts(struct jbuf *b, const char *s)
{
	jb_put(b, s, strlen(s));
}

/* A value that cannot be encoded (nesting too deep, a broken descriptor). */
static void jb_fail(struct jbuf *b)
{
	if (!b->err)
		b->err = -ENOMEM;
}

static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Decimal digits of v at w (room for 20); returns the count. No libc
   formatting: snprintf was ~700 instructions a number. */
static size_t u64_digits(char *w, uint64_t v)
{
	char tmp[20];
	size_t i = sizeof(tmp), n;

	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;

		v /= 100;
		tmp[--i] = digit_pairs[d + 1];
		tmp[--i] = digit_pairs[d];
	}
	if (v >= 10) {
		tmp[--i] = digit_pairs[v * 2 + 1];
		tmp[--i] = digit_pairs[v * 2];
	} else {
		tmp[--i] = (char)('0' + v);
	}
	n = sizeof(tmp) - i;
	memcpy(w, tmp + i, n);
	return n;
}

static void jb_put_u64(struct jbuf *b, uint64_t v, bool quoted)
{
	char *w = jb_room(b, 22), *s = w;

	if (!w)
		return;
	if (quoted)
		*w++ = '"';
	w += u64_digits(w, v);
	if (quoted)
		*w++ = '"';
	b->len += (size_t)(w - s);
}

static void jb_put_i64(struct jbuf *b, int64_t v, bool quoted)
{
	char *w = jb_room(b, 23), *s = w;

	if (!w)
		return;
	if (quoted)
		*w++ = '"';
	if (v < 0)
		*w++ = '-';
	w += u64_digits(w, v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v);
	if (quoted)
		*w++ = '"';
	b->len += (size_t)(w - s);
}

/* Bytes that go into a JSON string unchanged: printable ASCII except `"`, `\`. */
static const unsigned char json_plain[256] = {
	[0x20] = 1, [0x21] = 1, [0x23 ... 0x5b] = 1, [0x5d ... 0x7e] = 1,
};

/* Length of the valid UTF-8 sequence at s (Go's rules), or 0. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t len;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	/* Reject overlong forms, UTF-16 surrogates and code points > U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/*
 * A JSON string as Go's protojson writes it: `"` and `\` escaped, control
 * characters and DEL as \b \f \n \r \t or \u00xx, valid UTF-8 unchanged,
 * every byte of invalid UTF-8 replaced by U+FFFD (clients reject invalid
 * UTF-8 outright). Plain text (paths, names) is copied while it is
 * scanned, into room asked for once.
 */
static void jb_put_string(struct jbuf *b, const char *str, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	char *w = jb_room(b, n + 2);

	if (!w)
		return;
	*w++ = '"';
	while (i < n && json_plain[s[i]])
		*w++ = (char)s[i++];
	b->len += i + 1;
	while (i < n) {
		size_t j = i, k;
		unsigned char c;

		while (j < n && json_plain[s[j]])
			j++;
		if (j > i)
			jb_put(b, s + i, j - i);
		if (j >= n)
			break;
		c = s[j];
		if (c < 0x80) {
			char esc[6] = { '\\', 0 };
			size_t elen = 2;

			switch (c) {
			case '"': esc[1] = '"'; break;
			case '\\': esc[1] = '\\'; break;
			case '\b': esc[1] = 'b'; break;
			case '\f': esc[1] = 'f'; break;
			case '\n': esc[1] = 'n'; break;
			case '\r': esc[1] = 'r'; break;
			case '\t': esc[1] = 't'; break;
			default:
				esc[1] = 'u';
				esc[2] = '0';
				esc[3] = '0';
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				elen = 6;
			}
			jb_put(b, esc, elen);
			i = j + 1;
			continue;
		}
		k = utf8_seq_len(s + j, n - j);
		if (k) {
			jb_put(b, s + j, k);
			i = j + k;
		} else {
			jb_put(b, "\xef\xbf\xbd", 3);
			i = j + 1;
		}
	}
	jb_putc(b, '"');
}

/* ---------------------------------------------------------------------- */
/* Encoder                                                                 */

static void enc_message(struct jbuf *b, const ProtobufCMessage *m, int depth);

/*
 * `"jsonName":` of each field, made once: converting the proto name on
 * every encode was a quarter of a Stat reply's cost. The cache is shared
 * by every thread without a lock: an entry is built whole, then published
 * with one compare-and-swap into an open-addressed slot keyed by the field
 * descriptor (static data that lives as long as the process); entries are
 * never freed. A full table (more fields than slots) or an allocation
 * failure only means the name is converted each time.
 */
#define NAME_SLOTS 2048

struct jname {
	const ProtobufCFieldDescriptor *f;
	size_t len;
	char text[];  /* "jsonName": */
};

static struct jname *_Atomic name_cache[NAME_SLOTS];

static size_t json_name_text(const char *proto, char *w)
{
	char *s = w;
	bool up = false;

	*w++ = '"';
	for (; *proto; proto++) {
		if (*proto == '_') {
			up = true;
			continue;
		}
		*w++ = up ? ascii_upper(*proto) : *proto;
		up = false;
	}
	*w++ = '"';
	*w++ = ':';
	return (size_t)(w - s);
}

static const struct jname *name_lookup(const ProtobufCFieldDescriptor *f)
{
	size_t h = ((uintptr_t)f >> 4) * 0x9E3779B97F4A7C15u >> 11;
	struct jname *e = NULL;

	for (size_t i = 0; i < 8; i++) {
		struct jname *_Atomic *slot = &name_cache[(h + i) % NAME_SLOTS];
		struct jname *cur = atomic_load_explicit(slot, memory_order_acquire);

		if (cur) {
			if (cur->f == f) {
				free(e);
				return cur;
			}
			continue;
		}
		if (!e) {
			e = malloc(sizeof(*e) + strlen(f->name) + 3);
			if (!e)
				return NULL;
			e->f = f;
			e->len = json_name_text(f->name, e->text);
		}
		if (atomic_compare_exchange_strong_explicit(slot, &cur, e, memory_order_acq_rel,
							    memory_order_acquire))
			return e;
		if (cur->f == f) {
			free(e);
			return cur;
		}
	}
	free(e);
	return NULL;
}

/* `,"jsonName":` (no comma before the first field), in one append. */
static void enc_name(struct jbuf *b, const ProtobufCFieldDescriptor *f, bool *first)
{
	const struct jname *e = name_lookup(f);
	size_t n = e ? e->len : strlen(f->name) + 3;
	char *w = jb_room(b, n + 1);

	if (!w)
		return;
	if (!*first) {
		*w++ = ',';
		b->len++;
	}
	*first = false;
	if (e)
		memcpy(w, e->text, n);
	else
		n = json_name_text(f->name, w);
	b->len += n;
}

size_t pbjson_field_name(const ProtobufCFieldDescriptor *f, char *out, size_t cap)
{
	const struct jname *e = name_lookup(f);

	if (e) {
		if (e->len > cap)
			return 0;
		memcpy(out, e->text, e->len);
		return e->len;
	}
	if (strlen(f->name) + 3 > cap)
		return 0;
	return json_name_text(f->name, out);
}

/*
 * Shortest round-trip decimal in the ECMAScript style protojson uses:
 * plain notation for 1e-6 <= |v| < 1e21, exponent notation otherwise.
 */
static void enc_float(struct jbuf *b, double v, bool is_float)
{
	char tmp[48], digits[24], out[64];
	int p, exp, nd = 0, o = 0;
	char *e;

	if (isnan(v)) {
		jb_puts(b, "\"NaN\"");
		return;
	}
	if (isinf(v)) {
		jb_puts(b, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
		return;
	}
	if (v == 0) {
		jb_puts(b, signbit(v) ? "-0" : "0");
		return;
	}
	for (p = 1; p <= 17; p++) {
		double r;

		snprintf(tmp, sizeof(tmp), "%.*e", p - 1, v);
		r = strtod(tmp, NULL);
		if (is_float ? (float)r == (float)v : r == v)
			break;
	}
	/* tmp is [-]d[.ddd]e(+|-)xx */
	e = strchr(tmp, 'e');
	if (!e)
		return;
	exp = atoi(e + 1);
	for (char *c = tmp; c < e; c++)
		if (*c >= '0' && *c <= '9' && nd < (int)sizeof(digits) - 1)
			digits[nd++] = *c;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	if (v < 0)
		out[o++] = '-';
	if (fabs(v) >= 1e-6 && fabs(v) < 1e21) {
		if (exp >= 0) {
			for (int i = 0; i <= exp; i++)
				out[o++] = i < nd ? digits[i] : '0';
			if (nd > exp + 1) {
				out[o++] = '.';
				for (int i = exp + 1; i < nd; i++)
					out[o++] = digits[i];
			}
		} else {
			out[o++] = '0';
			out[o++] = '.';
			for (int i = 0; i < -exp - 1; i++)
				out[o++] = '0';
			for (int i = 0; i < nd; i++)
				out[o++] = digits[i];
		}
	} else {
		out[o++] = digits[0];
		if (nd > 1) {
			out[o++] = '.';
			for (int i = 1; i < nd; i++)
				out[o++] = digits[i];
		}
		o += snprintf(out + o, sizeof(out) - (size_t)o, "e%c%d", exp < 0 ? '-' : '+',
			      exp < 0 ? -exp : exp);
	}
	jb_put(b, out, (size_t)o);
}

static bool ts_fields(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor **sf,
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

/*
 * RFC 3339 in UTC with 0, 3, 6 or 9 fraction digits. Out-of-range values
 * cannot be represented; they are normalised and clamped to protojson's
 * range so the client still receives a parseable timestamp.
 */
static void enc_timestamp(struct jbuf *b, const ProtobufCMessage *m)
{
	const ProtobufCFieldDescriptor *sf, *nf;
	int64_t secs, nanos, days, rem, y;
	unsigned mo, d;
	char *w, *s;

	if (!ts_fields(m->descriptor, &sf, &nf)) {
		jb_fail(b);
		return;
	}
	secs = *(const int64_t *)((const char *)m + sf->offset);
	nanos = *(const int32_t *)((const char *)m + nf->offset);
	if (secs < TS_MIN_SECONDS)
		secs = TS_MIN_SECONDS, nanos = 0;
	if (secs > TS_MAX_SECONDS)
		secs = TS_MAX_SECONDS, nanos = 999999999;
	secs += nanos / 1000000000;
	nanos %= 1000000000;
	if (nanos < 0) {
		nanos += 1000000000;
		secs--;
	}
	if (secs < TS_MIN_SECONDS)
		secs = TS_MIN_SECONDS, nanos = 0;
	if (secs > TS_MAX_SECONDS)
		secs = TS_MAX_SECONDS, nanos = 999999999;
	days = secs / 86400;
	rem = secs % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	civil_from_days(days, &y, &mo, &d);
	w = jb_room(b, 32);
	if (!w)
		return;
	s = w;
	/* "YYYY-MM-DDTHH:MM:SS[.fff|.ffffff|.fffffffff]Z"; y is 1..9999. */
	*w++ = '"';
	memcpy(w, digit_pairs + (y / 100) * 2, 2);
	memcpy(w + 2, digit_pairs + (y % 100) * 2, 2);
	w[4] = '-';
	memcpy(w + 5, digit_pairs + mo * 2, 2);
	w[7] = '-';
	memcpy(w + 8, digit_pairs + d * 2, 2);
	w[10] = 'T';
	memcpy(w + 11, digit_pairs + (rem / 3600) * 2, 2);
	w[13] = ':';
	memcpy(w + 14, digit_pairs + (rem / 60 % 60) * 2, 2);
	w[16] = ':';
	memcpy(w + 17, digit_pairs + (rem % 60) * 2, 2);
	w += 19;
	if (nanos != 0) {
		/* Shortest of 3, 6 or 9 digits that is exact. */
		int digits = 9;

		while (digits > 3 && nanos % 1000 == 0) {
			nanos /= 1000;
			digits -= 3;
		}
		*w++ = '.';
		for (int i = digits - 1; i >= 0; i--) {
			w[i] = (char)('0' + nanos % 10);
			nanos /= 10;
		}
		w += digits;
	}
	*w++ = 'Z';
	*w++ = '"';
	b->len += (size_t)(w - s);
}

static void enc_bytes(struct jbuf *b, const ProtobufCBinaryData *bd)
{
	size_t n = bd->data ? bd->len : 0;
	size_t need = base64_encoded_len(n);
	char *w;

	if (need > SIZE_MAX / 2 - 2) {
		jb_fail(b);
		return;
	}
	/* +2 quotes, +1 for the NUL base64_encode writes (overwritten next). */
	w = jb_room(b, need + 3);
	if (!w)
		return;
	w[0] = '"';
	base64_encode(w + 1, bd->data, n);
	w[need + 1] = '"';
	b->len += need + 2;
}

/* One value of field `f` stored at `p` (a single element, not an array). */
static void enc_value(struct jbuf *b, const ProtobufCFieldDescriptor *f, const void *p, int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		jb_put_i64(b, *(const int32_t *)p, false);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		jb_put_u64(b, *(const uint32_t *)p, false);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		jb_put_i64(b, *(const int64_t *)p, true);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		jb_put_u64(b, *(const uint64_t *)p, true);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		enc_float(b, *(const float *)p, true);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		enc_float(b, *(const double *)p, false);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		jb_puts(b, *(const protobuf_c_boolean *)p ? "true" : "false");
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		int32_t v = *(const int32_t *)p;
		const ProtobufCEnumValue *ev =
			f->descriptor ? protobuf_c_enum_descriptor_get_value(f->descriptor, v) : NULL;

		if (ev)
			jb_put_string(b, ev->name, strlen(ev->name));
		else
			jb_put_i64(b, v, false);
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;

		jb_put_string(b, s ? s : "", s ? strlen(s) : 0);
		break;
	}
	case PROTOBUF_C_TYPE_BYTES:
		enc_bytes(b, p);
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		enc_message(b, *(ProtobufCMessage *const *)p, depth + 1);
		break;
	default:
		jb_fail(b);
	}
}

/* Implicit presence: is the value at p the type's default? */
static bool value_is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		/* Bitwise for double: -0.0 is not the default, as in protobuf-go. */
		return *(const uint64_t *)p == 0;
	case PROTOBUF_C_TYPE_BOOL:
		return *(const protobuf_c_boolean *)p == 0;
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;

		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)p == NULL;
	default:
		return *(const uint32_t *)p == 0;
	}
}

static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *base = (const char *)m;
	const void *p = base + f->offset;

	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
	switch (f->label) {
	case PROTOBUF_C_LABEL_REQUIRED:
		return true;
	case PROTOBUF_C_LABEL_OPTIONAL:
		/* proto2: pointers mark presence for strings and messages. */
		if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
			const void *v = *(const void *const *)p;

			return v && v != f->default_value;
		}
		return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
	default:
		return !value_is_default(f, p);
	}
}

/* Map keys are sorted, as protojson does, so output is deterministic. */
static int map_key_cmp(const ProtobufCFieldDescriptor *kf, const ProtobufCMessage *a,
		       const ProtobufCMessage *b)
{
	const void *pa = (const char *)a + kf->offset, *pb = (const char *)b + kf->offset;

	switch (kf->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;

		return strcmp(sa ? sa : "", sb ? sb : "");
	}
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64: {
		int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;

		return (x > y) - (x < y);
	}
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64: {
		uint64_t x = *(const uint64_t *)pa, y = *(const uint64_t *)pb;

		return (x > y) - (x < y);
	}
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_BOOL: {
		uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;

		return (x > y) - (x < y);
	}
	default: {
		int32_t x = *(const int32_t *)pa, y = *(const int32_t *)pb;

		return (x > y) - (x < y);
	}
	}
}

/* Stable merge sort of n entry pointers using tmp (n slots). */
static void map_sort(const ProtobufCFieldDescriptor *kf, const ProtobufCMessage **v,
		     const ProtobufCMessage **tmp, size_t n)
{
	size_t mid, i, j, k;

	if (n < 2)
		return;
	mid = n / 2;
	map_sort(kf, v, tmp, mid);
	map_sort(kf, v + mid, tmp, n - mid);
	for (i = 0, j = mid, k = 0; i < mid || j < n; k++) {
		if (j >= n || (i < mid && map_key_cmp(kf, v[i], v[j]) <= 0))
			tmp[k] = v[i++];
		else
			tmp[k] = v[j++];
	}
	memcpy(v, tmp, n * sizeof(*v));
}

static void enc_map(struct jbuf *b, const ProtobufCFieldDescriptor *f, ProtobufCMessage *const *ents,
		    size_t n, int depth)
{
	const ProtobufCMessageDescriptor *ed = f->descriptor;
	const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
	const ProtobufCMessage **sorted = NULL;
	size_t cnt = 0;
	bool first = true;

	if (n > SIZE_MAX / (2 * sizeof(*sorted)))
		goto oom;
	sorted = malloc(2 * n * sizeof(*sorted));
	if (!sorted)
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (ents[i])
			sorted[cnt++] = ents[i];
	map_sort(kf, sorted, sorted + n, cnt);
	jb_putc(b, '{');
	for (size_t i = 0; i < cnt; i++) {
		const char *ep = (const char *)sorted[i];
		const void *kp = ep + kf->offset;

		if (!first)
			jb_putc(b, ',');
		first = false;
		switch (kf->type) {
		case PROTOBUF_C_TYPE_STRING: {
			const char *k = *(char *const *)kp;

			jb_put_string(b, k ? k : "", k ? strlen(k) : 0);
			break;
		}
		case PROTOBUF_C_TYPE_INT64:
		case PROTOBUF_C_TYPE_SINT64:
		case PROTOBUF_C_TYPE_SFIXED64:
		case PROTOBUF_C_TYPE_UINT64:
		case PROTOBUF_C_TYPE_FIXED64:
			enc_value(b, kf, kp, depth); /* already quoted */
			break;
		case PROTOBUF_C_TYPE_BOOL:
			jb_puts(b, *(const protobuf_c_boolean *)kp ? "\"true\"" : "\"false\"");
			break;
		default:
			jb_putc(b, '"');
			enc_value(b, kf, kp, depth);
			jb_putc(b, '"');
		}
		jb_putc(b, ':');
		enc_value(b, vf, ep + vf->offset, depth);
	}
	jb_putc(b, '}');
	free(sorted);
	return;
oom:
	jb_fail(b);
}

static void enc_message(struct jbuf *b, const ProtobufCMessage *m, int depth)
{
	const ProtobufCMessageDescriptor *d;
	const char *base = (const char *)m;
	bool first = true;

	if (depth > PBJSON_MAX_DEPTH) {
		jb_fail(b);
		return;
	}
	if (!m) {
		jb_put(b, "{}", 2);
		return;
	}
	d = m->descriptor;
	if (is_timestamp(d)) {
		enc_timestamp(b, m);
		return;
	}
	jb_putc(b, '{');
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			const char *arr = *(char *const *)(base + f->offset);
			size_t es = pbjson_value_size(f->type);

			if (n == 0 || !arr)
				continue;
			enc_name(b, f, &first);
			if (field_is_map(f)) {
				enc_map(b, f, (ProtobufCMessage *const *)arr, n, depth);
				continue;
			}
			jb_putc(b, '[');
			/* A buffer that is full (fixed) or failed stops the walk:
			   a long list is not encoded to the end for nothing. */
			for (size_t k = 0; k < n && !b->err; k++) {
				if (k)
					jb_putc(b, ',');
				enc_value(b, f, arr + k * es, depth);
			}
			jb_putc(b, ']');
			continue;
		}
		if (!field_present(m, f))
			continue;
		enc_name(b, f, &first);
		enc_value(b, f, base + f->offset, depth);
		if (b->err)
			return;
	}
	jb_putc(b, '}');
}

int pbjson_encode_into(const ProtobufCMessage *msg, char **buf, size_t *cap, size_t off, size_t *len)
{
	struct jbuf b = {.p = *buf, .cap = *cap};

	if (jb_room(&b, off))
		b.len = off;
	enc_message(&b, msg, 1);
	*buf = b.p;
	*cap = b.cap;
	if (b.err)
		return -ENOMEM;
	*len = b.len - off;
	return 0;
}

int pbjson_encode_to(const ProtobufCMessage *msg, char *buf, size_t cap, size_t *len)
{
	struct jbuf b = {.p = buf, .cap = cap, .fixed = true};

	enc_message(&b, msg, 1);
	if (b.err)
		return b.err;
	*len = b.len;
	return 0;
}

char *pbjson_encode(const ProtobufCMessage *msg, size_t *len)
{
	struct jbuf b = {0};

	enc_message(&b, msg, 1);
	if (!jb_room(&b, 0)) {
		free(b.p);
		return NULL;
	}
	b.p[b.len] = '\0';
	if (len)
		*len = b.len;
	return b.p;
}

/* ---------------------------------------------------------------------- */
/* Decoder                                                                 */

struct dec {
	char *err;
	size_t errlen;
	ProtobufCAllocator *alloc; /* the message's memory */
};

static void *dec_alloc(struct dec *d, size_t n)
{
	return d->alloc->alloc(d->alloc->allocator_data, n);
}

static void dec_free(struct dec *d, void *p)
{
	if (p)
		d->alloc->free(d->alloc->allocator_data, p);
}

__attribute__((format(printf, 2, 3)))
static int dec_fail(struct dec *d, const char *fmt, ...)
{
	va_list ap;

	if (d->errlen == 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(d->err, d->errlen, fmt, ap);
	va_end(ap);
	/* The message ends up inside a JSON error body: jansson quotes raw
	   input bytes ("near '...'") and truncation can split a character,
	   so make it valid UTF-8. */
	for (unsigned char *p = (unsigned char *)d->err; *p;) {
		size_t k = utf8_seq_len(p, strnlen((char *)p, 4));

		if (k == 0) {
			*p++ = '?';
			continue;
		}
		p += k;
	}
	return -1;
}

/*
 * A short, valid-UTF-8 rendering of a JSON value for error messages:
 * scalars as JSON text (strings cut at 40 bytes), containers as {…}/[…].
 */
static void describe(const json_t *v, char *out, size_t outlen)
{
	char tmp[128];
	struct jbuf b = {.p = tmp, .cap = sizeof(tmp), .fixed = true};

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		snprintf(out, outlen, "{...}");
		return;
	case JSON_ARRAY:
		snprintf(out, outlen, "[...]");
		return;
	case JSON_STRING: {
		size_t n = json_string_length(v);
		const char *s = json_string_value(v);

		if (n > 40) {
			n = 40;
			/* Cut at a character boundary. */
			while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
				n--;
		}
		/* 40 bytes escaped are at most 240: room in tmp for any of them
		   but control characters, which are 6 each. */
		jb_put_string(&b, s, n);
		if (b.err) {
			snprintf(out, outlen, "string");
		} else {
			tmp[b.len] = '\0';
			/* A cut is the caller's to accept: the result is checked
			   only to say so to the compiler. */
			if (snprintf(out, outlen, "%s%s", tmp, n < json_string_length(v) ? "..." : "") < 0)
				out[0] = '\0';
		}
		return;
	}
	case JSON_INTEGER:
		snprintf(out, outlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return;
	case JSON_REAL:
		/* As jansson's json_dumps() prints a real: %.17g, and ".0" when
		   that reads as an integer. */
		snprintf(tmp, sizeof(tmp), "%.17g", json_real_value(v));
		if (snprintf(out, outlen, "%s%s", tmp, strpbrk(tmp, ".eEin") ? "" : ".0") < 0)
			out[0] = '\0';
		return;
	case JSON_TRUE:
		snprintf(out, outlen, "true");
		return;
	case JSON_FALSE:
		snprintf(out, outlen, "false");
		return;
	default:
		snprintf(out, outlen, "null");
	}
}

static int dec_bad_value(struct dec *d, const char *kind, const char *field, const json_t *v)
{
	char what[80];

	describe(v, what, sizeof(what));
	return dec_fail(d, "invalid value for %s field %s: %s", kind, field, what);
}

/* A JSON value as sign and magnitude, before range checks. */
struct intval {
	bool neg;
	uint64_t mag;
};

/*
 * Integer value of a JSON number written as text (protojson accepts digit
 * strings for every integer type). Follows the JSON number grammar exactly;
 * fractions and exponents are allowed only when the value is integral
 * (`1e3`, `1.50e2`), as Go's protojson does.
 */
static bool parse_int_text(const char *s, size_t n, struct intval *iv)
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

static bool json_intval(const json_t *v, struct intval *iv)
{
	switch (json_typeof(v)) {
	case JSON_INTEGER: {
		json_int_t x = json_integer_value(v);

		iv->neg = x < 0;
		iv->mag = x < 0 ? (uint64_t)(-(x + 1)) + 1 : (uint64_t)x;
		return true;
	}
	case JSON_REAL: {
		double x = json_real_value(v);

		if (!isfinite(x) || x != trunc(x) || fabs(x) >= 18446744073709551616.0)
			return false;
		iv->neg = x < 0;
		iv->mag = (uint64_t)fabs(x);
		return true;
	}
	case JSON_STRING:
		return parse_int_text(json_string_value(v), json_string_length(v), iv);
	default:
		return false;
	}
}

/* Range-check iv for a signed type with the given maximum (min = -max-1). */
static bool intval_signed(const struct intval *iv, uint64_t max, int64_t *out)
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

static bool intval_unsigned(const struct intval *iv, uint64_t max, uint64_t *out)
{
	if ((iv->neg && iv->mag != 0) || iv->mag > max)
		return false;
	*out = iv->mag;
	return true;
}

/* Text allowed by the JSON number grammar (for float fields given as strings). */
static bool is_json_number(const char *s, size_t n)
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

static bool json_double(const json_t *v, double *out)
{
	const char *s;
	size_t n;
	char tmp[64];

	if (json_is_number(v)) {
		*out = json_number_value(v);
		return true;
	}
	if (!json_is_string(v))
		return false;
	s = json_string_value(v);
	n = json_string_length(v);
	if (strcmp(s, "NaN") == 0) {
		*out = NAN;
		return true;
	}
	if (strcmp(s, "Infinity") == 0) {
		*out = INFINITY;
		return true;
	}
	if (strcmp(s, "-Infinity") == 0) {
		*out = -INFINITY;
		return true;
	}
	if (n >= sizeof(tmp) || !is_json_number(s, n))
		return false;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	*out = strtod(tmp, NULL);
	return isfinite(*out);
}

/*
 * RFC 3339 as Go's time.Parse(time.RFC3339Nano) accepts it:
 * YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM), fields range-checked (days per
 * month included), then converted to UTC.
 */
static bool parse_rfc3339(const char *s, size_t n, int64_t *secs, int32_t *nanos)
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
	t = days_from_civil(year, v[0], v[1]) * 86400 + v[2] * 3600 + v[3] * 60 + v[4] - off;
	*secs = t;
	*nanos = ns;
	return true;
}

static ProtobufCMessage *msg_new(struct dec *d, const ProtobufCMessageDescriptor *desc)
{
	ProtobufCMessage *m = dec_alloc(d, desc->sizeof_message);

	if (m)
		protobuf_c_message_init(desc, m);
	return m;
}

static ProtobufCMessage *dec_message(struct dec *d, const ProtobufCMessageDescriptor *desc,
				     const json_t *v, const char *field, int depth);

static int dec_timestamp(struct dec *d, const ProtobufCMessageDescriptor *desc, const json_t *v,
			 const char *field, ProtobufCMessage **out)
{
	const ProtobufCFieldDescriptor *sf, *nf;
	ProtobufCMessage *m;
	int64_t secs;
	int32_t nanos;
	char what[80];

	if (!ts_fields(desc, &sf, &nf))
		return dec_fail(d, "unsupported %s descriptor", TIMESTAMP_NAME);
	if (!json_is_string(v))
		return dec_bad_value(d, TIMESTAMP_NAME, field, v);
	if (!parse_rfc3339(json_string_value(v), json_string_length(v), &secs, &nanos)) {
		describe(v, what, sizeof(what));
		return dec_fail(d, "invalid %s value %s", TIMESTAMP_NAME, what);
	}
	if (secs < TS_MIN_SECONDS || secs > TS_MAX_SECONDS) {
		describe(v, what, sizeof(what));
		return dec_fail(d, "%s value out of range: %s", TIMESTAMP_NAME, what);
	}
	m = msg_new(d, desc);
	if (!m)
		return dec_fail(d, "out of memory");
	*(int64_t *)((char *)m + sf->offset) = secs;
	*(int32_t *)((char *)m + nf->offset) = nanos;
	*out = m;
	return 0;
}

/*
 * Decode one value of field `f` from v into the storage at dst (a single
 * element). `field` names the field in messages. Returns 0 when stored,
 * 1 when the value is ignored (unknown enum name), -1 on error. On error
 * nothing has been stored.
 */
static int dec_value(struct dec *d, const ProtobufCFieldDescriptor *f, const char *field,
		     const json_t *v, void *dst, int depth)
{
	struct intval iv;
	int64_t sv;
	uint64_t uv;
	double dv;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (!json_intval(v, &iv) || !intval_signed(&iv, INT32_MAX, &sv))
			return dec_bad_value(d, type_name(f->type), field, v);
		*(int32_t *)dst = (int32_t)sv;
		return 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (!json_intval(v, &iv) || !intval_signed(&iv, INT64_MAX, &sv))
			return dec_bad_value(d, type_name(f->type), field, v);
		*(int64_t *)dst = sv;
		return 0;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (!json_intval(v, &iv) || !intval_unsigned(&iv, UINT32_MAX, &uv))
			return dec_bad_value(d, type_name(f->type), field, v);
		*(uint32_t *)dst = (uint32_t)uv;
		return 0;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (!json_intval(v, &iv) || !intval_unsigned(&iv, UINT64_MAX, &uv))
			return dec_bad_value(d, type_name(f->type), field, v);
		*(uint64_t *)dst = uv;
		return 0;
	case PROTOBUF_C_TYPE_FLOAT:
		if (!json_double(v, &dv) || (isfinite(dv) && fabs(dv) > FLT_MAX))
			return dec_bad_value(d, "float", field, v);
		*(float *)dst = (float)dv;
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		if (!json_double(v, &dv))
			return dec_bad_value(d, "double", field, v);
		*(double *)dst = dv;
		return 0;
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(v))
			return dec_bad_value(d, "bool", field, v);
		*(protobuf_c_boolean *)dst = json_is_true(v);
		return 0;
	case PROTOBUF_C_TYPE_ENUM:
		if (json_is_string(v)) {
			const ProtobufCEnumValue *ev = f->descriptor
				? protobuf_c_enum_descriptor_get_value_by_name(f->descriptor,
									       json_string_value(v))
				: NULL;

			/* Unknown names are skipped like unknown fields. */
			if (!ev)
				return 1;
			*(int32_t *)dst = ev->value;
			return 0;
		}
		if (!json_is_number(v) || !json_intval(v, &iv) || !intval_signed(&iv, INT32_MAX, &sv))
			return dec_bad_value(d, "enum", field, v);
		*(int32_t *)dst = (int32_t)sv;
		return 0;
	case PROTOBUF_C_TYPE_STRING: {
		size_t n;
		char *s;

		if (!json_is_string(v))
			return dec_bad_value(d, "string", field, v);
		n = json_string_length(v);
		s = dec_alloc(d, n + 1);
		if (!s)
			return dec_fail(d, "out of memory");
		memcpy(s, json_string_value(v), n + 1);
		*(char **)dst = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *bd = dst;
		size_t n;
		unsigned char *buf = NULL;
		ssize_t got;

		if (!json_is_string(v))
			return dec_bad_value(d, "bytes", field, v);
		n = json_string_length(v);
		if (n > 0) {
			buf = dec_alloc(d, base64_decoded_maxlen(n));
			if (!buf)
				return dec_fail(d, "out of memory");
		}
		got = base64_decode(buf, json_string_value(v), n);
		if (got < 0) {
			dec_free(d, buf);
			return dec_bad_value(d, "bytes", field, v);
		}
		if (got == 0) {
			dec_free(d, buf);
			buf = NULL;
		}
		bd->data = buf;
		bd->len = (size_t)got;
		return 0;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage *sub;

		if (!f->descriptor)
			return dec_fail(d, "field %s has no message descriptor", field);
		if (is_timestamp(f->descriptor)) {
			if (dec_timestamp(d, f->descriptor, v, field, &sub) < 0)
				return -1;
		} else {
			sub = dec_message(d, f->descriptor, v, field, depth + 1);
			if (!sub)
				return -1;
		}
		*(ProtobufCMessage **)dst = sub;
		return 0;
	}
	default:
		return dec_fail(d, "field %s has an unsupported type", field);
	}
}

/* The JSON name of a field, for error messages. */
static const char *json_name(const ProtobufCFieldDescriptor *f, char *buf, size_t len)
{
	size_t o = 0;
	bool up = false;

	for (const char *p = f->name; *p && o + 1 < len; p++) {
		if (*p == '_') {
			up = true;
			continue;
		}
		buf[o++] = up ? ascii_upper(*p) : *p;
		up = false;
	}
	buf[o] = '\0';
	return buf;
}

static int dec_list(struct dec *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		    const char *field, const json_t *v, int depth)
{
	char *base = (char *)m;
	size_t *qn = (size_t *)(base + f->quantifier_offset);
	char **arrp = (char **)(base + f->offset);
	size_t n, es = pbjson_value_size(f->type);
	char kind[64];

	snprintf(kind, sizeof(kind), "repeated %s", type_name(f->type));
	if (!json_is_array(v))
		return dec_bad_value(d, kind, field, v);
	n = json_array_size(v);
	if (n == 0)
		return 0;
	if (n > SIZE_MAX / es || !(*arrp = dec_alloc(d, n * es)))
		return dec_fail(d, "out of memory");
	memset(*arrp, 0, n * es);
	/* *qn counts the fully decoded elements, so a failure part-way leaves
	   a message that protobuf_c_message_free_unpacked() frees cleanly. */
	*qn = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *el = json_array_get(v, i);
		int r;

		if (json_is_null(el))
			return dec_bad_value(d, kind, field, el);
		r = dec_value(d, f, field, el, *arrp + *qn * es, depth);
		if (r < 0)
			return -1;
		if (r == 0)
			(*qn)++;
	}
	if (*qn == 0) {
		dec_free(d, *arrp);
		*arrp = NULL;
	}
	return 0;
}

static int dec_map_key(struct dec *d, const ProtobufCFieldDescriptor *kf, const char *field,
		       const char *key, void *dst)
{
	struct intval iv;
	int64_t sv;
	uint64_t uv;
	json_t *tmp;

	switch (kf->type) {
	case PROTOBUF_C_TYPE_STRING: {
		size_t n = strlen(key);
		char *s = dec_alloc(d, n + 1);

		if (!s)
			return dec_fail(d, "out of memory");
		memcpy(s, key, n + 1);
		*(char **)dst = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BOOL:
		if (strcmp(key, "true") == 0 || strcmp(key, "false") == 0) {
			*(protobuf_c_boolean *)dst = key[0] == 't';
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (parse_int_text(key, strlen(key), &iv) && intval_signed(&iv, INT32_MAX, &sv)) {
			*(int32_t *)dst = (int32_t)sv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (parse_int_text(key, strlen(key), &iv) && intval_signed(&iv, INT64_MAX, &sv)) {
			*(int64_t *)dst = sv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (parse_int_text(key, strlen(key), &iv) && intval_unsigned(&iv, UINT32_MAX, &uv)) {
			*(uint32_t *)dst = (uint32_t)uv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (parse_int_text(key, strlen(key), &iv) && intval_unsigned(&iv, UINT64_MAX, &uv)) {
			*(uint64_t *)dst = uv;
			return 0;
		}
		break;
	default:
		break;
	}
	tmp = json_string(key);
	if (!tmp)
		return dec_fail(d, "invalid map key for field %s", field);
	dec_bad_value(d, "map key", field, tmp);
	json_decref(tmp);
	return -1;
}

static int dec_map(struct dec *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		   const char *field, const json_t *v, int depth)
{
	const ProtobufCMessageDescriptor *ed = f->descriptor;
	const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
	char *base = (char *)m;
	size_t *qn = (size_t *)(base + f->quantifier_offset);
	ProtobufCMessage ***arrp = (ProtobufCMessage ***)(base + f->offset);
	const char *key;
	json_t *val;
	size_t n;

	if (!json_is_object(v))
		return dec_bad_value(d, "map", field, v);
	n = json_object_size(v);
	if (n == 0)
		return 0;
	if (n > SIZE_MAX / sizeof(**arrp) || !(*arrp = dec_alloc(d, n * sizeof(**arrp))))
		return dec_fail(d, "out of memory");
	memset(*arrp, 0, n * sizeof(**arrp));
	*qn = 0;
	json_object_foreach((json_t *)v, key, val) {
		ProtobufCMessage *e;
		int r;

		if (*qn >= n)
			break;
		if (json_is_null(val))
			return dec_bad_value(d, "map", field, val);
		e = msg_new(d, ed);
		if (!e)
			return dec_fail(d, "out of memory");
		if (dec_map_key(d, kf, field, key, (char *)e + kf->offset) < 0) {
			protobuf_c_message_free_unpacked(e, d->alloc);
			return -1;
		}
		r = dec_value(d, vf, field, val, (char *)e + vf->offset, depth);
		if (r != 0) {
			protobuf_c_message_free_unpacked(e, d->alloc);
			if (r < 0)
				return -1;
			continue; /* unknown enum name: entry dropped */
		}
		(*arrp)[(*qn)++] = e;
	}
	if (*qn == 0) {
		dec_free(d, *arrp);
		*arrp = NULL;
	}
	return 0;
}

static int dec_field(struct dec *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		     const json_t *v, int depth)
{
	char *base = (char *)m;
	char field[128];
	int r;

	json_name(f, field, sizeof(field));
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		if (field_is_map(f))
			return dec_map(d, m, f, field, v, depth);
		return dec_list(d, m, f, field, v, depth);
	}
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t *qcase = (uint32_t *)(base + f->quantifier_offset);

		if (*qcase != 0) {
			const ProtobufCFieldDescriptor *other =
				protobuf_c_message_descriptor_get_field(m->descriptor, *qcase);
			char oname[128] = "?";

			if (other)
				json_name(other, oname, sizeof(oname));
			return dec_fail(d, "oneof fields %s and %s are both set", oname, field);
		}
		r = dec_value(d, f, field, v, base + f->offset, depth);
		if (r == 0)
			*qcase = f->id;
		return r < 0 ? -1 : 0;
	}
	r = dec_value(d, f, field, v, base + f->offset, depth);
	if (r == 0 && f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
	    f->type != PROTOBUF_C_TYPE_MESSAGE)
		*(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
	return r < 0 ? -1 : 0;
}

/* Field index for a JSON key (JSON name or proto name), or -1. */
static int find_field(const ProtobufCMessageDescriptor *desc, const char *key)
{
	for (unsigned i = 0; i < desc->n_fields; i++)
		if (json_name_eq(desc->fields[i].name, key) || strcmp(desc->fields[i].name, key) == 0)
			return (int)i;
	return -1;
}

static ProtobufCMessage *dec_message(struct dec *d, const ProtobufCMessageDescriptor *desc,
				     const json_t *v, const char *field, int depth)
{
	ProtobufCMessage *m = NULL;
	unsigned char seen_small[64], *seen = seen_small;
	const char *key;
	json_t *val;

	if (depth > PBJSON_MAX_DEPTH) {
		dec_fail(d, "exceeds maximum nesting depth %d", PBJSON_MAX_DEPTH);
		return NULL;
	}
	if (!json_is_object(v)) {
		if (field)
			dec_bad_value(d, "message", field, v);
		else
			dec_bad_value(d, "message", desc->name, v);
		return NULL;
	}
	m = msg_new(d, desc);
	if (!m)
		goto oom;
	if (desc->n_fields > sizeof(seen_small)) {
		seen = calloc(desc->n_fields, 1);
		if (!seen)
			goto oom;
	} else {
		memset(seen, 0, desc->n_fields);
	}
	json_object_foreach((json_t *)v, key, val) {
		int i = find_field(desc, key);

		if (i < 0)
			continue; /* unknown fields are ignored */
		/* `watcherId` and `watcher_id` in one object name one field. */
		if (seen[i]) {
			dec_fail(d, "duplicate field %s", key);
			goto fail;
		}
		seen[i] = 1;
		if (json_is_null(val))
			continue;
		if (dec_field(d, m, &desc->fields[i], val, depth) < 0)
			goto fail;
	}
	if (seen != seen_small)
		free(seen);
	return m;
oom:
	dec_fail(d, "out of memory");
fail:
	if (seen != seen_small)
		free(seen);
	if (m)
		protobuf_c_message_free_unpacked(m, d->alloc);
	return NULL;
}

/*
 * jansson recurses once per nesting level; bound the depth before handing
 * it the text so a document of a million `[` cannot exhaust the stack.
 */
static bool json_too_deep(const char *s, size_t n, int max)
{
	int depth = 0;
	bool in_str = false;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '{' || c == '[') {
			if (++depth > max)
				return true;
		} else if (c == '}' || c == ']')
			depth--;
	}
	return false;
}

/* ---------------------------------------------------------------------- */
/* jansson's memory during a decode                                        */

/*
 * jansson builds a tree per document: the object, its hash table, a pair
 * per key, a string per value, each from malloc and each freed again by
 * json_decref(): for a small request that was half of the decode. While
 * pbjson_decode() parses, this thread's jansson allocations come from an
 * arena instead (bump allocation from a thread-local block, then from
 * chained blocks), nothing is freed one by one, and the tree is dropped
 * whole at the end. Blocks of JA_BIG bytes or more (a long string's
 * buffer as the lexer doubles it) are malloc'd on their own and given back
 * when jansson frees them, so a 16 MiB string costs what it did.
 *
 * jansson's hooks are process-wide (json_set_alloc_funcs), so they look at
 * a thread-local pointer: other threads, and this one outside a decode,
 * get malloc and free as before.
 */
#define JA_FIRST 8192
#define JA_BLOCK 32768
#define JA_BIG 8192

struct ja_blk {
	struct ja_blk *next;
	_Alignas(16) char data[];
};

struct jarena {
	char *cur, *end;
	struct ja_blk *blocks; /* malloc'd blocks bumped into */
	struct ja_blk *big;    /* malloc'd one per big allocation */
};

static __thread struct jarena *ja_cur;
static __thread _Alignas(16) char ja_first[JA_FIRST];
static pthread_once_t ja_once = PTHREAD_ONCE_INIT;

static void *ja_slow(struct jarena *a, size_t n)
{
	struct ja_blk *blk;

	if (n >= JA_BIG) {
		blk = malloc(sizeof(*blk) + n);
		if (!blk)
			return NULL;
		blk->next = a->big;
		a->big = blk;
		return blk->data;
	}
	blk = malloc(sizeof(*blk) + JA_BLOCK);
	if (!blk)
		return NULL;
	blk->next = a->blocks;
	a->blocks = blk;
	a->cur = blk->data + n;
	a->end = blk->data + JA_BLOCK;
	return blk->data;
}

static void *ja_malloc(size_t n)
{
	struct jarena *a = ja_cur;
	char *p;

	if (!a)
		return malloc(n);
	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + 15) & ~(size_t)15;
	if (n > (size_t)(a->end - a->cur))
		return ja_slow(a, n);
	p = a->cur;
	a->cur += n;
	return p;
}

static void ja_free(void *p)
{
	struct jarena *a = ja_cur;

	if (!a) {
		free(p);
		return;
	}
	if (!p)
		return;
	/* Only a big block goes back now; the rest goes with the arena. */
	for (struct ja_blk **bp = &a->big; *bp; bp = &(*bp)->next) {
		if ((*bp)->data == p) {
			struct ja_blk *blk = *bp;

			*bp = blk->next;
			free(blk);
			return;
		}
	}
}

static void ja_install(void)
{
	json_malloc_t m;
	json_free_t f;

	/* Hooks someone else set (a test's) are left alone. */
	json_get_alloc_funcs(&m, &f);
	if (m == malloc && f == free)
		json_set_alloc_funcs(ja_malloc, ja_free);
}

static void ja_begin(struct jarena *a)
{
	pthread_once(&ja_once, ja_install);
	a->cur = ja_first;
	a->end = ja_first + sizeof(ja_first);
	a->blocks = NULL;
	a->big = NULL;
	ja_cur = a;
}

/* Drop everything the arena gave out: the tree is not freed node by node. */
static void ja_end(struct jarena *a)
{
	ja_cur = NULL;
	for (struct ja_blk **l = &a->blocks; l; l = l == &a->blocks ? &a->big : NULL) {
		while (*l) {
			struct ja_blk *blk = *l;

			*l = blk->next;
			free(blk);
		}
	}
}

/* Are jansson's allocations ours? (A test may have pointed them elsewhere,
   and then the tree must be freed the usual way.) */
static bool ja_installed(void)
{
	json_malloc_t m;
	json_free_t f;

	json_get_alloc_funcs(&m, &f);
	return m == ja_malloc && f == ja_free;
}

static void *sys_alloc(void *ud, size_t n)
{
	return malloc(n);
}

static void sys_free(void *ud, void *p)
{
	free(p);
}

static ProtobufCAllocator system_alloc = { sys_alloc, sys_free, NULL };

ProtobufCMessage *pbjson_decode(const ProtobufCMessageDescriptor *desc, const char *json,
				size_t len, char *err, size_t errlen)
{
	return pbjson_decode_with(desc, json, len, NULL, err, errlen);
}

ProtobufCMessage *pbjson_decode_with(const ProtobufCMessageDescriptor *desc, const char *json,
				     size_t len, ProtobufCAllocator *alloc, char *err, size_t errlen)
{
	struct dec d = { err, errlen, alloc ? alloc : &system_alloc };
	ProtobufCMessage *m = NULL;
	struct jarena arena;
	json_error_t je;
	json_t *root;

	if (errlen > 0)
		err[0] = '\0';
	if (!desc) {
		dec_fail(&d, "no message descriptor");
		return NULL;
	}
	if (!json) {
		json = "";
		len = 0;
	}
	if (json_too_deep(json, len, PBJSON_MAX_DEPTH)) {
		dec_fail(&d, "exceeds maximum nesting depth %d", PBJSON_MAX_DEPTH);
		return NULL;
	}
	ja_begin(&arena);
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!root) {
		ja_end(&arena);
		dec_fail(&d, "syntax error at line %d column %d: %s", je.line, je.column, je.text);
		return NULL;
	}
	if (is_timestamp(desc)) {
		if (dec_timestamp(&d, desc, root, "(top level)", &m) < 0)
			m = NULL;
	} else if (!json_is_object(root)) {
		char what[80];

		describe(root, what, sizeof(what));
		dec_fail(&d, "expected a JSON object, got %s", what);
	} else {
		m = dec_message(&d, desc, root, NULL, 1);
	}
	if (!ja_installed())
		json_decref(root);
	ja_end(&arena);
	return m;
}
