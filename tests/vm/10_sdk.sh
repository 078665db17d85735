#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tests/sdk suites, unmodified, from the host against envd in the VM
# through the official SDK (debug mode, E2B_SANDBOX_URL = the forwarded
# port). What they check on "the machine" (files, owners, processes) is
# looked up in the guest, and requests carry the access token installed by
# /init (tests/vm/sdk/preload.mjs).
. "$(dirname "$0")/lib.sh"
command -v node >/dev/null || { fail "node is installed"; finish; exit; }
[ -d tests/sdk/node_modules/e2b ] || { fail "tests/sdk/node_modules (npm ci)"; finish; exit; }

# Under emulation (TCG) every process start costs ~10x native, and far more
# on a busy host: the test that runs 50 commands in a row runs 10 there.
runs=50
[ "${VM_ACCEL:-}" = tcg ] && runs=10
# The concurrent-commands test: QEMU's user-mode network (slirp) forwards
# a burst of 50 new connections slowly enough for the HTTP client's 10 s
# connect timeout to fail some before they reach envd.
concurrent=10
# VM_SDK_SKIP: a regular expression; the tests whose names it matches are
# left out (make test's arm64 pass leaves out the slowest, which repeat
# what others check). Node 20 has no skip pattern, only a name pattern, and
# runs every test below a matching ancestor: the pattern must not match
# the runner's root ("<root>"), or nothing would be left out.
pattern=()
# VM_SDK_FILES: the suites to run (default: every ./*.test.mjs of tests/sdk).
read -r -a files <<<"${VM_SDK_FILES:-./*.test.mjs}"
[ -n "${VM_SDK_SKIP:-}" ] && pattern=(--test-name-pattern "^(?!<root>\$|.*(${VM_SDK_SKIP}))")

log=$VM_RUN_DIR/sdk.log
(cd tests/sdk && E2B_DEBUG=true E2B_SANDBOX_URL=$VM_URL ENVD_URL=$VM_URL ENVD_SDK_FAST_RUNS=$runs ENVD_SDK_CONCURRENT=$concurrent \
	timeout "${VM_SUITE_S:-3600}" node --import ../vm/sdk/preload.mjs --test --test-concurrency=1 "${pattern[@]}" ${files[@]}) >"$log" 2>&1
rc=$?
cat "$log"
p=$(grep -a -E '^# pass ' "$log" | tail -n1 | awk '{print $3}')
f=$(grep -a -E '^# fail ' "$log" | tail -n1 | awk '{print $3}')
T_PASS=${p:-0}
T_FAIL=${f:-0}
s=$(grep -a -E '^# skipped ' "$log" | tail -n1 | awk '{print $3}')
[ "${s:-0}" = 0 ] || echo "vm-10_sdk: ${s} tests left out (VM_SDK_SKIP: ${VM_SDK_SKIP:-})"
[ $rc -ne 0 ] && [ "$T_FAIL" -eq 0 ] && fail "node --test exit status $rc"
finish
