#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Output kept for reconnect: Connect.replayFrom (field 1000) replays the
# retained ring from an offset, events carry offsets, evicted data is
# reported as a gap, and the default Connect stays live-only.
. "$(dirname "$0")/process_lib.sh"
start_envd -output-buffer 262144

# Output produced with nobody attached is kept. Three chunks, each written
# once envd has read the one before (seen on the first stream), so the
# chunk boundaries do not depend on the machine's speed; the first stream
# goes away before the last.
G=$TMP/go
stream_bg "$TMP/s.out" Start "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",\"printf abc; while [ ! -e $G.1 ]; do sleep 0.02; done; printf def >&2; while [ ! -e $G.2 ]; do sleep 0.02; done; printf ghi; sleep 3600\"]},\"stdin\":false,\"tag\":\"replay\"}"
wait_for 60 has "$TMP/s.out" '"stdout": "abc"'
touch "$G.1"
wait_for 60 has "$TMP/s.out" '"stderr": "def"'
kill "$STREAM_PID"
wait "$STREAM_JOB"
pid=$(pid_in "$TMP/s.out")
check_re "started" '^[0-9]+$' "$pid"
touch "$G.2"
ghi_out() { stream_until "$TMP/r.out" '"stdout": "ghi"' "$@"; out=$(cat "$TMP/r.out"); }

ghi_out Connect "{\"process\":{\"pid\":$pid},\"replayFrom\":\"0\"}"
check "replay from 0: every chunk with its stream and offset" \
	'start abc@0 stderr:def@3 ghi@6' \
	"$("$PY" -c '
import sys, json
r = []
for l in sys.stdin:
    f, j = l.split(" ", 1); e = json.loads(j).get("event", {})
    if "start" in e: r.append("start")
    if "data" in e:
        d = e["data"]; k = [x for x in ("stdout","stderr","pty") if x in d][0]
        r.append(("" if k == "stdout" else k + ":") + d[k] + "@" + d.get("offset", "0"))
print(" ".join(r))' <<<"$out")"

ghi_out Connect "{\"process\":{\"tag\":\"replay\"},\"replayFrom\":\"4\"}"
check_re "replay from the middle of a chunk" '"offset": "4", "stderr": "ef"' "$out"
check_re "then the rest" '"offset": "6", "stdout": "ghi"' "$out"

SETTLE=0.5 stream_until "$TMP/r.out" '"start"' Connect "{\"process\":{\"pid\":$pid},\"replay_from\":100}"
out=$(cat "$TMP/r.out")
check "replay beyond the end is live-only" "start" "$(kinds <<<"$out")"

SETTLE=0.5 stream_until "$TMP/r.out" '"start"' Connect "{\"process\":{\"pid\":$pid}}"
out=$(cat "$TMP/r.out")
check "default Connect is live only (SDK compatible)" "start" "$(kinds <<<"$out")"
unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}" >/dev/null

# More than the ring holds: the evicted part is a gap, the rest is exact.
stream_until "$TMP/big.out" 'END"' Start '{"process":{"cmd":"sh","args":["-c","head -c 1000000 /dev/zero | tr \"\\0\" x; printf END; sleep 3600"]},"stdin":false}'
pid=$(pid_in "$TMP/big.out")
stream_until "$TMP/gap.out" 'END"' Connect "{\"process\":{\"pid\":$pid},\"replayFrom\":\"0\"}"
res=$("$PY" -c '
import sys, json
gap = None; n = 0; first = None; contiguous = True; tail = ""
for l in open(sys.argv[1]):
    f, j = l.split(" ", 1); e = json.loads(j).get("event", {})
    if "gap" in e:
        gap = (int(e["gap"].get("from", 0)), int(e["gap"]["to"]))
    if "data" in e:
        off = int(e["data"].get("offset", 0))
        if first is None: first = off
        elif off != first + n: contiguous = False
        n += len(e["data"]["stdout"]); tail = (tail + e["data"]["stdout"])[-3:]
print(gap[0], "gap-to-first-data" if gap and gap[1] == first else "bad-gap", first + n, contiguous, tail)' "$TMP/gap.out")
check "gap from 0 to the first retained byte, then contiguous data to the end" \
	"0 gap-to-first-data 1000003 True END" "$res"
check_re "retained at least half the ring" '^0 ' "$res"
unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}" >/dev/null

# After exit: the ring and the end event stay available for 30 s.
out=$(stream Start '{"process":{"cmd":"sh","args":["-c","echo retained; exit 5"]},"stdin":false}')
pid=$(grep -o '"pid": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
out=$(stream Connect "{\"process\":{\"pid\":$pid},\"replayFrom\":\"0\"}")
check "replay after exit: output, then the retained end" "start data end eos" "$(kinds <<<"$out")"
check_re "with the exit code" '"exitCode": 5' "$out"
out=$(stream Connect "{\"process\":{\"pid\":$pid}}")
check "plain Connect after exit: start and end" "start end eos" "$(kinds <<<"$out")"
check "exited process is not listed" "" "$(unary List '{}' | grep -o "\"pid\":$pid")"
summary
