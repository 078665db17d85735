#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Commands an agent can trust (docs/protocol.md): a Start retried 20 times
# with one idempotency key (header, field, or ENVD_IDEMPOTENCY_KEY in the
# envs) spawns once, another request with the key is already_exists, keys
# are per user and shown by List; SendInput and StreamInput with offsets
# write each byte once and refuse a gap; WaitFor on a port that listens
# 2 s later, on an HTTP status, on a log line (written before or after),
# on an exit and on a path, and its timeouts say what they saw last; a
# 50 MB output with a 4 KiB + 16 KiB budget sends at most 24 KiB and one
# marker, and the middle the ring holds is read back by offset; a kill at
# the deadline, a SendSignal and a CloseSession say so in the end event.
# Across a crash and a live upgrade: process_trust_restart.sh.
. "$(dirname "$0")/process_lib.sh"
start_envd

"$PY" "$ROOT/tests/integration/process_trust_probe.py" main "http://127.0.0.1:$PORT" "$TMP" >"$TMP/out" 2>&1
cat "$TMP/out"
PASS=$((PASS + $(grep -c '^ok ' "$TMP/out")))
FAIL=$((FAIL + $(grep -c '^FAIL ' "$TMP/out")))
grep -q '^Traceback' "$TMP/out" && nok "the probe ran to its end" "$(tail -3 "$TMP/out")"
check_re "envd still answers" '^204$' "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")"
summary
