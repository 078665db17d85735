#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run envd's tests and print one summary line last: "tests: N passed, N failed".
#   run-tests.sh unit   Criterion unit tests (sanitizer build)
#   run-tests.sh unit-arm64  the aarch64 unit tests (build/arm64/tests,
#                       Criterion) under qemu-user
#   run-tests.sh all    unit, integration (curl/nghttp), SDK, a short fuzz run
#                       and the quick benchmark run
#
# Every tests/integration/*.sh (not *_lib.sh) runs against the static build
# (build/envd) and again against the sanitizer build, unless it has a
# "# asan: skip" line; new scripts are picked up as they come. The suites
# are independent (each starts its own envd on a free port), so they run
# side by side, TEST_JOBS at a time (default: twice the CPUs), the longest
# of the last run first. The two passes of one script never overlap, and a
# script with a "# tests: alone" line runs after the others, by itself.
#
# A third pass runs the aarch64 build (build/arm64/envd, make ARCH=arm64)
# under qemu-user (tests/arm64/envd) when both are there: the scripts listed
# in tests/arm64/suites (ARM64_ALL=1: every script but those of the static
# product alone, "# asan: skip", and those with an "# arm64: skip" line,
# which says why).
#
# The VM test (scripts/vm-test.sh) of the amd64 template is two suites, vm
# and vm-2, each booting the image and running part of tests/vm (see
# job_vm_amd64); where the aarch64 build and qemu-system-aarch64 are
# there, the arm64 template is another, vm-arm64, beside them
# (VM_ARM64_SUITES below: what of it make test runs). VM_TCG_THREAD=single
# (docs/vm.md) used less CPU under load, but with it a loaded fresh run saw
# the arm64 guest's clock 20 s ahead of where 30_pause expects it; the VMs
# keep a host thread per guest CPU until that is understood.
#
# Each suite's log is in build/test-logs/; the report ends with a table of
# every suite's wall time and CPU seconds, then the summary line.
set -uo pipefail
cd "$(dirname "$0")/.."

logdir=build/test-logs
resdir=$logdir/results
durations=$logdir/durations # "<suite> <seconds>" of the last run: the order of the next

# --- one suite, run as its own process: run-tests.sh job SUITE KIND ARGS... ---
# Writes $resdir/<suite with / as _>: "<passed> <failed> <seconds>" on the
# first line, then the line to print, then excerpts of the failures.

# Every limit below is a hang deadline, sized for a machine ten times
# slower than a loaded one (an integration suite takes 1-3 min there): a
# slow machine makes the run longer, never red. The waits inside the
# suites end on their events; HANG_S (tests/common.sh) bounds each one.
LIMIT_SUITE_S=1800 # one integration script, the SDK run, the fuzz run
LIMIT_UNIT_S=1800  # one unit-test binary
LIMIT_BENCH_S=1800 # the quick benchmark run
LIMIT_VM_S=14400   # the VM: image, boot and every tests/vm suite (VM_SUITE_S each)
# The arm64 VM (software emulation too; its SDK suite took 343 s where the
# amd64 one took 168): what make test runs of it. The SDK suites but the
# slowest tests, whose paths the arm64 build also runs under qemu-user
# (files_gzip, spine, process_framing) and the amd64 VM runs whole: gzip
# downloads of every shape (60 s there), a gzip download chasing a growing
# file, 10 commands at once and 10 in a row (33 and 26 s), and owners
# checked through the guest one path at a time (the other files tests go
# through the same download and write paths). Then PID 1, pause, port
# forwarding, cgroups. make vm-test ARCH=arm64 runs it all.
VM_ARM64_SUITES="tests/vm/10_sdk.sh tests/vm/20_pid1.sh tests/vm/30_pause.sh tests/vm/40_portfwd.sh tests/vm/50_cgroup.sh"
# Of the SDK suites, the arm64 VM leaves out trust.test.mjs and try.test.mjs:
# their commands are python3 servers and floods, and a try needs overlayfs,
# a module the kernel loads through kmod; the arm64 root has neither (see
# scripts/rootfs.sh). The amd64 VM runs both; what they drive is the same
# C on both architectures (their unit tests run under qemu-user too).
VM_ARM64_SDK_FILES="./files.test.mjs ./mastra.test.mjs ./process.test.mjs ./security.test.mjs ./session.test.mjs ./spine.test.mjs ./tools.test.mjs"
VM_ARM64_SDK_SKIP="gzip downloads decode in the SDK|file growing while it is read|many concurrent commands|many fast commands|owned by user, parents included"

# run_timed SECONDS CMD...: CMD under timeout, interruptible: a TERM or INT
# to the job reaches timeout, which passes it to the whole test.
run_timed() {
	local secs=$1
	shift
	timeout "$secs" "$@" &
	local t=$!
	trap 'kill -TERM $t 2>/dev/null; wait $t; exit 130' TERM INT
	wait $t
}

# fail_detail LOG RC LIMIT: for a failed suite, whether it ran out of time
# and where its log ended (the end of a run repeats it, so the tail of the
# output says what went wrong).
fail_detail() {
	local log=$1 rc=$2 limit=$3
	[ "$rc" -eq 124 ] && echo "TIMED OUT: still running after its hang deadline of $limit s"
	echo "--- the last lines of $log:"
	tail -n 15 "$log" 2>/dev/null | cut -c1-300
}

job_unit() { # job_unit BIN LOG [EMULATOR]
	local t=$1 log=$2 emu=${3:-} name line p f c rc
	name=$(basename "$t")
	local pre=()
	if [ -n "$emu" ]; then
		# Under qemu-user: the libraries from the sysroot (as -L would,
		# through a root of its own: scripts/qemu-root.sh), and
		# Criterion's workers through the emulator too
		# (tests/unit/emuexec.c).
		pre=(bash scripts/qemu-root.sh "$PWD/build/arm64/qemu-root" "$PWD/build/arm64/sysroot")
		ENVD_TEST_EMULATOR=$(command -v "$emu")
		export ENVD_TEST_EMULATOR
		# Signals 32 and 33 of this x86-64 host are its libc's own, and
		# qemu-user maps no guest signal onto them: if they come ignored
		# (make starts its recipes with glibc's posix_spawn, which leaves
		# them so) they stay ignored in every child the tests spawn,
		# whatever envd resets. Reset them with the raw rt_sigaction (13),
		# as libc refuses those two.
		# shellcheck disable=SC2016 # Perl code, not shell
		[ "$(uname -m)" = x86_64 ] &&
			pre+=(perl -e 'my $dfl = "\0" x 32; syscall(13, $_, $dfl, 0, 8) for 32, 33; exec {$ARGV[0]} @ARGV or die "$ARGV[0]: $!\n"' --)
	fi
	# shellcheck disable=SC2086
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_timed "$LIMIT_UNIT_S" "${pre[@]}" $emu "$t" -j2 >"$log" 2>&1
	rc=$?
	line=$(grep -a 'Synthesis:' "$log" | tail -n1)
	p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$line")
	f=$(sed -n 's/.*Failing: \([0-9]*\).*/\1/p' <<<"$line")
	c=$(sed -n 's/.*Crashing: \([0-9]*\).*/\1/p' <<<"$line")
	p=${p:-0}; f=$((${f:-0} + 0)); c=${c:-0}
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	R_P=$p R_F=$f
	R_LINE="unit${emu:+-arm64}  $name: $p passed, $f failed${c:+ ($c crashing)}"
	[ "$f" -ne 0 ] && grep -a -E '\[----\]|\[FAIL\]|ERROR|runtime error' "$log" | head -n 40
	[ "$f" -ne 0 ] && fail_detail "$log" "$rc" "$LIMIT_UNIT_S"
}

job_script() { # job_script SCRIPT BIN LABEL LOG
	local t=$1 bin=$2 label=$3 log=$4 name line p f rc
	name=$(basename "$t" .sh)
	ENVD_BIN=$bin run_timed "$LIMIT_SUITE_S" bash "$t" >"$log" 2>&1
	rc=$?
	line=$(grep -a -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
	p=$(sed -n 's/.*: \([0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	p=${p:-0}; f=${f:-0}
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	R_P=$p R_F=$f
	R_LINE="$label $name: $p passed, $f failed"
	[ "$f" -ne 0 ] && grep -a -E '^FAIL|error' "$log" | head -n 40
	[ "$f" -ne 0 ] && fail_detail "$log" "$rc" "$LIMIT_SUITE_S"
}

job_cmd() { # job_cmd SECONDS LABEL LOG CMD...: any script whose last count line is "... N passed, N failed"
	local secs=$1 label=$2 log=$3 line p f rc
	shift 3
	run_timed "$secs" "$@" >"$log" 2>&1
	rc=$?
	line=$(grep -a -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
	p=$(sed -n 's/.*[^0-9]\([0-9][0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	p=${p:-0}; f=${f:-0}
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	R_P=$p R_F=$f
	R_LINE="$label: $p passed, $f failed"
	[ "$f" -ne 0 ] && grep -a -E '^FAIL|error' "$log" | head -n 40
	[ "$f" -ne 0 ] && fail_detail "$log" "$rc" "$secs"
}

# The amd64 VM suites of the first VM; the second runs every other one
# (tests/vm/[0-9]*.sh not marked "# vm: opt-in"), so a new suite lands there.
VM_AMD64_FIRST="tests/vm/10_sdk.sh tests/vm/20_pid1.sh tests/vm/30_pause.sh tests/vm/40_portfwd.sh tests/vm/50_cgroup.sh tests/vm/90_changes.sh"
job_vm_amd64() { # job_vm_amd64 vm|vm-2 LOG
	local which=$1 log=$2 t list=
	if [ "$which" = vm ]; then
		list=$VM_AMD64_FIRST
	else
		for t in tests/vm/[0-9]*.sh; do
			[[ " $VM_AMD64_FIRST " == *" $t "* ]] && continue
			grep -q '^# vm: opt-in' "$t" && continue
			list+="${list:+ }$t"
		done
	fi
	if [ -z "$list" ]; then # (an empty VM_SUITES would mean all of them)
		R_P=0 R_F=0 R_LINE="$which: no suites left for it"
		return
	fi
	VM_TCG_THREAD=${VM_TCG_THREAD:-multi} VM_SUITES=$list VM_LOG_PREFIX=$which \
		job_cmd "$LIMIT_VM_S" "$which" "$log" bash scripts/vm-test.sh
}

job_vm_arm64() { # job_vm_arm64 LOG: the arm64 VM, the part of it make test runs
	ARCH=arm64 VM_TCG_THREAD=${VM_TCG_THREAD:-multi} VM_SUITES=$VM_ARM64_SUITES VM_SDK_SKIP=$VM_ARM64_SDK_SKIP \
		VM_SDK_FILES=$VM_ARM64_SDK_FILES \
		job_cmd "$LIMIT_VM_S" vm-arm64 "$1" bash scripts/vm-test.sh
}

job_sdk() { # job_sdk LOG
	local log=$1 p f rc
	if ! bash scripts/npm-setup.sh 2>"$log"; then
		R_P=0 R_F=1 R_LINE="sdk: $(tail -n1 "$log")"
		return
	fi
	ENVD_BIN=build/envd run_timed "$LIMIT_SUITE_S" bash tests/sdk/run.sh >"$log" 2>&1
	rc=$?
	p=$(grep -a -E '^# pass ' "$log" | tail -n1 | awk '{print $3}')
	f=$(grep -a -E '^# fail ' "$log" | tail -n1 | awk '{print $3}')
	p=${p:-0}; f=${f:-0}
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	R_P=$p R_F=$f
	R_LINE="sdk   e2b SDK tests: $p passed, $f failed"
	[ "$f" -ne 0 ] && grep -a -E '^not ok|# Subtest|Error|error:' "$log" | head -n 60
}

job_fuzz() { # job_fuzz LOG: a few seconds per libFuzzer target; make fuzz runs the long version
	local log=$1 line p f
	run_timed "$LIMIT_SUITE_S" bash scripts/fuzz.sh "${FUZZ_TEST_SECONDS:-3}" >"$log" 2>&1
	line=$(grep -a -E '^fuzz: [0-9]+ passed' "$log" | tail -n1)
	p=$(sed -n 's/^fuzz: \([0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	p=${p:-0}; f=${f:-1}
	R_P=$p R_F=$f
	R_LINE=$(grep -a '^fuzz fuzz_' "$log")
}

job_bench() { # job_bench LOG: the quick benchmark run checks that the benchmark still works
	local log=$1 rc
	run_timed "$LIMIT_BENCH_S" bash scripts/bench.sh --quick >"$log" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && [ -s bench/results/latest.json ]; then
		R_P=1 R_F=0 R_LINE="bench quick run: 1 passed, 0 failed ($(tail -n1 "$log"))"
	else
		R_P=0 R_F=1 R_LINE="bench quick run: 0 passed, 1 failed (exit $rc, see $log)"
	fi
}

if [ "${1:-}" = job ]; then
	suite=$2 kind=$3
	shift 3
	t0=$(date +%s%N)
	R_P=0 R_F=1 R_LINE="$suite: did not report"
	res=$resdir/${suite//\//_}
	"job_$kind" "$@" >"$res.excerpt"
	ms=$((($(date +%s%N) - t0) / 1000000))
	# CPU seconds (user + system) of everything the suite ran and reaped:
	# what a suite costs a busy machine, where wall time also counts waits.
	# (times in this shell: in a pipe or $() it would count the subshell's)
	times >"$res.times"
	cpu=$(awk 'NR == 2 { n = split($0, f, " "); t = 0
		for (i = 1; i <= n; i++) { split(f[i], a, "m"); t += a[1] * 60 + a[2] }
		printf "%.1f", t }' "$res.times")
	rm -f "$res.times"
	{
		echo "$R_P $R_F $((ms / 1000)).$((ms % 1000 / 100)) ${cpu:-?}"
		echo "$R_LINE"
		cat "$res.excerpt"
	} >"$res.tmp"
	rm -f "$res.excerpt"
	mv "$res.tmp" "$res"
	exit 0
fi

# --- the run ---
mode=${1:-all}
case $mode in unit | unit-arm64 | all) ;; *) echo "usage: $0 unit|unit-arm64|all" >&2; exit 2 ;; esac
mkdir -p "$resdir"
rm -f "$resdir"/*
ncpu=$(nproc 2>/dev/null || echo 2)
jobs=${TEST_JOBS:-$((ncpu * 2))}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

# The suites: name, kind and arguments, conflict key, alone (1 or 0).
S_NAME=() S_ARGS=() S_KEY=() S_ALONE=()
add_suite() { S_NAME+=("$1"); S_ARGS+=("$2"); S_KEY+=("$3"); S_ALONE+=("${4:-0}"); }

if [ "$mode" = all ]; then
	# The VM suites are listed first: with no timings yet (a fresh clone)
	# the order below decides, and the longest must not start last. The
	# amd64 template's suites go to two VMs side by side, vm and vm-2 (the
	# same image, built once): on one VM they were the longest suite of
	# the run by far.
	if [ -f scripts/vm-test.sh ]; then
		add_suite vm "vm_amd64 vm $logdir/vm.log" vm
		add_suite vm-2 "vm_amd64 vm-2 $logdir/vm-2.log" vm-2
	fi
	# The arm64 template beside it (its own image, run directory, port and
	# logs: build/arm64/vm, vm-arm64-*), where the aarch64 build and
	# qemu-system-aarch64 are there.
	[ -x build/arm64/envd ] && command -v qemu-system-aarch64 >/dev/null &&
		add_suite vm-arm64 "vm_arm64 $logdir/vm-arm64.log" vm-arm64
fi
if [ "$mode" != unit-arm64 ]; then
	for t in build/asan/tests/*_test; do
		[ -x "$t" ] || continue
		n=$(basename "$t")
		add_suite "unit/$n" "unit $t $logdir/$n.log" "unit/$n"
	done
fi
if [ "$mode" != unit ] && command -v qemu-aarch64-static >/dev/null; then
	# Made once, before the jobs (scripts/qemu-root.sh).
	rm -rf build/arm64/qemu-root
	[ -d build/arm64/sysroot ] && bash scripts/qemu-root.sh "$PWD/build/arm64/qemu-root" "$PWD/build/arm64/sysroot" true
	for t in build/arm64/tests/*_test; do
		[ -x "$t" ] || continue
		n=$(basename "$t")
		add_suite "unit-arm64/$n" "unit $t $logdir/arm64-$n.log qemu-aarch64-static" "unit-arm64/$n"
	done
fi
if [ "$mode" = all ]; then
	labels="static asan"
	[ -x build/arm64/envd ] && command -v qemu-aarch64-static >/dev/null && labels+=" arm64"
	for label in $labels; do
		bin=build/envd
		[ $label = asan ] && bin=build/asan/envd
		[ $label = arm64 ] && bin=tests/arm64/envd
		for t in tests/integration/*.sh; do
			[ -f "$t" ] || continue
			case $t in *_lib.sh) continue ;; esac # sourced helpers, not tests
			# Scripts that only make sense for the static product (a rootfs)
			# or do not run envd at all say so with a "# asan: skip" line.
			if [ $label != static ] && grep -q '^# asan: skip' "$t"; then
				continue
			fi
			if [ $label = arm64 ]; then
				grep -q '^# arm64: skip' "$t" && continue
				[ "${ARM64_ALL:-0}" = 1 ] || grep -qx "$(basename "$t")" tests/arm64/suites || continue
			fi
			n=$(basename "$t" .sh)
			alone=0
			grep -q '^# tests: alone' "$t" && alone=1
			add_suite "$label/$n" "script $t $bin $label $logdir/$label-$n.log" "script/$n" $alone
		done
	done
	ls tests/sdk/*.test.mjs >/dev/null 2>&1 && add_suite sdk "sdk $logdir/sdk.log" sdk
	ls build/fuzz/fuzz_* >/dev/null 2>&1 && add_suite fuzz "fuzz $logdir/fuzz.log" fuzz
	# Always: a missing client is a failure of the run, not a skipped check.
	add_suite bench "bench $logdir/bench-quick.log" bench
fi

# Longest first, by the last run's times; suites never timed count as long.
last_secs() { awk -v s="$1" '$1 == s {print int($2); f = 1} END {if (!f) print 100000}' "$durations" 2>/dev/null || echo 100000; }
queue=()
alone_q=()
while read -r _ i; do
	if [ "${S_ALONE[$i]}" = 1 ]; then alone_q+=("$i"); else queue+=("$i"); fi
done < <(for i in "${!S_NAME[@]}"; do echo "$(last_secs "${S_NAME[$i]}") $i"; done | sort -s -k1,1nr)

declare -A pid_suite=() busy_key=()
passed=0
failed=0
failures=()
wall0=$(date +%s%N)

start_suite() { # start_suite INDEX
	local i=$1
	# Its own session: an interrupt is passed on to every job explicitly.
	# shellcheck disable=SC2086
	setsid bash "$0" job "${S_NAME[$i]}" ${S_ARGS[$i]} </dev/null &
	pid_suite[$!]=$i
	busy_key[${S_KEY[$i]}]=1
}

collect() { # collect PID: account for a finished suite
	local pid=$1 i res p f secs
	i=${pid_suite[$pid]}
	unset "pid_suite[$pid]"
	unset "busy_key[${S_KEY[$i]}]"
	res=$resdir/${S_NAME[$i]//\//_}
	if [ -s "$res" ]; then
		read -r p f secs _ <"$res"
	else
		p=0 f=1 secs=?
		printf '0 1 ?\n%s: no result\n' "${S_NAME[$i]}" >"$res"
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	sed -n '2,$p' "$res"
	[ "$f" -ne 0 ] && failures+=("${S_NAME[$i]}")
}

stop_all() {
	trap - INT TERM
	echo "interrupted: stopping ${#pid_suite[@]} running suites" >&2
	for pid in "${!pid_suite[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	wait
	exit 130
}
trap stop_all INT TERM

run_pool() { # run_pool MAXJOBS INDEX...: run suites, at most MAXJOBS at a time
	local max=$1 k i started pid
	shift
	local pending=("$@")
	while [ ${#pending[@]} -gt 0 ] || [ ${#pid_suite[@]} -gt 0 ]; do
		started=1
		while [ $started = 1 ]; do
			started=0
			for k in "${!pending[@]}"; do
				[ ${#pid_suite[@]} -ge "$max" ] && break
				i=${pending[$k]}
				[ -n "${busy_key[${S_KEY[$i]}]:-}" ] && continue
				start_suite "$i"
				unset "pending[$k]"
				started=1
			done
			pending=("${pending[@]}")
		done
		if [ ${#pid_suite[@]} -gt 0 ]; then
			pid=
			wait -n -p pid "${!pid_suite[@]}"
			[ -n "$pid" ] && [ -n "${pid_suite[$pid]:-}" ] && collect "$pid"
		fi
	done
}

echo "running ${#S_NAME[@]} suites, $jobs at a time (TEST_JOBS)"
run_pool "$jobs" "${queue[@]}"
[ ${#alone_q[@]} -gt 0 ] && run_pool 1 "${alone_q[@]}"
wall=$((($(date +%s%N) - wall0) / 1000000000))

# The report: each suite's wall time, the slowest first; then the summary.
: >"$durations.new"
echo
printf '%-34s %8s %8s %9s %8s\n' suite passed failed seconds cpu
for i in "${!S_NAME[@]}"; do
	res=$resdir/${S_NAME[$i]//\//_}
	read -r p f secs cpu <"$res" 2>/dev/null || { p=0 f=1 secs=? cpu=?; }
	echo "${S_NAME[$i]} $secs" >>"$durations.new"
	printf '%-34s %8s %8s %9s %8s\n' "${S_NAME[$i]}" "$p" "$f" "$secs" "${cpu:-?}"
done | sort -k4,4nr
mv "$durations.new" "$durations"
cpu_all=$(awk 'FNR == 1 && NF == 4 { t += $4 } END { printf "%.0f", t }' "$resdir"/* 2>/dev/null)
printf '%-34s %8s %8s %9s %8s\n' "all (wall, $jobs at a time)" "$passed" "$failed" "$wall" "$cpu_all"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#failures[@]} -gt 0 ]; then
	# Again at the very end, where a log that keeps only the tail has it.
	for n in "${failures[@]}"; do
		echo "=== $n"
		sed -n '2,$p' "$resdir/${n//\//_}" | head -n 60
	done
	echo "failed: ${failures[*]} (logs in $logdir)"
fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
