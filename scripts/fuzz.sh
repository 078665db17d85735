#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run every libFuzzer target for SECONDS on a working copy of its seed
# corpus (fuzz/corpus/<target>/). Prints per target the executions, the
# coverage reached and the crashes found, then "fuzz: N passed, N failed".
# A crash leaves its input in build/fuzz/crashes/ and fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
passed=0
failed=0
mkdir -p build/fuzz/crashes
for bin in build/fuzz/fuzz_*; do
	[ -x "$bin" ] || continue
	name=$(basename "$bin")
	seeds=fuzz/corpus/${name#fuzz_}
	work=build/fuzz/corpus/${name#fuzz_}
	mkdir -p "$work" "$seeds"
	log=build/fuzz/$name.log
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
		timeout $((secs + 60)) "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix="build/fuzz/crashes/$name-" \
		"$work" "$seeds" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | awk '{print $2}')
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		echo "fuzz $name: ${execs:-0} executions, coverage ${cov:-0} edges, 0 crashes"
	else
		failed=$((failed + 1))
		echo "fuzz $name: FAILED (exit $rc) after ${execs:-?} executions; see $log"
		grep -a -E 'ERROR|SUMMARY|==[0-9]+==' "$log" | head -n 20
	fi
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
