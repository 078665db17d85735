#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole suite (scripts/run-tests.sh all) while CPU-burning loops run
# (TEST_LOAD_BURNERS, default 2): the tests must hold on a busy machine.
# The loops are stopped afterwards, also on an interrupt or a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${TEST_LOAD_BURNERS:-2}
burners=()
stop_burners() {
	for p in "${burners[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${burners[@]}"; do wait "$p" 2>/dev/null; done
	burners=()
}
trap stop_burners EXIT
trap 'stop_burners; exit 130' INT TERM
for _ in $(seq 1 "$n"); do
	bash -c 'while :; do :; done' &
	burners+=($!)
done
echo "test-under-load: $n CPU-burning loops running (pids ${burners[*]})"
bash scripts/run-tests.sh all &
runner=$!
trap 'kill -TERM $runner 2>/dev/null; wait $runner; stop_burners; exit 130' INT TERM
wait $runner
rc=$?
stop_burners
exit $rc
