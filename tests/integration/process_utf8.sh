#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PTY output events hold whole UTF-8 characters (docs/protocol.md, "Output,
# subscribers and the end"): a terminal program writing multi-byte text in
# odd-sized pieces is read at arbitrary byte positions, yet every pty data
# event decodes on its own, and together they are the exact output.
. "$(dirname "$0")/process_lib.sh"

start_envd

# 3000 writes of 37 x (é € 😀) + "x": 1 002 000 bytes, cut wherever the
# terminal and the reads happen to cut them.
req='{"process":{"cmd":"/usr/bin/python3","args":["-c","import os\nfor i in range(3000):\n  os.write(1, (\"\\u00e9\\u20ac\\U0001F600\"*37 + \"x\").encode())\n"]},"pty":{"size":{"cols":80,"rows":24}}}'
frame "$req" | curl -s -N --max-time "$HANG_S" -X POST "$(url Start)" \
	-H 'Content-Type: application/connect+json' -H 'Connect-Protocol-Version: 1' \
	--data-binary @- >"$TMP/out.bin"

res=$("$PY" - "$TMP/out.bin" <<'PY'
import sys, struct, json, base64
d = open(sys.argv[1], "rb").read()
i = events = split = 0
joined = b""
end = "-"
while i + 5 <= len(d):
    n = struct.unpack(">I", d[i + 1:i + 5])[0]
    m = json.loads(d[i + 5:i + 5 + n])
    i += 5 + n
    e = m.get("event", {})
    if "end" in e:
        end = e["end"].get("status", "-")
    if "data" in e and "pty" in e["data"]:
        b = base64.b64decode(e["data"]["pty"])
        events += 1
        joined += b
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            split += 1
want = ("\u00e9\u20ac\U0001F600" * 37 + "x").encode() * 3000
exact = joined == want  # no newlines in the output: the terminal adds nothing
print(f"events={events} split={split} exact={exact} end={end}")
PY
)
check_re "the output arrived in several events" '^events=([2-9]|[1-9][0-9]+) ' "$res"
check_re "no event splits a character" ' split=0 ' "$res"
check_re "the events join to the exact output" ' exact=True ' "$res"
check_re "the stream ends with the exit status" ' end=exit status 0$' "$res"

summary
