#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make run: start build/envd on 0.0.0.0:49983 (dual-stack) and, once it
# answers, print two first requests to try. Ctrl-C stops it.
#   run.sh [ENVD FLAGS...]
set -u
cd "$(dirname "$0")/.."
port=49983
build/envd -isnotfc -port "$port" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' INT TERM
for _ in $(seq 1 100); do
	kill -0 "$pid" 2>/dev/null || break
	if curl -sf -o /dev/null "http://127.0.0.1:$port/health"; then
		cat >&2 <<EOT
try:  curl -i http://localhost:$port/health
      printf '\0\0\0\0\x3a{"process":{"cmd":"/bin/echo","args":["hello from envd"]}}' |
        curl -s --data-binary @- -H 'Content-Type: application/connect+json' \\
          http://localhost:$port/process.Process/Start | tr -c '[:print:]' '\n' | grep -o '{.*'
      (a Connect JSON stream: the start event, the output in base64, the end event)
EOT
		break
	fi
	sleep 0.1
done
wait "$pid"
rc=$?
# The first wait returns when a trapped signal arrives: wait for the exit.
kill -0 "$pid" 2>/dev/null && wait "$pid" && rc=$?
exit $rc
