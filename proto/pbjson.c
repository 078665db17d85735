/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbjson.c - canonical proto3 JSON over protobuf-c descriptors.
 *
 * Encoding writes JSON text directly into one growing buffer: process
 * output is encoded chunk by chunk as base64 `bytes`, and building a jansson
 * tree per chunk would cost an allocation per node plus a second copy of
 * the payload. Decoding takes the events of yajl's streaming parser and
 * stores each value into the message as it is read, with no tree in
 * between, allocating exactly what protobuf_c_message_free_unpacked()
 * expects to free (strings, bytes, arrays and sub-messages).
 */
#include "proto/pbjson.h"
#include "proto/pbtext.h"
#include "base/base64.h"
#include "base/buf.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <errno.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

/* ---------------------------------------------------------------------- */
/* Descriptor helpers shared by both directions                            */

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
		*w++ = up ? pbtext_upper(*proto) : *proto;
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

	if (!pbtext_ts_fields(m->descriptor, &sf, &nf)) {
		jb_fail(b);
		return;
	}
	secs = *(const int64_t *)((const char *)m + sf->offset);
	nanos = *(const int32_t *)((const char *)m + nf->offset);
	if (secs < PBTEXT_TS_MIN_SECONDS)
		secs = PBTEXT_TS_MIN_SECONDS, nanos = 0;
	if (secs > PBTEXT_TS_MAX_SECONDS)
		secs = PBTEXT_TS_MAX_SECONDS, nanos = 999999999;
	secs += nanos / 1000000000;
	nanos %= 1000000000;
	if (nanos < 0) {
		nanos += 1000000000;
		secs--;
	}
	if (secs < PBTEXT_TS_MIN_SECONDS)
		secs = PBTEXT_TS_MIN_SECONDS, nanos = 0;
	if (secs > PBTEXT_TS_MAX_SECONDS)
		secs = PBTEXT_TS_MAX_SECONDS, nanos = 999999999;
	days = secs / 86400;
	rem = secs % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	pbtext_civil_from_days(days, &y, &mo, &d);
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
	if (pbtext_is_timestamp(d)) {
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
			if (pbtext_field_is_map(f)) {
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

/*
 * The text is parsed by yajl, whose events drive a state machine over the
 * descriptors: each value is stored into the message as it is read, with
 * no tree in between. A frame per open object or array of the message
 * says where the next value goes; a value of an unknown field, however
 * deep, is one skip frame.
 *
 * yajl is lenient where protojson is strict, and the gaps are closed
 * here, at the token's end (the parser's offset when it calls back; the
 * whole text is handed over in one call, so offsets are into it): strings
 * are validated as UTF-8 by Go's rules (yajl's own check lets surrogates
 * and overlong forms through, so it is switched off), a string with
 * escapes is checked in its raw form for \u0000 and unpaired surrogates
 * (yajl turns a lone high surrogate into '?' and pairs a high one with
 * whatever \u follows), and the text between tokens for \v and \f, which
 * yajl skips as white space and JSON does not allow.
 */
enum fr_kind { FR_MESSAGE, FR_LIST, FR_MAP, FR_SKIP };

struct frame {
	enum fr_kind kind;
	unsigned skip;                          /* FR_SKIP: containers open in the skipped value */
	const ProtobufCMessageDescriptor *desc; /* FR_MESSAGE: its type */
	ProtobufCMessage *msg;                  /* FR_MESSAGE: being filled; FR_LIST, FR_MAP: the field's owner */
	/* FR_MESSAGE: the field the value after the last key belongs to
	   (NULL: an unknown key, its value is skipped); FR_LIST, FR_MAP: the
	   repeated field itself. */
	const ProtobufCFieldDescriptor *f;
	uint64_t seen;                          /* FR_MESSAGE: fields named so far, the first 64 */
	unsigned char *seen_more;               /* FR_MESSAGE with more than 64 fields: one byte each */
	size_t cap;                             /* FR_LIST, FR_MAP: slots in the field's array */
	ProtobufCMessage *entry;                /* FR_MAP: the entry whose key was read, its value not yet */
};

/*
 * yajl's own memory (its handle, lexer, state stack, the buffer escaped
 * strings are decoded into) for one decode: bump-allocated from a
 * thread-local block, then from chained blocks; allocations of YA_BIG or
 * more (a buffer as it doubles for a long string) are malloc'd on their
 * own so that realloc keeps one copy. Nothing is freed one by one but
 * those; the rest goes at the end of the decode. yajl checks no
 * allocation, so a failure does not return: it jumps back to the decoder
 * (yajl holds nothing but memory from here), which reports it.
 */
#define YA_FIRST 8192
#define YA_BLOCK 16384
/* Above yajl's first buffer (2 KiB, which its lexer takes at the end of
   every text even when it keeps nothing in it). */
#define YA_BIG 4096

struct ya_hdr {
	_Alignas(16) size_t size; /* usable bytes */
	struct ya_hdr *next, *prev; /* big allocations only */
	bool big;
};

struct ya_blk {
	struct ya_blk *next;
	_Alignas(16) char data[];
};

struct yarena {
	char *cur, *end;
	struct ya_blk *blocks;
	struct ya_hdr *big;
	jmp_buf *oom;
};

static __thread _Alignas(16) char ya_first[YA_FIRST];

struct dec {
	char *err;
	size_t errlen;
	ProtobufCAllocator *alloc; /* the message's memory */
	const ProtobufCMessageDescriptor *desc;
	ProtobufCMessage *root;
	const char *json;
	size_t len;
	yajl_handle h;
	size_t last;      /* where the text after the last token seen begins */
	bool finishing;   /* in yajl_complete_parse: its offsets are not into json */
	bool done;        /* the document's value is complete */
	bool failed;      /* err says why; nothing more is stored */
	bool stop;        /* a syntax error or the depth bound: the parse ends */
	int depth;        /* objects and arrays open */
	int nf;           /* frames in use */
	struct frame fr[PBJSON_MAX_DEPTH];
	struct yarena arena;
};

/* What a callback saw, for storing and for error messages. */
enum ev_kind { EV_NULL, EV_BOOL, EV_NUMBER, EV_STRING, EV_OBJECT, EV_ARRAY };

struct ev {
	enum ev_kind k;
	bool b;
	const char *s; /* EV_STRING (decoded), EV_NUMBER (the text) */
	size_t n;
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

	/* The first error is the one reported (but see dec_syntax()). */
	if (d->failed)
		return -1;
	d->failed = true;
	if (d->errlen == 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(d->err, d->errlen, fmt, ap);
	va_end(ap);
	/* The message ends up inside a JSON error body: a key or a number
	   is quoted as it came and truncation can split a character, so
	   make it valid UTF-8. */
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
 * A short, valid-UTF-8 rendering of a value for error messages: strings
 * as JSON text cut at 40 bytes, numbers as they were written (cut too),
 * containers as {...} and [...].
 */
static void describe(const struct ev *v, char *out, size_t outlen)
{
	char tmp[128];
	struct jbuf b = {.p = tmp, .cap = sizeof(tmp), .fixed = true};
	size_t n = v->n;

	switch (v->k) {
	case EV_OBJECT:
		snprintf(out, outlen, "{...}");
		return;
	case EV_ARRAY:
		snprintf(out, outlen, "[...]");
		return;
	case EV_STRING:
		if (n > 40) {
			n = 40;
			/* Cut at a character boundary. */
			while (n > 0 && ((unsigned char)v->s[n] & 0xc0) == 0x80)
				n--;
		}
		/* 40 bytes escaped are at most 240: room in tmp for any of them
		   but control characters, which are 6 each. */
		jb_put_string(&b, v->s, n);
		if (b.err) {
			snprintf(out, outlen, "string");
		} else {
			tmp[b.len] = '\0';
			/* A cut is the caller's to accept: the result is checked
			   only to say so to the compiler. */
			if (snprintf(out, outlen, "%s%s", tmp, n < v->n ? "..." : "") < 0)
				out[0] = '\0';
		}
		return;
	case EV_NUMBER:
		if (snprintf(out, outlen, "%.*s%s", (int)(n > 40 ? 40 : n), v->s, n > 40 ? "..." : "") < 0)
			out[0] = '\0';
		return;
	case EV_BOOL:
		snprintf(out, outlen, v->b ? "true" : "false");
		return;
	default:
		snprintf(out, outlen, "null");
	}
}

/* `invalid value for KIND field NAME: VALUE`. */
static int dec_bad_value(struct dec *d, const char *kind, const ProtobufCFieldDescriptor *f, const struct ev *v)
{
	char what[80], name[128];

	describe(v, what, sizeof(what));
	return dec_fail(d, "invalid value for %s field %s: %s", kind, pbtext_json_name(f, name, sizeof(name)), what);
}

static int dec_bad_repeated(struct dec *d, const ProtobufCFieldDescriptor *f, const struct ev *v)
{
	char kind[64];

	snprintf(kind, sizeof(kind), "repeated %s", pbtext_type_name(f->type));
	return dec_bad_value(d, kind, f, v);
}

/*
 * A syntax error, at byte `at` of the text; it ends the parse. It is
 * reported even after an invalid value: the decode goes on reading after
 * a value it cannot store (storing nothing more), so that malformed text
 * is called that wherever its first bad value is, as when the whole text
 * was parsed before the message was filled.
 */
static int dec_syntax(struct dec *d, size_t at, const char *what)
{
	size_t line = 1, col = 1;

	if (at > d->len)
		at = d->len;
	for (size_t i = 0; i < at; i++) {
		if (d->json[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	d->failed = false;
	dec_fail(d, "syntax error at line %zu column %zu: %s", line, col, what);
	d->stop = true;
	return -1;
}

static ProtobufCMessage *msg_new(struct dec *d, const ProtobufCMessageDescriptor *desc)
{
	ProtobufCMessage *m = dec_alloc(d, desc->sizeof_message);

	if (m)
		protobuf_c_message_init(desc, m);
	return m;
}

/* An integer value of a number or a string (protojson accepts both). */
static bool ev_intval(const struct ev *v, struct pbtext_int *iv)
{
	return (v->k == EV_NUMBER || v->k == EV_STRING) && pbtext_parse_int(v->s, v->n, iv);
}

static bool ev_double(const struct ev *v, double *out)
{
	char tmp[64], *copy = tmp;

	if (v->k == EV_STRING) {
		if (v->n == 3 && memcmp(v->s, "NaN", 3) == 0) {
			*out = NAN;
			return true;
		}
		if (v->n == 8 && memcmp(v->s, "Infinity", 8) == 0) {
			*out = INFINITY;
			return true;
		}
		if (v->n == 9 && memcmp(v->s, "-Infinity", 9) == 0) {
			*out = -INFINITY;
			return true;
		}
		if (!pbtext_is_number(v->s, v->n))
			return false;
	} else if (v->k != EV_NUMBER) {
		return false;
	}
	/* strtod wants a terminated string; a number of hundreds of digits
	   is valid JSON. */
	if (v->n >= sizeof(tmp) && !(copy = malloc(v->n + 1)))
		return false;
	memcpy(copy, v->s, v->n);
	copy[v->n] = '\0';
	*out = strtod(copy, NULL);
	if (copy != tmp)
		free(copy);
	/* Beyond the double range (1e400) is invalid, as in protojson. */
	return isfinite(*out);
}

static int dec_timestamp(struct dec *d, const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f,
			 const struct ev *v, ProtobufCMessage **out)
{
	const ProtobufCFieldDescriptor *sf, *nf;
	ProtobufCMessage *m;
	int64_t secs;
	int32_t nanos;
	char what[80], name[128];

	if (!pbtext_ts_fields(desc, &sf, &nf))
		return dec_fail(d, "unsupported %s descriptor", PBTEXT_TIMESTAMP_NAME);
	if (v->k != EV_STRING) {
		describe(v, what, sizeof(what));
		return dec_fail(d, "invalid value for %s field %s: %s", PBTEXT_TIMESTAMP_NAME,
				f ? pbtext_json_name(f, name, sizeof(name)) : "(top level)", what);
	}
	if (!pbtext_parse_rfc3339(v->s, v->n, &secs, &nanos)) {
		describe(v, what, sizeof(what));
		return dec_fail(d, "invalid %s value %s", PBTEXT_TIMESTAMP_NAME, what);
	}
	if (secs < PBTEXT_TS_MIN_SECONDS || secs > PBTEXT_TS_MAX_SECONDS) {
		describe(v, what, sizeof(what));
		return dec_fail(d, "%s value out of range: %s", PBTEXT_TIMESTAMP_NAME, what);
	}
	m = msg_new(d, desc);
	if (!m)
		return dec_fail(d, "out of memory");
	*(int64_t *)((char *)m + sf->offset) = secs;
	*(int32_t *)((char *)m + nf->offset) = nanos;
	*out = m;
	return 0;
}

static int push(struct dec *d, enum fr_kind kind, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
	struct frame *t;

	/* A frame per open object or array, which PBJSON_MAX_DEPTH bounds. */
	if (d->nf >= PBJSON_MAX_DEPTH)
		return dec_fail(d, "exceeds maximum nesting depth %d", PBJSON_MAX_DEPTH);
	t = &d->fr[d->nf++];
	t->kind = kind;
	t->skip = 1;
	t->msg = msg;
	t->desc = kind == FR_MESSAGE ? msg->descriptor : NULL;
	t->f = f;
	t->seen = 0;
	t->seen_more = NULL;
	t->cap = 0;
	t->entry = NULL;
	if (kind == FR_MESSAGE && t->desc->n_fields > 64 && !(t->seen_more = calloc(t->desc->n_fields, 1)))
		return dec_fail(d, "out of memory");
	return 0;
}

/* A new message stored at dst, whose fields come next. */
static int open_message(struct dec *d, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **dst)
{
	ProtobufCMessage *m = msg_new(d, desc);

	if (!m)
		return dec_fail(d, "out of memory");
	*dst = m;
	return push(d, FR_MESSAGE, m, NULL);
}

/*
 * Store one value of field f (a single element, not an array) at dst;
 * `namef` names the field in messages (a map's value is named by the map).
 * Returns 0 when stored (a message: opened, its fields come next), 1 when
 * the value is ignored (an unknown enum name), -1 on error; on error
 * nothing has been stored.
 */
static int store_value(struct dec *d, const ProtobufCFieldDescriptor *f, const ProtobufCFieldDescriptor *namef,
		       const struct ev *v, void *dst)
{
	struct pbtext_int iv;
	int64_t sv;
	uint64_t uv;
	double dv;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (!ev_intval(v, &iv) || !pbtext_int_signed(&iv, INT32_MAX, &sv))
			break;
		*(int32_t *)dst = (int32_t)sv;
		return 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (!ev_intval(v, &iv) || !pbtext_int_signed(&iv, INT64_MAX, &sv))
			break;
		*(int64_t *)dst = sv;
		return 0;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (!ev_intval(v, &iv) || !pbtext_int_unsigned(&iv, UINT32_MAX, &uv))
			break;
		*(uint32_t *)dst = (uint32_t)uv;
		return 0;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (!ev_intval(v, &iv) || !pbtext_int_unsigned(&iv, UINT64_MAX, &uv))
			break;
		*(uint64_t *)dst = uv;
		return 0;
	case PROTOBUF_C_TYPE_FLOAT:
		if (!ev_double(v, &dv) || (isfinite(dv) && fabs(dv) > FLT_MAX))
			break;
		*(float *)dst = (float)dv;
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		if (!ev_double(v, &dv))
			break;
		*(double *)dst = dv;
		return 0;
	case PROTOBUF_C_TYPE_BOOL:
		if (v->k != EV_BOOL)
			break;
		*(protobuf_c_boolean *)dst = v->b;
		return 0;
	case PROTOBUF_C_TYPE_ENUM:
		if (v->k == EV_STRING) {
			const ProtobufCEnumValue *ev = NULL;
			char name[128];

			/* Unknown names (one too long to be a name among them) are
			   skipped like unknown fields. */
			if (f->descriptor && v->n < sizeof(name)) {
				memcpy(name, v->s, v->n);
				name[v->n] = '\0';
				ev = protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, name);
			}
			if (!ev)
				return 1;
			*(int32_t *)dst = ev->value;
			return 0;
		}
		if (v->k != EV_NUMBER || !ev_intval(v, &iv) || !pbtext_int_signed(&iv, INT32_MAX, &sv))
			break;
		*(int32_t *)dst = (int32_t)sv;
		return 0;
	case PROTOBUF_C_TYPE_STRING: {
		char *s;

		if (v->k != EV_STRING)
			break;
		s = dec_alloc(d, v->n + 1);
		if (!s)
			return dec_fail(d, "out of memory");
		memcpy(s, v->s, v->n);
		s[v->n] = '\0';
		*(char **)dst = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *bd = dst;
		unsigned char *buf = NULL;
		ssize_t got;

		if (v->k != EV_STRING)
			break;
		if (v->n > 0) {
			buf = dec_alloc(d, base64_decoded_maxlen(v->n));
			if (!buf)
				return dec_fail(d, "out of memory");
		}
		got = base64_decode(buf, v->s, v->n);
		if (got <= 0) {
			dec_free(d, buf);
			buf = NULL;
			if (got < 0)
				break;
		}
		bd->data = buf;
		bd->len = (size_t)got;
		return 0;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		if (!f->descriptor) {
			char name[128];

			return dec_fail(d, "field %s has no message descriptor", pbtext_json_name(namef, name, sizeof(name)));
		}
		if (pbtext_is_timestamp(f->descriptor))
			return dec_timestamp(d, f->descriptor, namef, v, (ProtobufCMessage **)dst);
		if (v->k != EV_OBJECT)
			return dec_bad_value(d, "message", namef, v);
		return open_message(d, f->descriptor, (ProtobufCMessage **)dst);
	default: {
		char name[128];

		return dec_fail(d, "field %s has an unsupported type", pbtext_json_name(namef, name, sizeof(name)));
	}
	}
	return dec_bad_value(d, pbtext_type_name(f->type), namef, v);
}

/* Room for one more element in the array of the repeated field of frame t
   (arrays double; the message is never left without its elements). */
static void *list_slot(struct dec *d, struct frame *t, size_t es)
{
	char *base = (char *)t->msg;
	size_t n = *(size_t *)(base + t->f->quantifier_offset);
	char **arrp = (char **)(base + t->f->offset);

	if (n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4;
		char *arr;

		if (cap > SIZE_MAX / 2 / es || !(arr = dec_alloc(d, cap * es))) {
			dec_fail(d, "out of memory");
			return NULL;
		}
		if (n)
			memcpy(arr, *arrp, n * es);
		memset(arr + n * es, 0, (cap - n) * es);
		dec_free(d, *arrp);
		*arrp = arr;
		t->cap = cap;
	}
	return *arrp + n * es;
}

/* The repeated field of frame t ends: no elements, no array. */
static void list_end(struct dec *d, struct frame *t)
{
	char *base = (char *)t->msg;
	void **arrp = (void **)(base + t->f->offset);

	if (*(size_t *)(base + t->f->quantifier_offset) == 0) {
		dec_free(d, *arrp);
		*arrp = NULL;
	}
}

static bool field_seen(struct frame *t, unsigned i)
{
	bool was;

	if (t->seen_more) {
		was = t->seen_more[i];
		t->seen_more[i] = 1;
		return was;
	}
	was = (t->seen >> i) & 1;
	t->seen |= (uint64_t)1 << i;
	return was;
}

/* Does key[0..n) equal protoc's JSON name (lowerCamelCase) of `proto`? */
static bool json_name_eq(const char *proto, const char *key, size_t n)
{
	return pbtext_camel_prefix(proto, key, n, false) == (long)n;
}

/* Field index for a JSON key (JSON name or proto name), or -1. */
static int find_field(const ProtobufCMessageDescriptor *desc, const char *key, size_t n)
{
	if (n == 0)
		return -1;
	for (unsigned i = 0; i < desc->n_fields; i++) {
		const char *name = desc->fields[i].name;

		/* Both names begin as the proto name does (but after a '_'). */
		if (name[0] != key[0] && name[0] != '_')
			continue;
		if (json_name_eq(name, key, n) ||
		    (strncmp(name, key, n) == 0 && name[n] == '\0'))
			return (int)i;
	}
	return -1;
}

/* A key of the object of frame t (a message). */
static int message_key(struct dec *d, struct frame *t, const char *key, size_t n)
{
	int i = find_field(t->desc, key, n);

	t->f = NULL;
	if (i < 0)
		return 0; /* unknown fields are ignored */
	/* `watcherId` and `watcher_id` in one object name one field. */
	if (field_seen(t, (unsigned)i))
		return dec_fail(d, "duplicate field %.*s", (int)(n > 64 ? 64 : n), key);
	t->f = &t->desc->fields[i];
	return 0;
}

/* The value of field t->f of the message of frame t. */
static int message_value(struct dec *d, struct frame *t, const struct ev *v)
{
	const ProtobufCFieldDescriptor *f = t->f;
	char *base = (char *)t->msg;
	int r;

	if (!f) {
		if (v->k == EV_OBJECT || v->k == EV_ARRAY)
			return push(d, FR_SKIP, NULL, NULL);
		return 0;
	}
	if (v->k == EV_NULL)
		return 0; /* null means unset */
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		if (pbtext_field_is_map(f)) {
			if (v->k != EV_OBJECT)
				return dec_bad_value(d, "map", f, v);
			return push(d, FR_MAP, t->msg, f);
		}
		if (v->k != EV_ARRAY)
			return dec_bad_repeated(d, f, v);
		return push(d, FR_LIST, t->msg, f);
	}
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t *qcase = (uint32_t *)(base + f->quantifier_offset);

		if (*qcase != 0) {
			const ProtobufCFieldDescriptor *other =
				protobuf_c_message_descriptor_get_field(t->desc, *qcase);
			char oname[128] = "?", name[128];

			if (other)
				pbtext_json_name(other, oname, sizeof(oname));
			return dec_fail(d, "oneof fields %s and %s are both set", oname,
					pbtext_json_name(f, name, sizeof(name)));
		}
		/* Set before a message member's fields are read, so that a
		   failure inside it frees it with the rest. */
		r = store_value(d, f, f, v, base + f->offset);
		if (r == 0)
			*qcase = f->id;
		return r < 0 ? -1 : 0;
	}
	r = store_value(d, f, f, v, base + f->offset);
	if (r == 0 && f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
	    f->type != PROTOBUF_C_TYPE_MESSAGE)
		*(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
	return r < 0 ? -1 : 0;
}

/* An element of the repeated field of frame t. */
static int list_value(struct dec *d, struct frame *t, const struct ev *v)
{
	const ProtobufCFieldDescriptor *f = t->f;
	size_t *qn = (size_t *)((char *)t->msg + f->quantifier_offset);
	void *slot;
	int r;

	if (v->k == EV_NULL)
		return dec_bad_repeated(d, f, v);
	if (!(slot = list_slot(d, t, pbjson_value_size(f->type))))
		return -1;
	r = store_value(d, f, f, v, slot);
	/* *qn counts the elements stored, so a failure part-way leaves a
	   message that protobuf_c_message_free_unpacked() frees cleanly (a
	   message element is counted as soon as it is opened). */
	if (r == 0)
		(*qn)++;
	return r < 0 ? -1 : 0;
}

/* A key of the map of frame t: a new entry, its key set. */
static int map_key(struct dec *d, struct frame *t, const char *key, size_t n)
{
	const ProtobufCMessageDescriptor *ed = t->f->descriptor;
	const ProtobufCFieldDescriptor *kf = &ed->fields[0];
	ProtobufCMessage *e = msg_new(d, ed);
	void *dst;
	struct pbtext_int iv;
	int64_t sv;
	uint64_t uv;

	if (!e)
		return dec_fail(d, "out of memory");
	t->entry = e;
	dst = (char *)e + kf->offset;
	switch (kf->type) {
	case PROTOBUF_C_TYPE_STRING: {
		char *s = dec_alloc(d, n + 1);

		if (!s)
			return dec_fail(d, "out of memory");
		memcpy(s, key, n);
		s[n] = '\0';
		*(char **)dst = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BOOL:
		if ((n == 4 && memcmp(key, "true", 4) == 0) || (n == 5 && memcmp(key, "false", 5) == 0)) {
			*(protobuf_c_boolean *)dst = key[0] == 't';
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (pbtext_parse_int(key, n, &iv) && pbtext_int_signed(&iv, INT32_MAX, &sv)) {
			*(int32_t *)dst = (int32_t)sv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (pbtext_parse_int(key, n, &iv) && pbtext_int_signed(&iv, INT64_MAX, &sv)) {
			*(int64_t *)dst = sv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (pbtext_parse_int(key, n, &iv) && pbtext_int_unsigned(&iv, UINT32_MAX, &uv)) {
			*(uint32_t *)dst = (uint32_t)uv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (pbtext_parse_int(key, n, &iv) && pbtext_int_unsigned(&iv, UINT64_MAX, &uv)) {
			*(uint64_t *)dst = uv;
			return 0;
		}
		break;
	default:
		break;
	}
	{
		struct ev kv = { .k = EV_STRING, .s = key, .n = n };

		return dec_bad_value(d, "map key", t->f, &kv);
	}
}

/* The value of the entry whose key frame t (a map) just read. */
static int map_value(struct dec *d, struct frame *t, const struct ev *v)
{
	const ProtobufCFieldDescriptor *vf = &((const ProtobufCMessageDescriptor *)t->f->descriptor)->fields[1];
	size_t *qn = (size_t *)((char *)t->msg + t->f->quantifier_offset);
	ProtobufCMessage *e = t->entry, **slot;
	int r;

	if (v->k == EV_NULL)
		return dec_bad_value(d, "map", t->f, v);
	if (!(slot = list_slot(d, t, sizeof(*slot))))
		return -1;
	/* The entry is the message's from here (a message value is filled
	   after this returns). */
	*slot = e;
	(*qn)++;
	t->entry = NULL;
	r = store_value(d, vf, t->f, v, (char *)e + vf->offset);
	if (r == 1) {
		/* An unknown enum name: the entry is dropped. */
		(*qn)--;
		*slot = NULL;
		protobuf_c_message_free_unpacked(e, d->alloc);
	}
	return r < 0 ? -1 : 0;
}

/* The map of frame t ends: its keys must differ (protojson refuses a
   duplicate map key as it does a duplicate field). */
static int map_end(struct dec *d, struct frame *t)
{
	const ProtobufCFieldDescriptor *kf = &((const ProtobufCMessageDescriptor *)t->f->descriptor)->fields[0];
	size_t n = *(size_t *)((char *)t->msg + t->f->quantifier_offset);
	const ProtobufCMessage **ents = *(const ProtobufCMessage ***)((char *)t->msg + t->f->offset);
	const ProtobufCMessage *dup = NULL;

	if (n <= 8) {
		for (size_t i = 1; i < n && !dup; i++)
			for (size_t j = 0; j < i; j++)
				if (map_key_cmp(kf, ents[i], ents[j]) == 0) {
					dup = ents[i];
					break;
				}
	} else {
		/* Sorted copies: n log n, not n^2, for a map of many keys. */
		const ProtobufCMessage **v = malloc(2 * n * sizeof(*v));

		if (!v)
			return dec_fail(d, "out of memory");
		memcpy(v, ents, n * sizeof(*v));
		map_sort(kf, v, v + n, n);
		for (size_t i = 1; i < n; i++)
			if (map_key_cmp(kf, v[i - 1], v[i]) == 0) {
				dup = v[i];
				break;
			}
		free(v);
	}
	if (dup) {
		char what[80], name[128];

		if (kf->type == PROTOBUF_C_TYPE_STRING) {
			const char *k = *(char *const *)((const char *)dup + kf->offset);
			struct ev kv = { .k = EV_STRING, .s = k, .n = strlen(k) };

			describe(&kv, what, sizeof(what));
		} else {
			snprintf(what, sizeof(what), "(a %s)", pbtext_type_name(kf->type));
		}
		return dec_fail(d, "duplicate key in map field %s: %s", pbtext_json_name(t->f, name, sizeof(name)), what);
	}
	list_end(d, t);
	return 0;
}

/* A value wherever the frames say it goes. */
static int on_value(struct dec *d, const struct ev *v)
{
	struct frame *t;

	if (d->nf == 0) {
		char what[80];

		if (d->root || d->done)
			return dec_fail(d, "internal error: a second document value");
		if (pbtext_is_timestamp(d->desc)) {
			if (dec_timestamp(d, d->desc, NULL, v, &d->root) < 0)
				return -1;
			d->done = true;
			return 0;
		}
		if (v->k != EV_OBJECT) {
			describe(v, what, sizeof(what));
			return dec_fail(d, "expected a JSON object, got %s", what);
		}
		return open_message(d, d->desc, &d->root);
	}
	t = &d->fr[d->nf - 1];
	switch (t->kind) {
	case FR_MESSAGE:
		return message_value(d, t, v);
	case FR_LIST:
		return list_value(d, t, v);
	case FR_MAP:
		return map_value(d, t, v);
	default: /* FR_SKIP */
		if (v->k == EV_OBJECT || v->k == EV_ARRAY)
			t->skip++;
		return 0;
	}
}

static void pop(struct dec *d)
{
	struct frame *t = &d->fr[--d->nf];

	free(t->seen_more);
	t->seen_more = NULL;
}

/* An object or array ends. */
static int on_end(struct dec *d)
{
	struct frame *t = &d->fr[d->nf - 1];

	switch (t->kind) {
	case FR_SKIP:
		if (--t->skip == 0)
			pop(d);
		return 0;
	case FR_LIST:
		list_end(d, t);
		break;
	case FR_MAP:
		if (map_end(d, t) < 0)
			return -1;
		break;
	default:
		break;
	}
	pop(d);
	if (d->nf == 0)
		d->done = true;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* yajl's callbacks                                                        */

/* Where the text stands after the token being reported. */
static size_t dec_here(struct dec *d)
{
	return d->finishing ? d->len : yajl_get_bytes_consumed(d->h);
}

/* Between tokens JSON allows space, tab, CR and LF; yajl also skips \v
   and \f. (Inside a string every control character is yajl's error.) */
static int check_gap(struct dec *d, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (d->json[i] == '\v' || d->json[i] == '\f')
			return dec_syntax(d, i, "invalid character between tokens");
	return 0;
}

/* Offset of the first byte of s[0..n) that is not valid UTF-8 (Go's
   rules), or n. */
static size_t utf8_check(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint64_t w;

		while (i + 8 <= n) {
			memcpy(&w, s + i, 8);
			if (w & 0x8080808080808080ull)
				break;
			i += 8;
		}
		while (i < n && s[i] < 0x80)
			i++;
		if (i < n) {
			size_t k = utf8_seq_len(s + i, n - i);

			if (k == 0)
				return i;
			i += k;
		}
	}
	return n;
}

static int hex4(const char *p)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

/*
 * The raw text of a string with escapes, [p, end): its bytes valid UTF-8
 * and every \u a character other than NUL, surrogates only in pairs.
 * (The lexer has checked that each escape is one JSON allows.)
 */
static int check_escaped(struct dec *d, const char *p, const char *end)
{
	while (p < end) {
		const char *bs = memchr(p, '\\', (size_t)(end - p));
		size_t run = (bs ? bs : end) - p, bad = utf8_check((const unsigned char *)p, run);
		int cp;

		if (bad < run)
			return dec_syntax(d, (size_t)(p + bad - d->json), "invalid UTF-8 in a string");
		if (!bs)
			break;
		if (bs[1] != 'u') {
			p = bs + 2;
			continue;
		}
		cp = hex4(bs + 2);
		if (cp == 0)
			return dec_syntax(d, (size_t)(bs - d->json), "\\u0000 in a string (NUL is not allowed)");
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return dec_syntax(d, (size_t)(bs - d->json), "unpaired UTF-16 surrogate in a string");
		if (cp >= 0xd800 && cp <= 0xdbff) {
			int lo;

			if (end - bs < 12 || bs[6] != '\\' || bs[7] != 'u' || (lo = hex4(bs + 8)) < 0xdc00 ||
			    lo > 0xdfff)
				return dec_syntax(d, (size_t)(bs - d->json), "unpaired UTF-16 surrogate in a string");
			p = bs + 12;
			continue;
		}
		p = bs + 6;
	}
	return 0;
}

/* A string or key token (its text decoded in s, n): checked where yajl
   does not, and the text after the token before it. */
static int check_string(struct dec *d, const unsigned char *s, size_t n)
{
	size_t end = dec_here(d), bad;
	const char *q;

	if (d->finishing)
		return 0; /* (never: a string is whole before the text ends) */
	if ((const char *)s >= d->json && (const char *)s <= d->json + d->len) {
		/* No escapes: yajl hands over the text itself. */
		if (check_gap(d, d->last, (size_t)((const char *)s - 1 - d->json)) < 0)
			return -1;
		d->last = end;
		bad = utf8_check(s, n);
		if (bad < n)
			return dec_syntax(d, (size_t)((const char *)s + bad - d->json), "invalid UTF-8 in a string");
		return 0;
	}
	/* Decoded into yajl's buffer: look at the raw token, which begins at
	   the first quote after the previous token (nothing between two
	   tokens is a quote) and ends at the parser's offset. */
	q = memchr(d->json + d->last, '"', end - d->last);
	if (!q || end < 2 || (size_t)(q - d->json) > end - 2)
		return dec_syntax(d, d->last, "internal error: string token not found");
	if (check_gap(d, d->last, (size_t)(q - d->json)) < 0)
		return -1;
	d->last = end;
	return check_escaped(d, q + 1, d->json + end - 1);
}

/* A value that is not a string: the text before it is checked (yajl is
 * lenient there), then it is stored. */
static int y_scalar(struct dec *d, const struct ev *v)
{
	size_t end = dec_here(d);

	if (check_gap(d, d->last, end) < 0)
		return 0;
	d->last = end;
	if (!d->failed)
		on_value(d, v);
	return !d->stop;
}

static int y_null(void *ctx)
{
	return y_scalar(ctx, &(struct ev){ .k = EV_NULL });
}

static int y_boolean(void *ctx, int b)
{
	return y_scalar(ctx, &(struct ev){ .k = EV_BOOL, .b = b != 0 });
}

static int y_number(void *ctx, const char *s, size_t n)
{
	return y_scalar(ctx, &(struct ev){ .k = EV_NUMBER, .s = s, .n = n });
}

static int y_string(void *ctx, const unsigned char *s, size_t n)
{
	struct dec *d = ctx;
	struct ev v = { .k = EV_STRING, .s = (const char *)s, .n = n };

	if (check_string(d, s, n) < 0)
		return 0;
	if (!d->failed)
		on_value(d, &v);
	return !d->stop;
}

static int y_start(struct dec *d, enum ev_kind k)
{
	struct ev v = { .k = k };
	size_t end = dec_here(d);

	if (check_gap(d, d->last, end) < 0)
		return 0;
	d->last = end;
	/* Also after an invalid value: it bounds yajl's stack of states. */
	if (++d->depth > PBJSON_MAX_DEPTH) {
		d->failed = false;
		dec_fail(d, "exceeds maximum nesting depth %d", PBJSON_MAX_DEPTH);
		d->stop = true;
		return 0;
	}
	if (!d->failed)
		on_value(d, &v);
	return !d->stop;
}

static int y_start_map(void *ctx)
{
	return y_start(ctx, EV_OBJECT);
}

static int y_start_array(void *ctx)
{
	return y_start(ctx, EV_ARRAY);
}

static int y_map_key(void *ctx, const unsigned char *s, size_t n)
{
	struct dec *d = ctx;
	struct frame *t;

	if (check_string(d, s, n) < 0 || d->failed)
		return !d->stop;
	t = &d->fr[d->nf - 1];
	if (t->kind == FR_MESSAGE)
		message_key(d, t, (const char *)s, n);
	else if (t->kind == FR_MAP)
		map_key(d, t, (const char *)s, n);
	return !d->stop;
}

static int y_end(void *ctx)
{
	struct dec *d = ctx;
	size_t end = dec_here(d);

	if (check_gap(d, d->last, end) < 0)
		return 0;
	d->last = end;
	d->depth--;
	if (!d->failed)
		on_end(d);
	return !d->stop;
}

static const yajl_callbacks dec_callbacks = {
	.yajl_null = y_null,
	.yajl_boolean = y_boolean,
	.yajl_number = y_number,
	.yajl_string = y_string,
	.yajl_start_map = y_start_map,
	.yajl_map_key = y_map_key,
	.yajl_end_map = y_end,
	.yajl_start_array = y_start_array,
	.yajl_end_array = y_end,
};

/* ---------------------------------------------------------------------- */
/* yajl's memory                                                           */

static void *ya_alloc(struct yarena *a, size_t n)
{
	struct ya_hdr *h;

	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + 15) & ~(size_t)15;
	if (n >= YA_BIG) {
		h = malloc(sizeof(*h) + n);
		if (!h)
			return NULL;
		h->big = true;
		h->prev = NULL;
		h->next = a->big;
		if (a->big)
			a->big->prev = h;
		a->big = h;
	} else {
		if (sizeof(*h) + n > (size_t)(a->end - a->cur)) {
			struct ya_blk *blk = malloc(sizeof(*blk) + YA_BLOCK);

			if (!blk)
				return NULL;
			blk->next = a->blocks;
			a->blocks = blk;
			a->cur = blk->data;
			a->end = blk->data + YA_BLOCK;
		}
		h = (struct ya_hdr *)a->cur;
		a->cur += sizeof(*h) + n;
		h->big = false;
	}
	h->size = n;
	return h + 1;
}

static void *ya_malloc(void *ctx, size_t n)
{
	struct yarena *a = ctx;
	void *p = ya_alloc(a, n);

	if (!p)
		longjmp(*a->oom, 1);
	return p;
}

static void ya_unlink(struct yarena *a, struct ya_hdr *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		a->big = h->next;
	if (h->next)
		h->next->prev = h->prev;
}

static void ya_free(void *ctx, void *p)
{
	struct ya_hdr *h = p ? (struct ya_hdr *)p - 1 : NULL;

	/* Small blocks go with the arena. */
	if (h && h->big) {
		ya_unlink(ctx, h);
		free(h);
	}
}

static void *ya_realloc(void *ctx, void *p, size_t n)
{
	struct yarena *a = ctx;
	struct ya_hdr *h;
	void *q;

	if (!p)
		return ya_malloc(ctx, n);
	h = (struct ya_hdr *)p - 1;
	if (n <= h->size)
		return p;
	if (h->big && n <= SIZE_MAX / 2) {
		struct ya_hdr *nh;

		n = (n + 15) & ~(size_t)15;
		ya_unlink(a, h);
		nh = realloc(h, sizeof(*h) + n);
		if (!nh) {
			/* Still ours to free at the end. */
			h->prev = NULL;
			h->next = a->big;
			if (a->big)
				a->big->prev = h;
			a->big = h;
			longjmp(*a->oom, 1);
		}
		nh->size = n;
		nh->prev = NULL;
		nh->next = a->big;
		if (a->big)
			a->big->prev = nh;
		a->big = nh;
		return nh + 1;
	}
	q = ya_malloc(ctx, n);
	memcpy(q, p, h->size);
	return q;
}

static void ya_begin(struct yarena *a)
{
	a->cur = ya_first;
	a->end = ya_first + sizeof(ya_first);
	a->blocks = NULL;
	a->big = NULL;
}

static void ya_end(struct yarena *a)
{
	while (a->blocks) {
		struct ya_blk *b = a->blocks;

		a->blocks = b->next;
		free(b);
	}
	while (a->big) {
		struct ya_hdr *h = a->big;

		a->big = h->next;
		free(h);
	}
}

/* ---------------------------------------------------------------------- */
/* The decode                                                              */

/* yajl's failure as "syntax error at line L column C: what". */
static void dec_parser_error(struct dec *d)
{
	unsigned char *e = yajl_get_error(d->h, 0, NULL, 0);
	char what[160];
	size_t n;
	const char *s = (const char *)e;

	if (!s) {
		dec_syntax(d, d->len, "invalid JSON");
		return;
	}
	/* "parse error: trailing garbage\n" -> "trailing garbage" */
	if (strncmp(s, "parse error: ", 13) == 0)
		s += 13;
	else if (strncmp(s, "lexical error: ", 15) == 0)
		s += 15;
	n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '.'))
		n--;
	snprintf(what, sizeof(what), "%.*s", (int)n, s);
	dec_syntax(d, d->finishing ? d->len : yajl_get_bytes_consumed(d->h), what);
	yajl_free_error(d->h, e);
}

/* After the value only white space: yajl takes an unfinished token there
   (`{}"`) for the end of the text. */
static int check_end(struct dec *d)
{
	for (size_t i = d->last; i < d->len; i++)
		if (d->json[i] != ' ' && d->json[i] != '\t' && d->json[i] != '\n' && d->json[i] != '\r')
			return dec_syntax(d, i, "trailing garbage");
	return 0;
}

static void dec_parse(struct dec *d)
{
	static yajl_alloc_funcs afs = { ya_malloc, ya_realloc, ya_free, NULL };
	yajl_alloc_funcs mine = afs;
	yajl_status st;

	mine.ctx = &d->arena;
	d->h = yajl_alloc(&dec_callbacks, &mine, d);
	if (!d->h) {
		dec_fail(d, "out of memory");
		return;
	}
	/* Checked here, by Go's rules (see above). */
	yajl_config(d->h, yajl_dont_validate_strings, 1);
	st = yajl_parse(d->h, (const unsigned char *)d->json, d->len);
	if (st == yajl_status_ok && !d->done) {
		/* Only the end of the text ends a number at the very end (and
		   yajl tells a text that stops early). With the value complete
		   nothing is left to it: check_end() looks at the rest. */
		d->finishing = true;
		st = yajl_complete_parse(d->h);
	}
	if (st == yajl_status_error)
		dec_parser_error(d);
	else if (st == yajl_status_ok && check_end(d) == 0 && !d->failed && !d->done)
		dec_syntax(d, d->len, "premature end of the text");
	else if (st != yajl_status_ok && !d->failed)
		dec_fail(d, "invalid JSON");
}

/* Run the parse; false when an allocation inside yajl failed (it jumps
   back here; everything yajl had is in the arena, the message's state in
   *d, so nothing of this frame is needed afterwards). */
static bool dec_parse_guarded(struct dec *d)
{
	jmp_buf oom;

	d->arena.oom = &oom;
	if (setjmp(oom))
		return false;
	dec_parse(d);
	return true;
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
	struct dec d;

	if (errlen > 0)
		err[0] = '\0';
	/* The frames are set as they are pushed: only the rest is cleared. */
	memset(&d, 0, offsetof(struct dec, fr));
	d.err = err;
	d.errlen = errlen;
	d.alloc = alloc ? alloc : &system_alloc;
	d.desc = desc;
	d.json = json ? json : "";
	d.len = json ? len : 0;
	if (!desc) {
		dec_fail(&d, "no message descriptor");
		return NULL;
	}
	ya_begin(&d.arena);
	if (!dec_parse_guarded(&d)) {
		d.failed = false;
		dec_fail(&d, "out of memory");
	}
	ya_end(&d.arena);
	if (!d.failed && d.done && d.root)
		return d.root;
	if (!d.failed)
		dec_fail(&d, "invalid JSON");
	/* A map entry waits for its value; the rest hangs off the root. */
	while (d.nf > 0) {
		struct frame *t = &d.fr[d.nf - 1];

		if (t->kind == FR_MAP && t->entry)
			protobuf_c_message_free_unpacked(t->entry, d.alloc);
		pop(&d);
	}
	if (d.root)
		protobuf_c_message_free_unpacked(d.root, d.alloc);
	return NULL;
}
