#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run envd's tests and print one summary line: "tests: N passed, N failed".
#   run-tests.sh unit   Criterion unit tests (sanitizer build)
#   run-tests.sh all    unit, integration (curl/nghttp) and SDK tests
# Integration and SDK tests run against the static build (ENVD_BIN) and
# again against the sanitizer build for the protocol-level suites.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
passed=0
failed=0
failures=()
logdir=build/test-logs
mkdir -p "$logdir"

add() { passed=$((passed + $1)); failed=$((failed + $2)); }

run_unit() {
	for t in build/asan/tests/*_test; do
		[ -x "$t" ] || continue
		local name log
		name=$(basename "$t")
		log="$logdir/$name.log"
		ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 timeout 300 "$t" -j2 >"$log" 2>&1
		local rc=$?
		local line
		line=$(grep -a 'Synthesis:' "$log" | tail -n1)
		local p f c
		p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$line")
		f=$(sed -n 's/.*Failing: \([0-9]*\).*/\1/p' <<<"$line")
		c=$(sed -n 's/.*Crashing: \([0-9]*\).*/\1/p' <<<"$line")
		p=${p:-0}; f=$((${f:-0} + 0)); c=${c:-0}
		if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
		add "$p" "$f"
		echo "unit  $name: $p passed, $f failed${c:+ ($c crashing)}"
		if [ "$f" -ne 0 ]; then
			failures+=("$name")
			grep -a -E '\[----\]|\[FAIL\]|ERROR|runtime error' "$log" | head -n 40
		fi
	done
}

run_scripts() { # run_scripts BIN LABEL
	local bin=$1 label=$2
	for t in tests/integration/*.sh; do
		[ -f "$t" ] || continue
		case $t in *_lib.sh) continue ;; esac # sourced helpers, not tests
		# Scripts that only make sense for the static product (a rootfs,
		# multi-GiB transfers) say so with a "# asan: skip" line.
		if [ "$label" = asan ] && grep -q '^# asan: skip' "$t"; then
			continue
		fi
		local name log
		name=$(basename "$t" .sh)
		log="$logdir/$label-$name.log"
		ENVD_BIN=$bin timeout 900 bash "$t" >"$log" 2>&1
		local rc=$?
		local line p f
		line=$(grep -a -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
		p=$(sed -n 's/.*: \([0-9]*\) passed.*/\1/p' <<<"$line")
		f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
		p=${p:-0}; f=${f:-0}
		if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
		add "$p" "$f"
		echo "$label $name: $p passed, $f failed"
		if [ "$f" -ne 0 ]; then
			failures+=("$label/$name")
			grep -a -E '^FAIL|error' "$log" | head -n 40
		fi
	done
}

run_sdk() {
	ls tests/sdk/*.test.mjs >/dev/null 2>&1 || return 0
	if [ ! -d tests/sdk/node_modules/e2b ]; then
		(cd tests/sdk && npm ci --no-audit --no-fund >/dev/null 2>&1) || {
			echo "sdk: npm ci failed"; add 0 1; failures+=("sdk/npm"); return; }
	fi
	local log="$logdir/sdk.log"
	ENVD_BIN=build/envd timeout 1200 bash tests/sdk/run.sh >"$log" 2>&1
	local rc=$?
	local p f
	p=$(grep -a -E '^# pass ' "$log" | tail -n1 | awk '{print $3}')
	f=$(grep -a -E '^# fail ' "$log" | tail -n1 | awk '{print $3}')
	p=${p:-0}; f=${f:-0}
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	add "$p" "$f"
	echo "sdk   e2b SDK tests: $p passed, $f failed"
	if [ "$f" -ne 0 ]; then
		failures+=("sdk")
		grep -a -E '^not ok|# Subtest|Error|error:' "$log" | head -n 60
	fi
}

run_vm() {
	# The image booted as a QEMU microVM and tested from the host
	# (scripts/vm-test.sh, tests/vm/); it skips itself where QEMU cannot run.
	local log="$logdir/vm.log"
	timeout 1800 bash scripts/vm-test.sh >"$log" 2>&1
	local rc=$? line p f
	line=$(grep -a -E '^vm: [0-9]+ passed' "$log" | tail -n1)
	p=$(sed -n 's/^vm: \([0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	p=${p:-0}; f=${f:-0}
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	add "$p" "$f"
	echo "vm    QEMU microVM: $p passed, $f failed ($(grep -a '^boot:' "$log" | tail -n1))"
	if [ "$f" -ne 0 ]; then
		failures+=("vm")
		grep -a -E '^FAIL|^vm ' "$log" | head -n 40
	fi
}

run_fuzz() {
	# A few seconds per libFuzzer target on its seed corpus; `make fuzz`
	# runs the long version.
	ls build/fuzz/fuzz_* >/dev/null 2>&1 || return 0
	local log="$logdir/fuzz.log"
	bash scripts/fuzz.sh "${FUZZ_TEST_SECONDS:-5}" >"$log" 2>&1
	local line p f
	line=$(grep -a -E '^fuzz: [0-9]+ passed' "$log" | tail -n1)
	p=$(sed -n 's/^fuzz: \([0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	p=${p:-0}; f=${f:-1}
	add "$p" "$f"
	grep -a '^fuzz fuzz_' "$log"
	[ "$f" -ne 0 ] && failures+=("fuzz")
}

run_bench() {
	# The quick benchmark run checks that the benchmark itself still
	# works (it asserts nothing about speed; make bench is the real one).
	[ -x build/bench/envdbench ] || return 0
	local log="$logdir/bench-quick.log"
	timeout 300 bash scripts/bench.sh --quick >"$log" 2>&1
	local rc=$?
	if [ $rc -eq 0 ] && [ -s bench/results/latest.json ]; then
		add 1 0
		echo "bench quick run: 1 passed, 0 failed ($(tail -n1 "$log"))"
	else
		add 0 1
		failures+=("bench")
		echo "bench quick run: 0 passed, 1 failed (exit $rc, see $log)"
	fi
}

case $mode in
unit) run_unit ;;
all)
	run_unit
	run_scripts build/envd static
	run_scripts build/asan/envd asan
	run_sdk
	run_vm
	run_fuzz
	run_bench
	;;
*) echo "usage: $0 unit|all" >&2; exit 2 ;;
esac

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]} (logs in $logdir)"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
