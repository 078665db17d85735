#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what `make bench` needs beyond `make setup`, if missing: the anchor
# servers (nginx for HTTP/1.1, nghttpd for h2c), the h2load client, and the
# e2b SDK's node modules. Idempotent and quiet when nothing is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(nginx nghttp2-client nghttp2-server curl python3 procps coreutils gzip)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bench-setup: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# The package's own service is not wanted: the bench starts its own nginx.
	if command -v systemctl >/dev/null 2>&1; then systemctl disable --now nginx >/dev/null 2>&1 || true; fi
	if [ -f /run/nginx.pid ]; then kill "$(cat /run/nginx.pid)" 2>/dev/null || true; fi
fi

bash scripts/npm-setup.sh || echo "bench-setup: SDK benchmarks will be skipped" >&2
exit 0
