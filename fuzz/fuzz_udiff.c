/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unified diff of two texts (try/udiff.h), which come from the files
 * a try changed: any bytes. The input is split at its first 0xff byte
 * into the old and the new text; the first byte sets the budget (odd) or
 * none (even). A diff
 * that fits must turn the old text into the new one when applied (by the
 * small applier here); a cut one must stay within its budget and end on
 * a whole line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "try/udiff.h"

/* Apply d to a (len an) into out; false when d is not well formed. */
static bool apply(const char *a, size_t an, const char *d, size_t dn, char *out, size_t *on)
{
	size_t ai = 0, o = 0, i = 0;
	long line = 1;

	if (!dn) {
		memcpy(out, a, an);
		*on = an;
		return true;
	}
	for (int h = 0; h < 2; h++) { /* the two header lines */
		const char *nl = memchr(d + i, '\n', dn - i);
		if (!nl)
			return false;
		i = (size_t)(nl - d) + 1;
	}
	while (i < dn) {
		long s1, l1 = 1;
		char *e;

		if (dn - i < 4 || memcmp(d + i, "@@ -", 4) != 0)
			return false;
		s1 = strtol(d + i + 4, &e, 10);
		if (*e == ',')
			l1 = strtol(e + 1, &e, 10);
		if (l1 == 0)
			s1++;
		while (line < s1) { /* copy up to the hunk */
			const char *nl = memchr(a + ai, '\n', an - ai);
			size_t k = nl ? (size_t)(nl - (a + ai)) + 1 : an - ai;
			if (!k)
				return false;
			memcpy(out + o, a + ai, k);
			o += k;
			ai += k;
			line++;
		}
		i = (size_t)((const char *)memchr(d + i, '\n', dn - i) - d) + 1;
		while (i < dn && d[i] != '@') {
			const char *nl = memchr(d + i, '\n', dn - i);
			size_t k = (size_t)(nl - (d + i));
			bool noeol = (size_t)(nl - d) + 2 < dn && d[(nl - d) + 1] == '\\';

			if (d[i] == ' ' || d[i] == '-') {
				const char *anl = memchr(a + ai, '\n', an - ai);
				ai = anl ? (size_t)(anl - a) + 1 : an;
				line++;
			}
			if (d[i] == ' ' || d[i] == '+') {
				memcpy(out + o, d + i + 1, k - 1);
				o += k - 1;
				if (!noeol)
					out[o++] = '\n';
			}
			i = (size_t)(nl - d) + 1;
			if (noeol)
				i = (size_t)((const char *)memchr(d + i, '\n', dn - i) - d) + 1;
		}
	}
	memcpy(out + o, a + ai, an - ai);
	*on = o + an - ai;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	const uint8_t *sep;
	const char *a, *b;
	size_t an, bn, cap, len, on = 0;
	char *out = NULL, *got;
	bool cut, bounded;

	if (n < 1)
		return 0;
	bounded = data[0] & 1;
	cap = bounded ? (size_t)(data[0] >> 1) * 16 + 1 : (size_t)1 << 30;
	data++;
	n--;
	sep = memchr(data, 0xff, n);
	a = (const char *)data;
	an = sep ? (size_t)(sep - data) : n;
	b = sep ? (const char *)sep + 1 : "";
	bn = sep ? n - an - 1 : 0;
	if (udiff_text(a, an, b, bn, "a/f", "b/f", cap, &out, &len, &cut) < 0)
		return 0;
	if (len > cap || (len && out[len - 1] != '\n'))
		abort();
	if (!cut) {
		got = malloc(an + bn + len + 1);
		if (!apply(a, an, out, len, got, &on) || on != bn || memcmp(got, b, bn) != 0)
			abort();
		free(got);
	}
	free(out);
	return 0;
}
