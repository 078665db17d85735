# SPDX-License-Identifier: Apache-2.0
"""Turns the raw lines of scripts/bench.sh into bench/results/*.json and a table.

  report.py h2load < h2load-output          one JSON line with h2load's figures
  report.py report RAW OUT [--quick 0|1] [--elapsed S] [--mode-flag F] [--envd BIN]
  report.py markdown RESULT.json           the figures as a Markdown table

Every figure is paired with its anchor measured in the same run; the ratio
is envd / anchor. Where an entry was measured in several rounds, each side's
best round is used (the least disturbed by other load on a shared machine).
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys


def parse_h2load(text):
    out = {"errors": 1}
    m = re.search(r"finished in ([\d.]+)(ms|s), ([\d.]+) req/s", text)
    if not m:
        return out
    secs = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    out = {"seconds": secs, "rps": float(m.group(3))}
    m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
    if m:
        total, done, ok = int(m.group(1)), int(m.group(2)), int(m.group(3))
        out.update(requests=total, succeeded=ok)
    m = re.search(r"status codes: (\d+) 2xx", text)
    ok2xx = int(m.group(1)) if m else 0
    out["errors"] = out.get("requests", 0) - ok2xx
    m = re.search(r"traffic: .*?\((\d+)\) total", text)
    if m:
        out["bytes"] = int(m.group(1))
        out["mib_s"] = out["bytes"] / secs / 1048576 if secs > 0 else 0
    m = re.search(r"time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)", text)
    if m:
        scale = {"us": 1, "ms": 1e3, "s": 1e6}
        out["mean_us"] = float(m.group(5)) * scale[m.group(6)]
        out["max_us"] = float(m.group(3)) * scale[m.group(4)]
    return out


def load_raw(path):
    by_id = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            by_id.setdefault(r["id"], []).append(r)
    return by_id


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return ""


def machine_info(envd):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024
    except OSError:
        pass
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kernel": platform.release(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_mib": mem,
        "loadavg": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else [],
        "envd_commit": sh("git rev-parse --short=7 HEAD 2>/dev/null"),
        "envd_binary": envd,
        "tools": {
            "h2load": sh("h2load --version 2>&1 | head -n1"),
            "nginx": sh("nginx -v 2>&1"),
            "node": sh("node --version"),
            "curl": sh("curl --version | head -n1"),
            "gcc": sh("gcc --version | head -n1"),
        },
    }


class Rows:
    def __init__(self, raw, flag):
        self.raw = raw
        self.flag = flag
        self.rows = []

    def runs(self, rid):
        return [r["result"] for r in self.raw.get(rid, [])]

    def cmd(self, rid):
        r = self.raw.get(rid)
        return r[0]["cmd"] if r else ""

    def best(self, rid, key, better):
        # Prefer rounds without request errors; a figure whose every round
        # had errors is still shown, with its error count beside it.
        runs = [r for r in self.runs(rid) if isinstance(r.get(key), (int, float))]
        vals = [r[key] for r in runs if not r.get("errors")] or [r[key] for r in runs]
        if not vals:
            return None
        return max(vals) if better == "higher" else min(vals)

    def median(self, rid, key):
        # The middle round of those without errors (the 2c and 2d tables
        # run three rounds, alternating with their anchors).
        runs = [r for r in self.runs(rid) if isinstance(r.get(key), (int, float))]
        vals = sorted(r[key] for r in runs if not r.get("errors") and r.get("status", 200) == 200) or \
            sorted(r[key] for r in runs)
        if not vals:
            return None
        n = len(vals)
        return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2

    def errors(self, *rids):
        n = 0
        for rid in rids:
            for r in self.runs(rid):
                e = r.get("errors", 0)
                n += e if isinstance(e, int) else 1
                if r.get("status", 200) not in (200, 204) and not e:
                    n += 1
        return n

    def add(self, section, what, envd, anchor, anchor_name, unit, better, only, target=None,
            target_abs=None, env_id=None, anchor_id=None, errors=0):
        ratio = None
        if isinstance(envd, (int, float)) and isinstance(anchor, (int, float)) and anchor:
            ratio = envd / anchor
        met = None
        tdesc = None
        if target is not None and ratio is not None:
            met = ratio <= target if better == "lower" else ratio >= target
            tdesc = ("envd/anchor <= %.2f" if better == "lower" else "envd/anchor >= %.2f") % target
        if target_abs is not None and isinstance(envd, (int, float)):
            met = envd < target_abs[0]
            tdesc = "envd < %s" % target_abs[1]
        self.rows.append({
            "section": section, "what": what, "unit": unit, "better": better,
            "envd": envd, "anchor": anchor, "anchor_name": anchor_name,
            "ratio": round(ratio, 3) if ratio is not None else None,
            "target": tdesc, "met": met, "errors": errors,
            "reproduce": "scripts/bench.sh --only %s%s" % (only, self.flag),
            "envd_cmd": self.cmd(env_id) if env_id else "",
            "anchor_cmd": self.cmd(anchor_id) if anchor_id else "",
        })


def build(raw, flag):
    R = Rows(raw, flag)
    sec = "1 command round trip"
    rtt = R.runs("rtt")
    if rtt:
        r = rtt[0]
        err = sum(r[k].get("errors", 0) for k in r)
        for proto, key, tgt in (("h2c proto", "h2_proto", 1.15), ("HTTP/1.1 JSON", "h1_json", 1.60)):
            R.add(sec, "Start /bin/true to end, %s, p50" % proto, r[key]["p50_us"], r["spawn"]["p50_us"],
                  "posix_spawn+waitpid", "us", "lower", "rtt", target=tgt, env_id="rtt", anchor_id="rtt", errors=err)
            R.add(sec, "Start /bin/true to end, %s, p99" % proto, r[key]["p99_us"], r["spawn"]["p99_us"],
                  "posix_spawn+waitpid", "us", "lower", "rtt", env_id="rtt", anchor_id="rtt", errors=err)
    c = R.runs("rtt_cgroup")
    if c and rtt:
        c = c[0]
        err = sum(c[k].get("errors", 0) for k in c)
        for p in ("p50", "p99"):
            R.add(sec, "Start /bin/true to end, HTTP/1.1 JSON, cgroup per command, %s" % p,
                  c["h1_json"][p + "_us"], rtt[0]["h1_json"][p + "_us"], "the same without cgroups",
                  "us", "lower", "rtt_cgroup", env_id="rtt_cgroup", anchor_id="rtt", errors=err)
    s = R.runs("sdk_rtt")
    if s:
        s = s[0]
        err = s["sdk"]["errors"] + s["bash"]["errors"]
        for p in ("p50", "p99"):
            R.add(sec, "SDK commands.run('true'), %s" % p, s["sdk"][p + "_us"], s["bash"][p + "_us"],
                  "bash -l -c true spawned by node", "us", "lower", "sdk_rtt", env_id="sdk_rtt",
                  anchor_id="sdk_rtt", errors=err)
    s = R.runs("sdk_session")
    if s:
        s = s[0]
        err = s["session"]["errors"] + s["plain"]["errors"]
        R.add(sec, "SDK commands.run('true') in a warm session, p50", s["session"]["p50_us"],
              s["plain"]["p50_us"], "plain commands.run('true')", "us", "lower", "sdk_session",
              target=0.5, env_id="sdk_session", anchor_id="sdk_session", errors=err)
        R.add(sec, "SDK commands.run('true') in a warm session, p99", s["session"]["p99_us"],
              s["plain"]["p99_us"], "plain commands.run('true')", "us", "lower", "sdk_session",
              env_id="sdk_session", anchor_id="sdk_session", errors=err)

    s = R.runs("sdk_today")
    if s:
        s = s[0]
        for key, what in (("run", "SDK commands.run('true')"), ("read", "SDK files.read of a 2.7 KB file")):
            for p in ("p50", "p99"):
                R.add(sec, "%s, %s, beside the tree before this work" % (what, p), s["a"][key][p + "_us"],
                      s["b"][key][p + "_us"], "envd at the merge base with main (BENCH_TODAY)", "us", "lower",
                      "sdk_today", target=1.0 if p == "p50" else None, env_id="sdk_today", anchor_id="sdk_today",
                      errors=s["a"][key]["errors"] + s["b"][key]["errors"])

    sec = "2 unary RPC (Stat)"
    for proto, e, a, an, tgt in (("h2c", "unary_h2_envd", "unary_h2_nghttpd", "nghttpd static file", 0.5),
                                 ("HTTP/1.1", "unary_h1_envd", "unary_h1_nginx", "nginx static file", 1.0)):
        if R.runs(e):
            err = R.errors(e, a)
            R.add(sec, "Stat throughput, %s" % proto, R.best(e, "rps", "higher"), R.best(a, "rps", "higher"),
                  an, "req/s", "higher", "unary", target=tgt, env_id=e, anchor_id=a, errors=err)
            R.add(sec, "Stat mean latency under load, %s" % proto, R.best(e, "mean_us", "lower"),
                  R.best(a, "mean_us", "lower"), an, "us", "lower", "unary", env_id=e, anchor_id=a, errors=err)

    sec = "2b path requests (Stat, small GET /files, ListDir)"
    base_name = "envd e015229 (path syscalls on the loop)"
    for fid, what, nghttp_or_nginx, lat, t_anchor, t_base in (
            ("stat_h2_c1", "Stat, h2c -c1 -m1", "nghttpd small file", True, None, 1.10),
            ("stat_h2_c8", "Stat, h2c -c8 -m16", "nghttpd small file", False, 0.3, 1.0),
            ("stat_h1_c8", "Stat, HTTP/1.1 -c8", "nginx small file", False, 0.8, 1.0),
            ("get_h2_c1", "GET /files 6 B, h2c -c1 -m1", "nghttpd small file", False, None, 1.0),
            ("get_h2_c8", "GET /files 6 B, h2c -c8 -m16", "nghttpd small file", False, None, 1.0),
            ("get_h1_c8", "GET /files 6 B, HTTP/1.1 -c8", "nginx small file", False, None, None),
            ("ls_h2_c8", "ListDir of 10 entries, h2c -c8 -m16", None, False, None, None)):
        e, b, a = "path_%s_envd" % fid, "path_%s_base" % fid, "path_%s_anchor" % fid
        if not R.runs(e):
            continue
        key, unit, better = ("mean_us", "us", "lower") if lat else ("rps", "req/s", "higher")
        label = "%s, %s" % (what, "mean latency" if lat else "throughput")
        if R.runs(a):
            R.add(sec, label, R.best(e, key, better), R.best(a, key, better), nghttp_or_nginx, unit, better,
                  "unary", target=t_anchor, env_id=e, anchor_id=a, errors=R.errors(e, a))
        if R.runs(b):
            R.add(sec, label, R.best(e, key, better), R.best(b, key, better), base_name, unit, better,
                  "unary", target=t_base, env_id=e, anchor_id=b, errors=R.errors(e, b))
    t = R.runs("path_threads")
    if t:
        R.add(sec, "envd threads after the path requests", t[0]["threads"], None, "", "threads", "lower", "unary",
              env_id="path_threads")

    sec = "2c Connect JSON beside proto (Stat, medians of 3)"
    base_json = "envd e015229, the same JSON"
    for fid, what, lat, t_proto, t_base, t_anchor in (
            ("c1", "Stat JSON, h2c -c1 -m1", True, 0.9, 1.0, None),
            ("c8", "Stat JSON, h2c -c8 -m16", False, 0.9, 1.0, 0.4)):
        j, p, b, a = ("json_%s_%s" % (fid, k) for k in ("json", "proto", "base", "anchor"))
        if not R.runs(j):
            continue
        # -c1 -m1 is one request at a time: its rate is 1 / latency, and
        # the targets are rates (higher is better) at both settings.
        label = "%s, throughput" % what
        if R.runs(p):
            R.add(sec, label, R.median(j, "rps"), R.median(p, "rps"), "proto, the same build", "req/s", "higher",
                  "json", target=t_proto, env_id=j, anchor_id=p, errors=R.errors(j, p))
        if R.runs(b):
            R.add(sec, label, R.median(j, "rps"), R.median(b, "rps"), base_json, "req/s", "higher", "json",
                  target=t_base, env_id=j, anchor_id=b, errors=R.errors(j, b))
        if R.runs(a):
            R.add(sec, label, R.median(j, "rps"), R.median(a, "rps"), "nghttpd small file", "req/s", "higher",
                  "json", target=t_anchor, env_id=j, anchor_id=a, errors=R.errors(j, a))
        if lat and R.runs(p):
            R.add(sec, "%s, mean latency" % what, R.median(j, "mean_us"), R.median(p, "mean_us"),
                  "proto, the same build", "us", "lower", "json", env_id=j, anchor_id=p, errors=R.errors(j, p))

    sec = "2d large trees (medians of 3)"
    if R.runs("tree_ls_envd"):
        R.add(sec, "ListDir JSON of a large directory, seconds", R.median("tree_ls_envd", "seconds"),
              R.median("tree_ls_ls", "seconds"), "ls -la DIR >/dev/null", "s", "lower", "tree", target=1.3,
              env_id="tree_ls_envd", anchor_id="tree_ls_ls", errors=R.errors("tree_ls_envd", "tree_ls_ls"))
        R.add(sec, "  its first byte, seconds", R.median("tree_ls_envd", "first_byte"),
              R.median("tree_ls_envd", "seconds"), "the whole ListDir", "s", "lower", "tree",
              env_id="tree_ls_envd", anchor_id="tree_ls_envd", errors=R.errors("tree_ls_envd"))
        rss = R.runs("tree_ls_rss")
        if rss:
            R.add(sec, "  envd peak RSS after the ListDir rounds", rss[0]["envd_kib"], None, "", "KiB", "lower",
                  "tree", env_id="tree_ls_rss")
    if R.runs("tree_tar_envd"):
        for a, an, tgt in (("tree_tar_tarpipe", "tar -cf - DIR | cat >/dev/null", 1.3),
                           ("tree_tar_tar", "tar -cf - DIR >/dev/null (no file read)", None)):
            R.add(sec, "archive=tar of a large tree, seconds", R.median("tree_tar_envd", "seconds"),
                  R.median(a, "seconds"), an, "s", "lower", "tree", target=tgt, env_id="tree_tar_envd",
                  anchor_id=a, errors=R.errors("tree_tar_envd", a))
    if R.runs("tree_x_envd"):
        R.add(sec, "extract=tar of a large tree (upload included), seconds", R.median("tree_x_envd", "seconds"),
              R.median("tree_x_tar", "seconds"), "tar -xf DIR.tar -C OUT", "s", "lower", "tree", target=1.3,
              env_id="tree_x_envd", anchor_id="tree_x_tar", errors=R.errors("tree_x_envd", "tree_x_tar"))
    h = R.runs("tree_health")
    h0 = R.runs("tree_health_idle")
    if h:
        R.add(sec, "/health p99 during the large-tree rounds (%s answers)" % h[0].get("n"), h[0].get("p99_ms"),
              h0[0].get("p99_ms") if h0 else None, "the same probe, envd idle", "ms", "lower", "tree",
              target_abs=(5, "5 ms"), env_id="tree_health", anchor_id="tree_health_idle",
              errors=h[0].get("errors", 0) + (h0[0].get("errors", 0) if h0 else 0))

    sec = "3 output streaming"
    if R.runs("stream_pipe"):
        pipe = R.best("stream_pipe", "mib_s", "higher")
        for e, name, tgt in (("stream_h2", "h2c proto", 0.50), ("stream_h1", "HTTP/1.1 JSON", 0.50)):
            R.add(sec, "stdout through a Start stream, %s" % name, R.best(e, "mib_s", "higher"), pipe,
                  "pipe into a reader", "MiB/s", "higher", "stream", target=tgt, env_id=e,
                  anchor_id="stream_pipe", errors=R.errors(e, "stream_pipe"))

    sec = "4 file transfer"

    def xfer(rid, direction="down"):
        best = None
        for r in R.runs(rid):
            if r.get("errors") or (r.get("status") not in (None, 200)):
                continue
            nbytes = r.get(direction) or r.get("bytes")
            t = r.get("seconds")
            if not t:
                continue
            v = (nbytes / t / 1048576) if nbytes else None
            if v is not None and (best is None or v > best):
                best = v
        return best

    def xfer_errors(*rids):
        n = 0
        for rid in rids:
            for r in R.runs(rid):
                n += 1 if (r.get("errors") or r.get("status") not in (None, 200)) else 0
        return n

    size_mib = None
    for r in R.runs("dl_h1_envd"):
        if r.get("down"):
            size_mib = r["down"] / 1048576
    if R.runs("dl_h1_envd"):
        def floor_rate(rid):
            t = R.best(rid, "seconds", "lower")
            return size_mib / t if (t and size_mib) else None
        R.add(sec, "download identity, HTTP/1.1 (curl)", xfer("dl_h1_envd"), xfer("dl_h1_nginx"), "nginx", "MiB/s",
              "higher", "files", target=0.90, env_id="dl_h1_envd", anchor_id="dl_h1_nginx",
              errors=xfer_errors("dl_h1_envd", "dl_h1_nginx"))
        R.add(sec, "download identity, h2c (h2load)", xfer("dl_h2_envd"), xfer("dl_h2_nghttpd"), "nghttpd", "MiB/s",
              "higher", "files", target=0.90, env_id="dl_h2_envd", anchor_id="dl_h2_nghttpd",
              errors=xfer_errors("dl_h2_envd", "dl_h2_nghttpd"))
        R.add(sec, "download identity vs reading the file", xfer("dl_h1_envd"), floor_rate("dl_cat"),
              "cat FILE >/dev/null", "MiB/s", "higher", "files", env_id="dl_h1_envd", anchor_id="dl_cat",
              errors=xfer_errors("dl_cat"))
        R.add(sec, "download gzip, HTTP/1.1 (file MiB/s)", (size_mib / R.best("dl_gzip_envd", "seconds", "lower"))
              if R.best("dl_gzip_envd", "seconds", "lower") else None,
              (size_mib / R.best("dl_gzip_nginx", "seconds", "lower")) if R.best("dl_gzip_nginx", "seconds", "lower") else None,
              "nginx gzip level 6", "MiB/s", "higher", "files", target=0.90, env_id="dl_gzip_envd",
              anchor_id="dl_gzip_nginx", errors=xfer_errors("dl_gzip_envd", "dl_gzip_nginx"))
        R.add(sec, "download gzip vs gzip -6 alone", (size_mib / R.best("dl_gzip_envd", "seconds", "lower"))
              if R.best("dl_gzip_envd", "seconds", "lower") else None, floor_rate("dl_gzip_floor"),
              "gzip -6 -c FILE", "MiB/s", "higher", "files", env_id="dl_gzip_envd", anchor_id="dl_gzip_floor",
              errors=xfer_errors("dl_gzip_floor"))
        R.add(sec, "upload identity (curl POST octet-stream)", xfer("ul_envd", "up"), floor_rate("ul_dd"),
              "dd to the same disk", "MiB/s", "higher", "files", target=0.80, env_id="ul_envd", anchor_id="ul_dd",
              errors=xfer_errors("ul_envd", "ul_dd"))
        ul_gz = R.best("ul_gzip_envd", "seconds", "lower")
        R.add(sec, "upload gzip (file MiB/s)", size_mib / ul_gz if (ul_gz and size_mib) else None,
              floor_rate("ul_gzip_floor"), "gzip -dc to the same disk", "MiB/s", "higher", "files",
              env_id="ul_gzip_envd", anchor_id="ul_gzip_floor",
              errors=xfer_errors("ul_gzip_envd", "ul_gzip_floor", "ul_gzip_check"))

        tsize = R.runs("dl_gzip_text_size")
        tmib = tsize[0]["bytes"] / 1048576 if tsize else None

        def text_rate(rid):
            t = R.best(rid, "seconds", "lower")
            return tmib / t if (t and tmib) else None
        if R.runs("dl_gzip_text_envd"):
            terr = xfer_errors("dl_gzip_text_envd", "dl_gzip_text_nginx")
            R.add(sec, "download gzip, compressible text (file MiB/s)", text_rate("dl_gzip_text_envd"),
                  text_rate("dl_gzip_text_nginx"), "nginx gzip level 6", "MiB/s", "higher", "files", target=2.0,
                  env_id="dl_gzip_text_envd", anchor_id="dl_gzip_text_nginx", errors=terr)
            R.add(sec, "gzip size of that text (lower is better)", R.best("dl_gzip_text_envd", "down", "lower"),
                  R.best("dl_gzip_text_nginx", "down", "lower"), "nginx gzip level 6", "bytes", "lower", "files",
                  target=1.10, env_id="dl_gzip_text_envd", anchor_id="dl_gzip_text_nginx", errors=terr)

    sf = R.runs("sdk_files")
    if sf:
        sf = sf[0]
        for name, label, tgt in (("random", "random", 0.8), ("text", "text", 1.0)):
            d = sf.get(name)
            if not d:
                continue
            sdk, ref = d["sdk"], d["fetch"]
            mib = sdk["bytes"] / 1048576 if sdk.get("bytes") else None
            R.add(sec, "SDK files.read stream, %.0f MiB %s (%s on the wire)" % (mib or 0, label, sdk.get("encoding")),
                  mib / sdk["best_s"] if (mib and sdk.get("best_s")) else None,
                  ref["bytes"] / 1048576 / ref["best_s"] if (ref.get("bytes") and ref.get("best_s")) else None,
                  "node fetch() of the same file from nginx, identity", "MiB/s", "higher", "sdk_files", target=tgt,
                  env_id="sdk_files", anchor_id="sdk_files", errors=sdk["errors"] + ref["errors"])
            if sdk.get("cpu_ms") is not None and ref.get("cpu_ms") is not None:
                R.add(sec, "  node's own CPU for that read (receive + decode)", sdk["cpu_ms"], ref["cpu_ms"],
                      "the same for the fetch() from nginx", "ms", "lower", "sdk_files", env_id="sdk_files",
                      anchor_id="sdk_files")

    sec = "4c SDK downloads over shaped links (best of 2, ms)"
    for shape, link in LINK_SHAPES:
        cell = R.runs("sdk_link_" + shape)
        if not cell:
            continue
        cell = cell[0]
        for data in ("random", "text"):
            d = cell.get(data)
            if not d or "envd" not in d:
                continue
            e, ni, ng = d["envd"], d.get("nginx_identity", {}), d.get("nginx_gzip6", {})
            err = sum(x.get("errors", 0) for x in (e, ni, ng))
            best = [x for x in (ni.get("best_ms"), ng.get("best_ms")) if x]
            R.add(sec, "%s, %s: envd (%s) vs the better nginx" % (link, data, e.get("encoding")), e.get("best_ms"),
                  min(best) if best else None, "nginx identity %s / gzip 6 %s ms" % (ni.get("best_ms"), ng.get("best_ms")),
                  "ms", "lower", "sdk_link", target=1.10, env_id="sdk_link_" + shape,
                  anchor_id="sdk_link_" + shape, errors=err)
            tgt = {"100mbit": 0.85, "20mbit": 0.95}.get(shape)
            if data == "text" and tgt:
                R.add(sec, "%s, text: envd vs nginx gzip 6" % link, e.get("best_ms"), ng.get("best_ms"),
                      "nginx gzip 6", "ms", "lower", "sdk_link", target=tgt, env_id="sdk_link_" + shape,
                      anchor_id="sdk_link_" + shape, errors=err)

    sec = "4b directory archives"
    for tree, what in (("small", "archive=tar of 10 000 small files (1 000 quick)"), ("big", "archive=tar of one 1 GiB file (16 MiB quick)")):
        e = "arch_%s_envd" % tree
        if not R.runs(e):
            continue
        et = R.best(e, "seconds", "lower")
        for a, an, tgt in (("arch_%s_tar" % tree, "tar -cf - DIR >/dev/null", 1.25),
                           ("arch_%s_tarpipe" % tree, "tar -cf - DIR | cat >/dev/null", 1.25)):
            R.add(sec, "%s, seconds" % what, et, R.best(a, "seconds", "lower"), an, "s", "lower",
                  "archive", target=tgt, env_id=e, anchor_id=a, errors=xfer_errors(e, a))
    if R.runs("arch_big_plain") and R.runs("arch_big_envd"):
        R.add(sec, "archive=tar of one big file vs GET of the file alone, seconds",
              R.best("arch_big_envd", "seconds", "lower"), R.best("arch_big_plain", "seconds", "lower"),
              "GET /files?path=FILE (sendfile)", "s", "lower", "archive", target=1.25, env_id="arch_big_envd",
              anchor_id="arch_big_plain", errors=xfer_errors("arch_big_envd", "arch_big_plain"))
    if R.runs("arch_small_tgz_envd"):
        R.add(sec, "archive=tgz of small files, seconds", R.best("arch_small_tgz_envd", "seconds", "lower"),
              R.best("arch_small_tgz_tar", "seconds", "lower"), "tar -czf - DIR | cat", "s", "lower", "archive",
              env_id="arch_small_tgz_envd", anchor_id="arch_small_tgz_tar",
              errors=xfer_errors("arch_small_tgz_envd", "arch_small_tgz_tar"))
    if R.runs("arch_extract_envd"):
        R.add(sec, "extract=tar of small files (upload included), seconds", R.best("arch_extract_envd", "seconds", "lower"),
              R.best("arch_extract_tar", "seconds", "lower"), "tar -xf DIR.tar", "s", "lower", "archive",
              env_id="arch_extract_envd", anchor_id="arch_extract_tar",
              errors=xfer_errors("arch_extract_envd", "arch_extract_tar"))

    sec = "5 footprint"
    b = R.runs("binary")
    if b:
        R.add(sec, "binary size (stripped=%s, static=%s)" % (b[0].get("stripped"), b[0].get("static")),
              b[0]["bytes"] / 1024, 1024, "target 1 MiB", "KiB", "lower", "footprint",
              target_abs=(1024, "1024 KiB"), env_id="binary")
    r = R.runs("rss_idle")
    if r:
        r = r[0]
        R.add(sec, "RSS idle", r["envd_kib"], r["nghttpd_kib"], "nghttpd idle", "KiB", "lower", "footprint",
              target_abs=(2048, "2048 KiB"), env_id="rss_idle")
        R.add(sec, "RSS idle vs nginx (one process)", r["envd_kib"], r["nginx_kib"], "nginx idle", "KiB", "lower",
              "footprint", env_id="rss_idle")
    e, n = R.runs("exec_health_envd"), R.runs("exec_health_nghttpd")
    if e:
        R.add(sec, "exec to first /health, p50", e[0]["p50_us"] / 1000, n[0]["p50_us"] / 1000 if n else None,
              "nghttpd exec to first SETTINGS", "ms", "lower", "footprint", target_abs=(5, "5 ms"),
              env_id="exec_health_envd", anchor_id="exec_health_nghttpd",
              errors=R.errors("exec_health_envd", "exec_health_nghttpd"))
    p = R.runs("pages_first")
    if p:
        p = p[0]
        R.add(sec, "pages touched by the first request after start", p["envd_pages"], p["nghttpd_pages"],
              "nghttpd, first GET", "pages", "lower", "footprint", env_id="pages_first")
    i = R.runs("idle")
    if i:
        i = i[0]
        R.add(sec, "RSS with %d idle Connect streams" % i.get("streams", 0), i.get("rss_kib"),
              i.get("rss_before_kib"), "envd before the streams", "KiB", "lower", "idle", env_id="idle",
              errors=R.errors("idle"))
    bz = R.runs("busy")
    if bz:
        bz = bz[0]
        R.add(sec, "peak RSS, %d processes streaming output" % bz.get("processes", 0), bz.get("peak_rss_kib"),
              bz.get("rss_before_kib"), "envd before", "KiB", "lower", "busy", env_id="busy", errors=R.errors("busy"))

    sec = "6 concurrency"
    c = R.runs("sdk_concurrent")
    if c:
        c = c[0]
        err = c["sdk"]["errors"] + c["bash"]["errors"]
        R.add(sec, "%d concurrent SDK commands.run('true'), throughput" % c["sdk"]["n"], c["sdk"].get("rps"),
              c["bash"].get("rps"), "same count of local bash -l -c true", "run/s", "higher", "sdk_concurrent",
              env_id="sdk_concurrent", errors=err)
        R.add(sec, "%d concurrent SDK commands.run('true'), p99" % c["sdk"]["n"], c["sdk"]["p99_us"] / 1000,
              c["bash"]["p99_us"] / 1000, "same count of local bash -l -c true", "ms", "lower", "sdk_concurrent",
              env_id="sdk_concurrent", errors=err)
    ce, cn = R.runs("conns_envd"), R.runs("conns_nginx")
    if ce:
        ce = ce[0]
        cn = cn[0] if cn else {}
        err = R.errors("conns_envd", "conns_nginx")
        R.add(sec, "%d open connections, GET /health, throughput" % ce["connections"], ce.get("rps"), cn.get("rps"),
              "nginx, same client", "req/s", "higher", "conns", env_id="conns_envd", anchor_id="conns_nginx",
              errors=err)
        R.add(sec, "%d open connections, GET /health, p99" % ce["connections"], ce.get("p99_us", 0) / 1000,
              cn.get("p99_us", 0) / 1000 if cn else None, "nginx, same client", "ms", "lower", "conns",
              env_id="conns_envd", anchor_id="conns_nginx", errors=err)
        R.add(sec, "RSS with %d open connections" % ce["connections"], ce.get("rss_kib"), cn.get("rss_kib"),
              "nginx, same client", "KiB", "lower", "conns", env_id="conns_envd", anchor_id="conns_nginx",
              errors=err)
    sec = "7 a hung filesystem"
    h = R.runs("hung")
    if h and "with_hung" in h[0]:
        h = h[0]
        for k, what in (("health", "/health"), ("stat", "Stat elsewhere"), ("download", "64 KiB download elsewhere"),
                        ("start", "Start /bin/true")):
            for p in ("p50", "p99"):
                R.add(sec, "%s with %d requests hung on a stopped FUSE mount, %s" % (what, h["hung"], p),
                      h["with_hung"][k][p + "_ms"], h["baseline"][k][p + "_ms"], "the same, mount live", "ms",
                      "lower", "hung", target_abs=(100, "100 ms") if p == "p99" else None, env_id="hung",
                      anchor_id="hung", errors=h.get("errors", 0))
    sec = "7b agent file tools (beside ripgrep, same tree)"
    t = R.runs("tools")
    if t and "grep_literal" in t[0]:
        t = t[0]
        err = t.get("errors", 0)
        for key, what, tgt in (("grep_literal", "Grep, a literal (%d matches)", 1.0),
                               ("grep_class", "Grep, a regex with a character class (%d matches)", 1.2),
                               ("glob_ts", "Glob **/*.ts, default limit (%d entries) vs rg --files -g '*.ts'", 1.0),
                               ("glob_ts_all", "Glob **/*.ts, every entry (%d) vs rg --files -g '*.ts'", None)):
            f = t[key]
            R.add(sec, what % f["envd_count"], round(f["envd_s"] * 1000, 2), round(f["rg_s"] * 1000, 2),
                  "rg, same tree, same run", "ms", "lower", "tools", target=tgt, env_id="tools", anchor_id="tools",
                  errors=err)
        R.add(sec, "envd peak RSS after the whole-tree Greps (from %d KiB at start)" % t.get("rss_start_kib", 0),
              t.get("rss_grep_kib"), None, "no anchor", "KiB", "lower", "tools", target_abs=(8192, "8 MiB"),
              env_id="tools", errors=err)
        R.add(sec, "envd peak RSS after the Globs too", t["rss_peak_kib"], None, "no anchor", "KiB", "lower", "tools",
              env_id="tools", errors=err)
        if "edit_rtt" in t:
            f = t["edit_rtt"]
            R.add(sec, "Edit round trip on %s (a 200-line file, one replacement, written), p50 of %d" % (f["fs"], f["n"]),
                  f["edit_p50_us"], f["stat_p50_us"], "Stat round trip, same connection, interleaved", "us", "lower",
                  "tools", target=1.5, env_id="tools", anchor_id="tools", errors=err)
        if "edit_rtt_disk" in t:
            f = t["edit_rtt_disk"]
            R.add(sec, "the same Edit on the tree's disk (%s), p50 of %d" % (f["fs"], f["n"]), f["edit_p50_us"],
                  f["stat_p50_us"], "Stat round trip, interleaved", "us", "lower", "tools", env_id="tools",
                  anchor_id="tools", errors=err)
            R.add(sec, "... of which the disk's replace by rename alone (a temporary written and renamed), p50",
                  f["replace_p50_us"], f["edit_p50_us"], "the Edit round trip", "us", "lower", "tools", env_id="tools",
                  anchor_id="tools", errors=err)
        if "stat_after_write" in t:
            f = t["stat_after_write"]
            R.add(sec, "Stat of a file another process has just written (same size, %s), p50 of %d" % (f.get("fs", "?"), f["n"]),
                  f["after_write_p50_us"], f["quiet_p50_us"], "Stat of a file not written, interleaved", "us",
                  "lower", "tools", env_id="tools", anchor_id="tools", errors=err)
    t = R.runs("tools_sdk")
    if t and "tools_p50_us" in t[0]:
        t = t[0]
        R.add(sec, "SDK: a grep of a module (about 200 files) finding 20 matches, envd-tools grep(), p50",
              t["tools_p50_us"], t["shell_p50_us"], "commands.run('grep -rn ...'), parsed", "us", "lower", "tools",
              target=0.2, env_id="tools_sdk", anchor_id="tools_sdk", errors=t.get("errors", 0))
    t = R.runs("tools_sdk_tree")
    if t and "tools_p50_us" in t[0]:
        t = t[0]
        R.add(sec, "SDK: the same grep over the whole tree, p50", t["tools_p50_us"], t["shell_p50_us"],
              "commands.run('grep -rn ...'), parsed", "us", "lower", "tools", env_id="tools_sdk_tree",
              anchor_id="tools_sdk_tree", errors=t.get("errors", 0))
    sec = "7c try runs (docs/try.md)"
    t = R.runs("try")
    if t and t[0].get("commit_s") is not None:
        t = t[0]
        R.add(sec, "CommitTry of %d changed files (%d modified, %d new; and 1 %% as many deleted, chmods) "
              "in a tree of %d files" % (t["files"], t["modified"], t["new"], t["tree_files"]),
              round(t["commit_s"] * 1000, 1), round(t["cp_s"] * 1000, 1), "cp -a of the same changed files", "ms",
              "lower", "try", target=1.5, env_id="try", anchor_id="try", errors=t.get("errors", 0))
    sec = "8 the image as a VM"
    v = R.runs("vm_boot")
    if v:
        v = v[0]
        for key, what in (("health_ms", "first /health"), ("command_ms", "first command result")):
            st = v.get(key) or {}
            R.add(sec, "QEMU start to %s (%s, median of %d)" % (what, v.get("accel"), v.get("boots", 0)),
                  st.get("p50"), None, "no anchor", "ms", "lower", "vm_boot", env_id="vm_boot", errors=v.get("errors", 0))
    v = R.runs("vm_rtt")
    if v:
        v = v[0]
        err = v.get("errors", 0)
        q = v.get("seq") or {}
        for p in ("p50", "p99"):
            R.add(sec, "in the VM (%s): Start /bin/true to end, cgroup per command, %s of %d" % (v.get("accel"), p, q.get("n", 0)),
                  (q.get("a") or {}).get(p + "_ms"), (q.get("b") or {}).get(p + "_ms"),
                  "a second envd in the guest with -no-cgroups", "ms", "lower", "vm_rtt",
                  target=1.15 if p == "p50" else None, env_id="vm_rtt", anchor_id="vm_rtt", errors=err)
        b = v.get("burst") or {}
        for key, what in (("wall_p50_ms", "all done, median of %d bursts" % b.get("rounds", 0)),
                          ("slowest_ms", "slowest call")):
            R.add(sec, "in the VM (%s): %d concurrent Starts, cgroup per command, %s" % (v.get("accel"), b.get("concurrent", 0), what),
                  (b.get("a") or {}).get(key), (b.get("b") or {}).get(key),
                  "a second envd in the guest with -no-cgroups", "ms", "lower", "vm_rtt",
                  env_id="vm_rtt", anchor_id="vm_rtt", errors=err)
        k = v.get("sdk_burst") or {}
        ka, kb = k.get("a") or {}, k.get("b") or {}
        if ka:
            R.add(sec, "in the VM (%s): %d concurrent SDK commands.run from the host, default timeouts, cgroup per command: completed" % (v.get("accel"), ka.get("n", 0)),
                  ka.get("completed"), kb.get("completed"), "the same burst against -no-cgroups", "calls", "higher", "vm_rtt",
                  target=1.0, env_id="vm_rtt", anchor_id="vm_rtt", errors=ka.get("errors", 0))
            R.add(sec, "in the VM (%s): %d concurrent SDK commands.run from the host, default timeouts, cgroup per command: all done" % (v.get("accel"), ka.get("n", 0)),
                  ka.get("seconds") and round(ka["seconds"] * 1000, 1), kb.get("seconds") and round(kb["seconds"] * 1000, 1),
                  "the same burst against -no-cgroups", "ms", "lower", "vm_rtt",
                  env_id="vm_rtt", anchor_id="vm_rtt", errors=ka.get("errors", 0))
    return R.rows


LINK_SHAPES = (("none", "veth, unshaped"), ("1gbit", "1 Gbit/s"), ("100mbit", "100 Mbit/s"), ("20mbit", "20 Mbit/s"))


def link_table(doc):
    """The shaped-link downloads as the Markdown table of bench/README.md."""
    raw = doc.get("raw", doc)
    print("| link | data | envd | nginx identity | nginx gzip 6 | envd / better nginx | envd on the wire | envd spread |")
    print("|---|---|---|---|---|---|---|---|")
    for shape, link in LINK_SHAPES:
        for cell in [r["result"] for r in raw.get("sdk_link_" + shape, [])]:
            for data in ("random", "text"):
                d = cell.get(data)
                if not d:
                    continue
                e, ni, ng = d["envd"], d["nginx_identity"], d["nginx_gzip6"]
                best = min(x for x in (ni.get("best_ms"), ng.get("best_ms")) if x)
                runs = lambda x: "/".join("%.0f" % v for v in x.get("runs_ms", []))
                r = e.get("runs_ms") or [e["best_ms"]]
                print("| %s | %s | %.0f (%s) | %.0f (%s) | %.0f (%s) | %.2fx | %s | %.0f %% |" % (
                    link, data, e["best_ms"], runs(e), ni["best_ms"], runs(ni), ng["best_ms"], runs(ng),
                    e["best_ms"] / best, e.get("encoding"), (max(r) - min(r)) * 100 / min(r)))


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.1f" % v if abs(v) >= 10 else "%.2f" % v
    return str(v)


def table(rows):
    lines = []
    hdr = ("what", "envd", "anchor", "unit", "ratio", "target", "met", "err", "reproduce")
    data = []
    for r in rows:
        data.append((r["what"], fmt(r["envd"]), "%s (%s)" % (fmt(r["anchor"]), r["anchor_name"]), r["unit"],
                     fmt(r["ratio"]), r["target"] or "", {True: "yes", False: "NO", None: ""}[r["met"]],
                     str(r["errors"]), r["reproduce"]))
    w = [max(len(hdr[i]), *(len(d[i]) for d in data)) if data else len(hdr[i]) for i in range(len(hdr))]
    fmt_line = "  ".join("%%-%ds" % x for x in w)
    section = None
    lines.append(fmt_line % hdr)
    for r, d in zip(rows, data):
        if r["section"] != section:
            section = r["section"]
            lines.append("-- " + section)
        lines.append(fmt_line % d)
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "markdown":
        doc = json.load(open(sys.argv[2]))
        print("| figure | envd | anchor | ratio | target | met | errors |")
        print("|---|---|---|---|---|---|---|")
        for r in doc["figures"]:
            print("| %s | %s %s | %s %s (%s) | %s | %s | %s | %s |" % (
                r["what"], fmt(r["envd"]), r["unit"], fmt(r["anchor"]), r["unit"], r["anchor_name"],
                fmt(r["ratio"]), r["target"] or "", {True: "yes", False: "**no**", None: ""}[r["met"]],
                r["errors"]))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "links":
        link_table(json.load(open(sys.argv[2])))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "h2load":
        print(json.dumps(parse_h2load(sys.stdin.read())))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd")
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--quick", default="0")
    ap.add_argument("--elapsed", default="0")
    ap.add_argument("--mode-flag", default="")
    ap.add_argument("--envd", default="build/envd")
    a = ap.parse_args()
    raw = load_raw(a.raw)
    rows = build(raw, a.mode_flag)
    errors = sum(r["errors"] for r in rows) + len(raw.get("died", []))
    doc = {
        "suite": "envd bench",
        "quick": a.quick == "1",
        "elapsed_s": int(a.elapsed),
        "machine": machine_info(a.envd),
        "summary": {
            "figures": len(rows),
            "errors": errors,
            "targets": sum(1 for r in rows if r["met"] is not None),
            "targets_met": sum(1 for r in rows if r["met"] is True),
        },
        "figures": rows,
        "raw": raw,
    }
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(table(rows))
    s = doc["summary"]
    print("\n%d figures, %d request errors, %d/%d targets met, %ds; JSON: %s" %
          (s["figures"], s["errors"], s["targets_met"], s["targets"], doc["elapsed_s"], a.out))
    # The suite "worked" when every measurement produced a figure; speed is
    # reported, never asserted.
    missing = [r["what"] for r in rows if r["envd"] is None]
    if not rows or missing:
        print("bench: no figure for: %s" % (", ".join(missing) or "anything"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
