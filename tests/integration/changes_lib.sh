# SPDX-License-Identifier: Apache-2.0
# Helpers of the change-journal suites (sourced after process_lib.sh):
# B is envd's base URL, W a scratch directory; H (an array, may be empty)
# holds extra curl arguments, such as an access-token header.
#
#   changes_rpc JSON               the Changes RPC (Connect JSON): "<status> <body>"
#   token                          a checkpoint for now
#   all_since TOKEN PREFIX [JSON]  every change since TOKEN under PREFIX (all
#                                  pages; JSON: extra request fields) as lines
#                                  "TYPE PATH EVENTS ATTRIBUTION", then "resync=BOOL"
#   shows TOKEN PREFIX REGEX       a line of all_since matches REGEX ($W/last keeps it)
#   count_since TOKEN PREFIX REGEX how many lines match
#   resyncs TOKEN PREFIX           the answer says resync
changes_rpc() {
	curl -s --max-time 120 ${H[@]+"${H[@]}"} -X POST "$B/filesystem.Filesystem/Changes" \
		-H 'Content-Type: application/json' -d "$1" -w ' %{http_code}' |
		awk '{code=$NF; $NF=""; sub(/ $/,""); print code, $0}'
}
token() { changes_rpc '{}' | cut -d' ' -f2- | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["next"])'; }
all_since() {
	"$PY" - "$B" "$1" "$2" "${3:-}" <<'PY'
import json, sys, urllib.request
base, since, prefix, extra = sys.argv[1:5]
req = {"since": since, "path": prefix, "limit": 5000}
if extra:
    req.update(json.loads(extra))
resync = False
while True:
    r = urllib.request.Request(base + "/filesystem.Filesystem/Changes", data=json.dumps(req).encode(),
                               headers={"Content-Type": "application/json"})
    m = json.load(urllib.request.urlopen(r, timeout=120))
    resync = resync or m.get("resync", False)
    for c in m.get("changes", []):
        print(c.get("type", "").replace("CHANGE_TYPE_", ""), c["path"],
              ",".join(e.replace("EVENT_TYPE_", "") for e in c.get("events", [])), c.get("attribution", "-"))
    if not m.get("more"):
        break
    req["since"] = m["next"]
print("resync=%s" % str(resync).lower())
PY
}
shows() { all_since "$1" "$2" >"$W/last" && grep -qE "$3" "$W/last"; }
count_since() { all_since "$1" "$2" | grep -cE "$3"; }
resyncs() { all_since "$1" "$2" | tail -1 | grep -q 'resync=true'; }
