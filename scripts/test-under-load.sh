#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole suite (scripts/run-tests.sh all) while CPU-burning loops run
# (TEST_LOAD_BURNERS, default 2): the tests must hold on a busy machine.
# The loops are stopped afterwards, also on an interrupt or a failure.
#
#   test-under-load.sh            the suite of this checkout, already built
#   test-under-load.sh --fresh    what a newcomer does: clone this checkout's
#                                 HEAD into a temporary directory and run its
#                                 first `make test` there (libraries from
#                                 their sources, the rootfs, the VM image,
#                                 npm), under the same load. The clone is
#                                 kept when the run fails (its logs are in
#                                 its build/test-logs), else removed.
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
if [ "${1:-}" = --fresh ]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/envd-fresh.XXXXXX")
	git clone -q "$PWD" "$dir/envd" || { echo "test-under-load: cannot clone $PWD" >&2; exit 1; }
	echo "test-under-load: fresh clone of $(git rev-parse --short HEAD) in $dir/envd"
	start=$SECONDS
	(cd "$dir/envd" && exec make test) &
	runner=$!
	trap 'kill -TERM $runner 2>/dev/null; wait $runner; stop_burners; exit 130' INT TERM
	wait $runner
	rc=$?
	stop_burners
	echo "test-under-load: fresh make test took $((SECONDS - start)) s, exit $rc"
	if [ $rc -eq 0 ]; then rm -rf "$dir"; else echo "test-under-load: the clone is kept: $dir/envd" >&2; fi
	exit $rc
fi
bash scripts/run-tests.sh all &
runner=$!
trap 'kill -TERM $runner 2>/dev/null; wait $runner; stop_burners; exit 130' INT TERM
wait $runner
rc=$?
stop_burners
exit $rc
