#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long forms of the load and fault tests (make soak): 1000 concurrent
# streaming processes and 10 000 idle connections held for 60 s, 100 000
# mixed requests with an fd count before and after, hostile input, and a
# longer pause. Loopback only; every loop is bounded.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
LOAD_PROCS=1000 LOAD_IDLE=10000 LOAD_SECS=60 LOAD_REQS=100000 LOAD_EVERY=1 bash tests/integration/load.sh || rc=1
bash tests/integration/hostile.sh || rc=1
PAUSE_S=30 bash tests/integration/pause.sh || rc=1
exit $rc
