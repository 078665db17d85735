#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run every libFuzzer target for SECONDS, starting from its corpus in the
# repository (fuzz/corpus/<target>/). Prints per target the executions, the
# coverage reached and the crashes found, then "fuzz: N passed, N failed".
# A crash leaves its input in build/fuzz/crashes/ and fails the run.
#
#   fuzz.sh SECONDS          new inputs stay in build/fuzz/corpus/ (make test)
#   fuzz.sh SECONDS --keep   then merge them into fuzz/corpus/<target>/,
#                            minimised, so the next run starts there (make fuzz)
#
# FUZZ_JOBS=N runs N targets at a time (default 1); each still gets SECONDS.
# Every target runs in scripts/fuzz-sandbox.sh: the request-serving targets
# reach real handlers (uploads, /init's clock, freezes) and must not change
# the machine the other tests run on.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
keep=no
[ "${2:-}" = --keep ] && keep=yes
jobs=${FUZZ_JOBS:-1}
# This run's logs and results, so that two runs (make fuzz and make test)
# do not mix theirs up; the logs end up in build/fuzz/<target>.log.
out=build/fuzz/run.$$
mkdir -p build/fuzz/crashes "$out"
trap 'rm -rf "$out"' EXIT

# fuzz_one BIN: run one target; writes $out/<name>.result (the line to
# print) and returns non-zero when the target failed.
fuzz_one() {
	local bin=$1 name seeds work log rc execs cov ft res
	name=$(basename "$bin")
	seeds=fuzz/corpus/${name#fuzz_}
	work=build/fuzz/corpus/${name#fuzz_}
	res=$out/$name.result
	mkdir -p "$work" "$seeds"
	log=$out/$name.log
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
		timeout $((secs + 120)) bash scripts/fuzz-sandbox.sh "$bin" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix="build/fuzz/crashes/$name-" \
		"$work" "$seeds" >"$log" 2>&1
	rc=$?
	cp -f "$log" "build/fuzz/$name.log"
	log=build/fuzz/$name.log
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -n1 | awk '{print $2}')
	ft=$(grep -ao 'ft: [0-9]*' "$log" | tail -n1 | awk '{print $2}')
	if [ $rc -ne 0 ]; then
		{
			echo "fuzz $name: FAILED (exit $rc) after ${execs:-?} executions; see $log"
			grep -a -E 'ERROR|SUMMARY|==[0-9]+==' "$log" | head -n 20
		} >"$res"
		return 1
	fi
	local kept=""
	if [ $keep = yes ]; then
		# Minimise: the hand-written seeds (readable names) always stay;
		# of the rest, only inputs that add coverage to them are kept.
		local new=$out/merge/${name#fuzz_}
		rm -rf "$new" && mkdir -p "$new"
		find "$seeds" -maxdepth 1 -type f ! -regex '.*/[0-9a-f]\{40\}' -exec cp {} "$new"/ \;
		if ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 timeout 900 bash scripts/fuzz-sandbox.sh "$bin" -merge=1 \
			-timeout=30 -rss_limit_mb=2048 -max_len=65536 "$new" "$seeds" "$work" \
			>"$out/$name.merge.log" 2>&1; then
			rm -rf "$seeds" && mv "$new" "$seeds"
			kept=", corpus $(find "$seeds" -type f | wc -l) inputs kept in $seeds"
		else
			cp -f "$out/$name.merge.log" "build/fuzz/$name.merge.log"
			kept=", corpus merge failed (see build/fuzz/$name.merge.log)"
		fi
	fi
	echo "fuzz $name: ${execs:-0} executions, coverage ${cov:-0} edges (${ft:-0} features), 0 crashes$kept" >"$res"
}

bins=()
for bin in build/fuzz/fuzz_*; do
	[ -x "$bin" ] && [ -f "$bin" ] && bins+=("$bin")
done
running=0
for bin in "${bins[@]}"; do
	fuzz_one "$bin" &
	running=$((running + 1))
	if [ $running -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

passed=0
failed=0
for bin in "${bins[@]}"; do
	name=$(basename "$bin")
	res=$out/$name.result
	if [ -s "$res" ] && ! grep -q ': FAILED' "$res"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		[ -s "$res" ] || echo "fuzz $name: FAILED (no result)" >"$res"
	fi
	cat "$res"
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
