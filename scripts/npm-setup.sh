#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the test clients of tests/sdk (the official e2b SDK and what it
# pulls in) with `npm ci`, once per package-lock.json. Every suite that
# needs them calls this; they may do so side by side, so one installs and
# the others wait. A failed install leaves no node_modules behind (a
# half-filled one would pass a "node_modules/e2b exists" test and break
# the next run) and says in one line what npm refused.
set -uo pipefail
cd "$(dirname "$0")/.."

dir=tests/sdk
stamp=$dir/node_modules/.envd-lock
mkdir -p build
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && exit 0
exec 9>build/.npm-setup.lock
flock -w 1800 9 || { echo "npm-setup: another install of $dir has held its lock for 30 min" >&2; exit 1; }
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && exit 0
command -v npm >/dev/null || { echo "npm-setup: npm is missing (scripts/setup.sh installs it)" >&2; exit 1; }
log=build/npm-ci.log
rm -rf "$dir/node_modules"
if (cd "$dir" && npm ci --no-audit --no-fund) >"$log" 2>&1; then
	echo "$want" >"$stamp"
	exit 0
fi
rm -rf "$dir/node_modules"
why=$(grep -m1 -E '^npm (ERR!|error) (code|404|E[A-Z]+)|^npm (ERR!|error) .*(404|ENOTFOUND|ETIMEDOUT|EINTEGRITY|ECONNREFUSED)' "$log" |
	sed 's/^npm \(ERR!\|error\) //')
[ -n "$why" ] || why=$(grep -m1 -E '^npm (ERR!|error)' "$log" | sed 's/^npm \(ERR!\|error\) //')
echo "npm-setup: npm ci in $dir failed: ${why:-see $log} (log: $log)" >&2
exit 1
