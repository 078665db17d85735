#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Boot the VM image N times (default 3) and print one JSON line with the
# best and median times from QEMU's start to envd's first /health 204 and
# to the first command's result, as scripts/bench.sh records them:
#   {"boots":N,"accel":"tcg","health_ms":{"min":..,"p50":..},"command_ms":{...},"errors":E}
# Needs the image (make vm-image); each boot is powered off and removed.
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-3}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
RUNS=build/vm/runs
health=()
command=()
errors=0
accel=

for i in $(seq 1 "$N"); do
	run=$PWD/$RUNS/boot-$$-$i
	mkdir -p "$run"
	port=$((20000 + RANDOM % 12000))
	VM_PORT=$port VM_RUN_DIR=$run VM_PARENT_PID=$$ bash scripts/vm-run.sh >"$run.log" 2>&1 &
	rp=$!
	for _ in $(seq 1 2400); do
		[ -s "$run/env" ] && break
		kill -0 "$rp" 2>/dev/null || break
		sleep 0.05
	done
	if [ -s "$run/env" ]; then
		. "$run/env"
		accel=$VM_ACCEL
		if [ "$(VM_URL=$VM_URL "$PY" scripts/vm-exec.py 'echo ok' 2>/dev/null)" = ok ]; then
			health+=("$VM_BOOT_MS")
			command+=("$(($(date +%s%3N) - VM_T0_MS))")
		else
			errors=$((errors + 1))
		fi
	else
		errors=$((errors + 1))
	fi
	kill -TERM "$rp" 2>/dev/null
	wait "$rp" 2>/dev/null
	rm -rf "$run" "$run.log"
done

"$PY" - "$N" "${accel:-none}" "$errors" "${health[*]:-}" "${command[*]:-}" <<'EOF'
import json, statistics, sys
n, accel, errors, h, c = sys.argv[1:6]
def stats(s):
    v = sorted(int(x) for x in s.split())
    return {"min": v[0], "p50": int(statistics.median(v))} if v else None
print(json.dumps({"boots": int(n), "accel": accel, "health_ms": stats(h), "command_ms": stats(c),
                  "errors": int(errors)}))
EOF
