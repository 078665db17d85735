#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start envd as the platform would for the SDK (default user "user", home
# /home/user) and run every tests/sdk/*.test.mjs with node's test runner
# against it through E2B_SANDBOX_URL, in SDK debug mode.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
# -gzip-always: over loopback envd would answer identity, and the SDK's
# gzip decoder must meet every stream envd builds (the choice itself is
# tested over a shaped link in tests/integration/files_gzip.sh).
envd_start -default-user user -gzip-always || exit 1
export E2B_DEBUG=true
export E2B_SANDBOX_URL=$ENVD_URL
export ENVD_URL ENVD_PORT
cd tests/sdk
node --test --test-concurrency=1 ${SDK_TESTS:-./*.test.mjs}
rc=$?
cd ../..
envd_alive || { echo "envd died during the SDK tests"; rc=1; }
exit $rc
