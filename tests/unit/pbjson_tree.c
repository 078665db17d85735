/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbjson_tree.c - the tree-walking JSON decoder envd used before
 * proto/pbjson parsed with a streaming parser: jansson builds the document,
 * then the tree is walked into the protobuf-c message. Kept for the tests
 * alone, as an independent second walk the streaming decoder is held
 * against (tests/unit/pbjson_test.c, fuzz/fuzz_pbjson.c). The text forms
 * of values (numbers, timestamps, names) are proto/pbtext's, shared with
 * the codec and tested by themselves (pbtext_test.c).
 * Error messages are not compared, so describe() here is plain.
 */
#include "pbjson_tree.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/base64.h"
#include "proto/pbjson.h"
#include "proto/pbtext.h"

/* Does `key` equal protoc's JSON name (lowerCamelCase) of `proto`? */
static bool json_name_eq(const char *proto, const char *key)
{
	size_t n = strlen(key);

	return pbtext_camel_prefix(proto, key, n, false) == (long)n;
}

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
	return -1;
}

/*
 * A short, valid-UTF-8 rendering of a JSON value for error messages:
 * scalars as JSON text (strings cut at 40 bytes), containers as {…}/[…].
 */
static void describe(const json_t *v, char *out, size_t outlen)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		snprintf(out, outlen, "{...}");
		return;
	case JSON_ARRAY:
		snprintf(out, outlen, "[...]");
		return;
	case JSON_STRING:
		snprintf(out, outlen, "\"%.40s\"", json_string_value(v));
		return;
	case JSON_INTEGER:
		snprintf(out, outlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return;
	case JSON_REAL:
		snprintf(out, outlen, "%.17g", json_real_value(v));
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

static bool json_intval(const json_t *v, struct pbtext_int *iv)
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
		return pbtext_parse_int(json_string_value(v), json_string_length(v), iv);
	default:
		return false;
	}
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
	if (n >= sizeof(tmp) || !pbtext_is_number(s, n))
		return false;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	*out = strtod(tmp, NULL);
	return isfinite(*out);
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

	if (!pbtext_ts_fields(desc, &sf, &nf))
		return dec_fail(d, "unsupported %s descriptor", PBTEXT_TIMESTAMP_NAME);
	if (!json_is_string(v))
		return dec_bad_value(d, PBTEXT_TIMESTAMP_NAME, field, v);
	if (!pbtext_parse_rfc3339(json_string_value(v), json_string_length(v), &secs, &nanos)) {
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

/*
 * Decode one value of field `f` from v into the storage at dst (a single
 * element). `field` names the field in messages. Returns 0 when stored,
 * 1 when the value is ignored (unknown enum name), -1 on error. On error
 * nothing has been stored.
 */
static int dec_value(struct dec *d, const ProtobufCFieldDescriptor *f, const char *field,
		     const json_t *v, void *dst, int depth)
{
	struct pbtext_int iv;
	int64_t sv;
	uint64_t uv;
	double dv;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (!json_intval(v, &iv) || !pbtext_int_signed(&iv, INT32_MAX, &sv))
			return dec_bad_value(d, pbtext_type_name(f->type), field, v);
		*(int32_t *)dst = (int32_t)sv;
		return 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (!json_intval(v, &iv) || !pbtext_int_signed(&iv, INT64_MAX, &sv))
			return dec_bad_value(d, pbtext_type_name(f->type), field, v);
		*(int64_t *)dst = sv;
		return 0;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (!json_intval(v, &iv) || !pbtext_int_unsigned(&iv, UINT32_MAX, &uv))
			return dec_bad_value(d, pbtext_type_name(f->type), field, v);
		*(uint32_t *)dst = (uint32_t)uv;
		return 0;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (!json_intval(v, &iv) || !pbtext_int_unsigned(&iv, UINT64_MAX, &uv))
			return dec_bad_value(d, pbtext_type_name(f->type), field, v);
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
		if (!json_is_number(v) || !json_intval(v, &iv) || !pbtext_int_signed(&iv, INT32_MAX, &sv))
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
		if (pbtext_is_timestamp(f->descriptor)) {
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

static int dec_list(struct dec *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		    const char *field, const json_t *v, int depth)
{
	char *base = (char *)m;
	size_t *qn = (size_t *)(base + f->quantifier_offset);
	char **arrp = (char **)(base + f->offset);
	size_t n, es = pbjson_value_size(f->type);
	char kind[64];

	snprintf(kind, sizeof(kind), "repeated %s", pbtext_type_name(f->type));
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
	struct pbtext_int iv;
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
		if (pbtext_parse_int(key, strlen(key), &iv) && pbtext_int_signed(&iv, INT32_MAX, &sv)) {
			*(int32_t *)dst = (int32_t)sv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (pbtext_parse_int(key, strlen(key), &iv) && pbtext_int_signed(&iv, INT64_MAX, &sv)) {
			*(int64_t *)dst = sv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (pbtext_parse_int(key, strlen(key), &iv) && pbtext_int_unsigned(&iv, UINT32_MAX, &uv)) {
			*(uint32_t *)dst = (uint32_t)uv;
			return 0;
		}
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (pbtext_parse_int(key, strlen(key), &iv) && pbtext_int_unsigned(&iv, UINT64_MAX, &uv)) {
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

	pbtext_json_name(f, field, sizeof(field));
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		if (pbtext_field_is_map(f))
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
				pbtext_json_name(other, oname, sizeof(oname));
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

static void *sys_alloc(void *ud, size_t n)
{
	return malloc(n);
}

static void sys_free(void *ud, void *p)
{
	free(p);
}

static ProtobufCAllocator system_alloc = { sys_alloc, sys_free, NULL };

ProtobufCMessage *pbjson_tree_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
				     char *err, size_t errlen, bool *parser_error)
{
	struct dec d = { err, errlen, &system_alloc };
	ProtobufCMessage *m = NULL;
	json_error_t je;
	json_t *root;

	*parser_error = false;
	if (errlen > 0)
		err[0] = '\0';
	if (!json) {
		json = "";
		len = 0;
	}
	if (json_too_deep(json, len, PBJSON_MAX_DEPTH)) {
		dec_fail(&d, "exceeds maximum nesting depth %d", PBJSON_MAX_DEPTH);
		return NULL;
	}
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!root) {
		*parser_error = true;
		dec_fail(&d, "syntax error at line %d column %d: %s", je.line, je.column, je.text);
		return NULL;
	}
	if (pbtext_is_timestamp(desc)) {
		if (dec_timestamp(&d, desc, root, "(top level)", &m) < 0)
			m = NULL;
	} else if (!json_is_object(root)) {
		char what[80];

		describe(root, what, sizeof(what));
		dec_fail(&d, "expected a JSON object, got %s", what);
	} else {
		m = dec_message(&d, desc, root, NULL, 1);
	}
	json_decref(root);
	return m;
}
