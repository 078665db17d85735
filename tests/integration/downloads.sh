#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the first run downloads survives the archive's state. scripts/deps.sh
# fetches a source package by every version apt knows, newest first: an
# index entry whose files the mirror no longer serves (a 404 from a stale
# suite) costs a line on stderr, not the build. scripts/npm-setup.sh says
# in one line what npm refused and leaves no half-filled node_modules.
# Driven with stand-ins for apt-cache, apt-get and npm on PATH; nothing is
# downloaded.
# asan: skip
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

W=$(mktemp -d /tmp/envd-deps-test.XXXXXX)
on_exit 'rm -rf "$W"; _t_cleanup'
mkdir -p "$W/bin"

# apt-cache showsrc: three versions of "demo" in no particular order, and
# another package in between whose versions must not be taken for demo's.
cat >"$W/bin/apt-cache" <<'SH'
#!/bin/sh
[ "$1" = showsrc ] || exit 1
[ "$2" = demo ] || exit 0
cat <<'OUT'
Package: demo
Version: 1:1.0-1

Package: demo
Version: 1:1.0-1+deb12u1

Package: other
Version: 9:9.9-9

Package: demo
Version: 1:0.9-3

OUT
SH
# apt-get source demo=V: refuses every version named in $REFUSE (404, as a
# stale index entry answers), else unpacks demo-<upstream>/ here.
cat >"$W/bin/apt-get" <<'SH'
#!/bin/sh
[ "$1" = source ] || exit 1
shift
while [ "${1#-}" != "$1" ]; do shift; done
v=${1#demo=}
echo "$v" >>"$TRIED"
for r in $REFUSE; do
	if [ "$r" = "$v" ]; then
		echo "E: Failed to fetch http://archive.invalid/pool/demo_$v.dsc  404  Not Found" >&2
		# a partial download, as apt leaves one
		: >"demo_$v.dsc.partial"
		exit 100
	fi
done
u=${v#*:}; u=${u%-*}
mkdir -p "demo-$u" && echo "$v" >"demo-$u/VERSION"
SH
chmod +x "$W/bin/apt-cache" "$W/bin/apt-get"

run_fetch() { # run_fetch SRC REFUSE...: stdout, stderr, rc in $W/{out,err,rc}
	local src=$1
	shift
	: >"$W/tried"
	PATH="$W/bin:$PATH" TRIED=$W/tried REFUSE="$*" \
		bash scripts/deps.sh --fetch demo "$src" >"$W/out" 2>"$W/err"
	echo $? >"$W/rc"
}

# Every version served: the newest is built, nothing else is tried.
run_fetch "$W/s1"
expect_eq "all served: exit 0" 0 "$(cat "$W/rc")"
expect_eq "all served: the newest version is fetched" "1:1.0-1+deb12u1" "$(cat "$W/s1/demo.version")"
expect_eq "all served: only one version is tried" 1 "$(wc -l <"$W/tried")"
check "all served: the source tree is there" test -f "$W/s1/demo-1.0/VERSION"

# The newest refused: the next one is fetched, and stderr says why the newest was skipped.
run_fetch "$W/s2" "1:1.0-1+deb12u1"
expect_eq "newest refused: exit 0" 0 "$(cat "$W/rc")"
expect_eq "newest refused: the next version is fetched" "1:1.0-1" "$(cat "$W/s2/demo.version")"
expect_eq "newest refused: versions tried newest first" "1:1.0-1+deb12u1 1:1.0-1" "$(tr '\n' ' ' <"$W/tried" | sed 's/ $//')"
check "newest refused: stderr names the skipped version and the 404" \
	grep -q 'demo 1:1.0-1+deb12u1 could not be fetched (404  Not Found)' "$W/err"
check "newest refused: stderr names the version used" grep -q 'demo 1:1.0-1 (skipped: 1:1.0-1+deb12u1' "$W/err"
check "newest refused: no partial download is left behind" \
	sh -c '! ls -a "$1" | grep -q -e partial -e "^\.fetch-"' _ "$W/s2"
check "newest refused: the other package's version was never tried" sh -c '! grep -q 9.9 "$1"' _ "$W/tried"

# Two refused: the oldest is fetched (an epoch-aware order, not a string one).
run_fetch "$W/s3" "1:1.0-1+deb12u1" "1:1.0-1"
expect_eq "two refused: the oldest is fetched" "1:0.9-3" "$(cat "$W/s3/demo.version")"

# All refused: a clear error naming the package and every version, exit non-zero, nothing left.
run_fetch "$W/s4" "1:1.0-1+deb12u1" "1:1.0-1" "1:0.9-3"
check "all refused: non-zero exit" test "$(cat "$W/rc")" -ne 0
check "all refused: one line names the package and each version" \
	grep -q 'no version of the source package demo could be fetched (tried: 1:1.0-1+deb12u1: 404  Not Found; 1:1.0-1: 404  Not Found; 1:0.9-3: 404  Not Found; see ' "$W/err"
check "all refused: no source tree and no version stamp" \
	sh -c '! ls -d "$1"/demo-* "$1"/demo.version 2>/dev/null' _ "$W/s4"

# A second run finds the fetched tree and fetches nothing.
run_fetch "$W/s2" "1:1.0-1+deb12u1"
expect_eq "cached: nothing is tried again" 0 "$(wc -l <"$W/tried")"
expect_eq "cached: same version" "1:1.0-1" "$(cat "$W/s2/demo.version")"

# No version known at all (no deb-src entry): says so.
run_fetch "$W/s5"
PATH="$W/bin:$PATH" bash scripts/deps.sh --fetch nosuch "$W/s5" >/dev/null 2>"$W/err"
rc=$?
check "unknown package: non-zero exit" test "$rc" -ne 0
check "unknown package: the error names it and the likely cause" grep -q 'no source version of nosuch known to apt (is a deb-src entry missing' "$W/err"

# The real build records what it built.
if [ -f build/deps/versions ]; then
	check "build/deps/versions lists every library built" \
		sh -c 'for p in zlib libev nghttp2 jansson http-parser protobuf-c libarchive; do grep -q "^$p " build/deps/versions || exit 1; done'
fi

# npm: a registry that refuses a package. A copy of the script in a scratch
# tree, so the real tests/sdk/node_modules is not touched.
R=$W/repo
mkdir -p "$R/scripts" "$R/tests/sdk"
cp scripts/npm-setup.sh "$R/scripts/"
echo '{"lockfileVersion":3}' >"$R/tests/sdk/package-lock.json"
cat >"$W/bin/npm" <<'SH'
#!/bin/sh
mkdir -p node_modules/e2b
: >node_modules/e2b/package.json
if [ -n "$NPM_REFUSE" ]; then
	echo "npm ERR! code E404" >&2
	echo "npm ERR! 404 Not Found - GET https://registry.invalid/e2b/-/e2b-9.9.9.tgz - Not found" >&2
	exit 1
fi
SH
chmod +x "$W/bin/npm"
PATH="$W/bin:$PATH" NPM_REFUSE=1 bash "$R/scripts/npm-setup.sh" 2>"$W/err"
rc=$?
check "npm refused: non-zero exit" test "$rc" -ne 0
check "npm refused: one line says what npm refused" grep -q '^npm-setup: npm ci in tests/sdk failed: code E404' "$W/err"
expect_eq "npm refused: one line" 1 "$(wc -l <"$W/err")"
check "npm refused: no half-filled node_modules is left" test ! -e "$R/tests/sdk/node_modules"
PATH="$W/bin:$PATH" bash "$R/scripts/npm-setup.sh" 2>"$W/err"
expect_eq "npm served: exit 0" 0 "$?"
check "npm served: the install is stamped with the lock file's hash" test -s "$R/tests/sdk/node_modules/.envd-lock"
rm -f "$W/bin/npm"
printf '#!/bin/sh\necho called >>"%s"\nexit 1\n' "$W/npm-called" >"$W/bin/npm"
chmod +x "$W/bin/npm"
PATH="$W/bin:$PATH" bash "$R/scripts/npm-setup.sh" 2>"$W/err"
expect_eq "npm installed: a second run is a no-op" 0 "$?"
check "npm installed: npm is not run again" test ! -e "$W/npm-called"
finish
