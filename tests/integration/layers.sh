#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The layering check (scripts/check-layers.sh): the tree passes it, and it
# catches what it exists to catch (an include against the layer order, an
# include cycle between folders or inside one, a declaration outside its
# module's header that would hide one, a stale layer list) with a message
# naming the files.
# asan: skip
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

out=$(bash scripts/check-layers.sh . 2>&1)
rc=$?
expect_eq "the tree passes the layering check" 0 "$rc"
[ "$rc" -eq 0 ] || echo "$out"

tmp=$(mktemp -d /tmp/envd-layers.XXXXXX)
on_exit 'rm -rf "$tmp"; _t_cleanup'
copy() { # copy DIR: a fresh copy of the sources the check reads
	rm -rf "$tmp/$1"
	mkdir -p "$tmp/$1"
	cp -r base proto http rpc pty process changes fs transfer sandbox envd docs scripts "$tmp/$1/"
}

# An upward include: base/ may not reach envd/.
copy up
sed -i '0,/^#include "base\/log.h"/s//#include "base\/log.h"\n#include "envd\/router.h"/' "$tmp/up/base/log.c"
check "the upward include was planted" grep -q 'envd/router.h' "$tmp/up/base/log.c"
out=$(bash scripts/check-layers.sh "$tmp/up" 2>&1)
rc=$?
expect_eq "an upward include fails the check" 1 "$rc"
expect_match "the failure names the file and the include" \
	'base/log\.c:[0-9]+: #include "envd/router\.h": layer base may not include envd' "$out"

# A cycle inside one layer: base/sha2.h <-> base/base64.h.
copy cycle
sed -i '0,/^#include/s//#include "base\/base64.h"\n#include/' "$tmp/cycle/base/sha2.h"
sed -i '0,/^#include/s//#include "base\/sha2.h"\n#include/' "$tmp/cycle/base/base64.h"
out=$(bash scripts/check-layers.sh "$tmp/cycle" 2>&1)
rc=$?
expect_eq "an include cycle fails the check" 1 "$rc"
expect_match "the failure names both modules" 'include cycle between base/base64, base/sha2' "$out"
expect_match "the failure names the includes" 'base/sha2\.h:[0-9]+ includes "base/base64\.h"' "$out"

# A cycle between modules of one folder: output.h reaching back to the
# table that calls it (process.c includes output.h).
copy incycle
sed -i '0,/^#include "process\/process_int.h"/s//#include "process\/process_int.h"\n#include "process\/process.h"/' \
	"$tmp/incycle/process/output.h"
check "the include was planted" grep -q '"process/process.h"' "$tmp/incycle/process/output.h"
out=$(bash scripts/check-layers.sh "$tmp/incycle" 2>&1)
rc=$?
expect_eq "a cycle inside a folder fails the check" 1 "$rc"
expect_match "the failure names both modules" 'include cycle between process/output, process/process' "$out"
expect_match "the failure names the back edge" 'process/output\.h:[0-9]+ includes "process/process\.h"' "$out"

# A circle hidden behind a header that is no module's own: the shared
# process_int.h declaring keep.c's functions (as it once did) lets
# process.c call keep.c, which calls process.c, with no include cycle.
copy hidden
sed -i 's/^#endif$/size_t keep_adopt_all(struct sdnotify_fd *fds, size_t n);\n#endif/' "$tmp/hidden/process/process_int.h"
check "the declaration was planted" grep -q '^size_t keep_adopt_all' "$tmp/hidden/process/process_int.h"
out=$(bash scripts/check-layers.sh "$tmp/hidden" 2>&1)
rc=$?
expect_eq "a declaration in another module's header fails the check" 1 "$rc"
expect_match "the failure names the header, the function and its module" \
	'process/process_int\.h:[0-9]+ declares function keep_adopt_all, which process/keep\.c defines' "$out"

# The same, declared by the .c that calls it instead of included.
copy local
sed -i '0,/^static void out_eof/s//void output_fanout(struct process *p);\n\nstatic void out_eof/' \
	"$tmp/local/process/process.c"
check "the local declaration was planted" grep -q '^void output_fanout' "$tmp/local/process/process.c"
out=$(bash scripts/check-layers.sh "$tmp/local" 2>&1)
expect_match "a .c declaring another module's function fails the check" \
	'process/process\.c:[0-9]+ declares function output_fanout, which process/output\.c defines' "$out"

# A .c without a header of its own belongs to the one header it implements
# (rpc/connect.c and rpc/rpc.h pass above); one that implements two is
# two modules' worth of code in one file.
copy twoheads
printf '%s\n' '/* SPDX-License-Identifier: Apache-2.0 */' '#include "process/output.h"' \
	'#include "process/stdin.h"' 'void output_init(const struct output_hooks *h) {}' \
	'void stdin_init(const struct stdin_hooks *h) {}' >"$tmp/twoheads/process/both.c"
out=$(bash scripts/check-layers.sh "$tmp/twoheads" 2>&1)
expect_match "a .c implementing two headers fails the check" \
	'process/both\.c has no header of its own and implements process/output\.h, process/stdin\.h' "$out"

# Removing an allow-list entry turns a tolerated include into a failure.
copy noallow
if grep -q '^[a-z]' scripts/layers-allow.txt; then
	: >"$tmp/noallow/scripts/layers-allow.txt"
	out=$(bash scripts/check-layers.sh "$tmp/noallow" 2>&1)
	expect_match "allow-listed includes are real violations without the list" 'may not include' "$out"
else
	pass "allow list is empty (nothing tolerated)"
fi

# A header without its folder in the include.
copy flat
sed -i '0,/^#include "base\/log.h"/s//#include "log.h"/' "$tmp/flat/base/log.c"
out=$(bash scripts/check-layers.sh "$tmp/flat" 2>&1)
expect_match "an include must name its folder" 'base/log\.c:[0-9]+: #include "log\.h" does not name its folder' "$out"

# The layer order is read from docs/architecture.md: no line, no check.
copy nodoc
sed -i '/^layers:/d' "$tmp/nodoc/docs/architecture.md"
out=$(bash scripts/check-layers.sh "$tmp/nodoc" 2>&1)
rc=$?
expect_eq "a missing layer list is a setup error" 2 "$rc"

echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
[ "$T_FAIL" -eq 0 ]
