#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Run one command in the sandbox through envd's process API, like the SDK's
commands.run, with nothing but the Python standard library.

    vm-exec.py [-u USER] [-t SECONDS] [--tag TAG] [--background | --events [--keepalive S]]
               [--changes FILE] [--try DIRS [--try-diff FILE]] [--pid-file FILE] COMMAND

envd is found at $VM_URL (default http://127.0.0.1:49983); $VM_TOKEN, when
set, is sent as X-Access-Token. The command runs as `bash -l -c COMMAND`
(as root unless -u says otherwise); its stdout and stderr are copied to
ours and its exit status becomes ours (128+N for a signal). With
--background the pid is printed and the command is left running (--tag
gives it a tag to find it by). With
--events every event is printed as it arrives, one line each: the host's
wall-clock time, then the event as JSON (output decoded to text); with
--keepalive S envd sends a keep-alive every S seconds of silence. With
--changes FILE the command is started with trackChanges and its end
event's changes (docs/protocol.md, "Changes") are written to FILE as JSON.
With --try the command runs on a try layer over DIRS (colon-separated,
docs/try.md), and with --try-diff FILE its end event's try diff is written
to FILE as JSON. --pid-file FILE gets the command's pid once it started.
"""
import argparse
import base64
import http.client
import json
import os
import struct
import sys
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("-u", "--user", default="root")
ap.add_argument("-t", "--timeout", type=float, default=120)
ap.add_argument("--background", action="store_true")
ap.add_argument("--tag")
ap.add_argument("--events", action="store_true")
ap.add_argument("--keepalive", type=int)
ap.add_argument("--changes")
ap.add_argument("--try", dest="try_dirs")
ap.add_argument("--try-diff")
ap.add_argument("--pid-file")
ap.add_argument("command")
a = ap.parse_args()

url = urllib.parse.urlsplit(os.environ.get("VM_URL", "http://127.0.0.1:49983"))
req = {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", a.command]}, "stdin": False}
if a.tag:
    req["tag"] = a.tag
if a.changes:
    req["trackChanges"] = True
if a.try_dirs is not None:
    req["tryRun"] = {"paths": [d for d in a.try_dirs.split(":") if d]}
body = json.dumps(req).encode()
headers = {
    "Content-Type": "application/connect+json",
    "Connect-Protocol-Version": "1",
    "Authorization": "Basic " + base64.b64encode((a.user + ":").encode()).decode(),
}
if a.keepalive:
    headers["Keepalive-Ping-Interval"] = str(a.keepalive)
if os.environ.get("VM_TOKEN"):
    headers["X-Access-Token"] = os.environ["VM_TOKEN"]

conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=a.timeout)
conn.request("POST", "/process.Process/Start", struct.pack(">BI", 0, len(body)) + body, headers)
res = conn.getresponse()
if res.status != 200:
    sys.stderr.write("vm-exec: HTTP %d: %s\n" % (res.status, res.read().decode(errors="replace")))
    sys.exit(125)

status = 125
while True:
    try:
        head = res.read(5)
    except (http.client.HTTPException, OSError) as e:
        sys.stderr.write("vm-exec: connection lost: %r\n" % e)
        break
    if len(head) < 5:
        sys.stderr.write("vm-exec: stream ended without an end event\n")
        break
    flags, n = struct.unpack(">BI", head)
    msg = json.loads(res.read(n) or b"{}")
    if flags & 2:  # end of stream: {} or {"error": ...}
        if msg.get("error"):
            sys.stderr.write("vm-exec: %s\n" % json.dumps(msg["error"]))
        break
    ev = msg.get("event", {})
    if a.events:
        data = ev.get("data")
        if data:
            for k in ("stdout", "stderr", "pty"):
                if k in data:
                    data[k] = base64.b64decode(data[k]).decode(errors="replace")
        print("%.3f %s" % (time.time(), json.dumps(ev, sort_keys=True)), flush=True)
    if "start" in ev and a.pid_file:
        with open(a.pid_file, "w") as f:
            f.write("%s\n" % ev["start"].get("pid"))
    if "start" in ev and a.background:
        print(ev["start"].get("pid"))
        sys.exit(0)
    data = ev.get("data", {})
    for key, out in (("stdout", sys.stdout.buffer), ("stderr", sys.stderr.buffer)):
        if key in data and not a.events:
            out.write(base64.b64decode(data[key]))
            out.flush()
    if "end" in ev:
        end = ev["end"]
        if a.changes:
            with open(a.changes, "w") as f:
                json.dump(end.get("changes", {}), f)
        if a.try_diff:
            with open(a.try_diff, "w") as f:
                json.dump(end.get("tryDiff", {}), f)
        if end.get("exited"):
            status = end.get("exitCode", 0) & 0xFF
        else:
            # killed by a signal: "signal: killed"
            status = 128 + 9 if "killed" in end.get("status", "") else 128
sys.exit(status)
