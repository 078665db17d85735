#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Attacks of a local user of the sandbox (uid 65534 or the session's own
# user) against a root envd under build/init, for hostile_local.sh:
# init's notify socket, exit codes kept across a crash, session status
# lines, session FIFOs and files. Every wait has a deadline of HANG_S and
# ends on the event; no verdict depends on how fast the machine is.
import base64
import ctypes
import errno
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crash_probe as cp  # noqa: E402

HANG_S = cp.HANG_S
ME = os.path.abspath(__file__)
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
ok = cp.ok


def wait(cond, secs=HANG_S, step=0.01):
    deadline = time.time() + secs
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def sockaddr(addr):
    return "\0" + addr[1:] if addr.startswith("@") else addr


def environ_of(pid):
    try:
        raw = open("/proc/%d/environ" % pid, "rb").read()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


def children(pid):
    try:
        return [int(k) for k in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]
    except OSError:
        return []


def comm(pid):
    try:
        return open("/proc/%d/comm" % pid).read().strip()
    except OSError:
        return ""


def state(pid):
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def closers(init_pid):
    """Children of init that are init itself (the throw-away closers)."""
    return [k for k in children(init_pid) if comm(k) == comm(init_pid)]


class UserStream(cp.Stream):
    """cp.Stream as a given user (Basic auth), the way the SDK sends it."""

    def __init__(self, base, method, body, user):
        host, port = base.split("//")[1].split(":")
        self.s = socket.create_connection((host, int(port)), timeout=HANG_S)
        payload = cp.frame(body)
        auth = base64.b64encode(("%s:" % user).encode()).decode()
        req = ("POST /process.Process/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
               "Connect-Protocol-Version: 1\r\nAuthorization: Basic %s\r\nContent-Length: %d\r\n"
               "Connection: close\r\n\r\n" % (method, auth, len(payload))).encode() + payload
        self.s.sendall(req)
        self.raw = b""
        self.head = None
        self.chunked = False
        self.body = b""
        self.broken = False
        self.done = False


def run_cmd(base, text, user="root", session=None, tag=None):
    """Start `bash -l -c text` and follow it to its end: (pid, stdout, end)."""
    body = {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", text], "envs": {}}}
    if session:
        body["session"] = session
    if tag:
        body["tag"] = tag
    st = UserStream(base, "Start", body, user)
    pid, out, end = None, b"", None
    for ev in st.events():
        e = ev.get("event", {})
        if "start" in e:
            pid = int(e["start"]["pid"])
        elif "data" in e and "stdout" in e["data"]:
            out += base64.b64decode(e["data"]["stdout"])
        elif "end" in e:
            end = e["end"]
    err = getattr(st, "end_stream", {}).get("error") if not st.broken else "stream broken"
    st.close()
    return pid, out.decode(errors="replace"), end, err


# ---- helpers that run as the attacker (subcommands) ----

def linger_send(addr, out):
    """Send init a TCP socket whose last close blocks (SO_LINGER for a day,
    unsent data, a peer that never reads), then drop our references and
    hold the rest (the listener, the peer that never reads). The caller
    stops init meanwhile, so that init's close is the last one."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    c.connect(lst.getsockname())
    peer, _ = lst.accept()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.setblocking(False)
    try:
        while True:
            c.send(b"x" * 65536)
    except BlockingIOError:
        pass
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 86400))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendmsg([b"FDSTORE=1\nFDNAME=linger\n"],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", c.fileno()))], 0, sockaddr(addr))
        res = "sent"
        c.close()  # not the last reference: the datagram holds one
    except OSError as e:
        res = errno.errorcode.get(e.errno, str(e.errno))
    with open(out + ".tmp", "w") as f:
        f.write(res)
    os.rename(out + ".tmp", out)
    while True:
        time.sleep(3600)


def flood(addr, out, stop_file):
    """Datagrams to init's socket as fast as they go, until stop_file
    (out + ".ready" once the first has been tried)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setblocking(False)
    sent = refused = 0
    errs = set()
    deadline = time.time() + 2 * HANG_S
    first = True
    while not os.path.exists(stop_file) and time.time() < deadline:
        if not first:
            open(out + ".ready", "w").close()
        first = False
        for _ in range(200):
            try:
                s.sendto(b"FDSTORE=1\nFDNAME=flood\n", sockaddr(addr))
                sent += 1
            except OSError as e:
                refused += 1
                errs.add(errno.errorcode.get(e.errno, str(e.errno)))
    with open(out + ".tmp", "w") as f:
        json.dump({"sent": sent, "refused": refused, "errors": sorted(errs)}, f)
    os.rename(out + ".tmp", out)


def orphans_at(last_pid, n, code):
    """(root, inside the pid namespace) The next pid is last_pid + 1; as
    uid 65534, n children that exit `code` once we are gone (orphans)."""
    if int(last_pid) > 0:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(last_pid))
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    r, w = os.pipe()
    pids = []
    for _ in range(int(n)):
        p = os.fork()
        if p == 0:
            os.close(w)
            os.read(r, 1)  # EOF once the parent is gone
            os._exit(int(code))
        pids.append(p)
    print(" ".join(map(str, pids)), flush=True)
    os._exit(0)


def wait_gone(pids):
    """(inside the pid namespace) Until every pid is reaped."""
    def gone(p):
        try:
            os.kill(p, 0)
            return False
        except ProcessLookupError:
            return True
    ok_ = wait(lambda: all(gone(int(p)) for p in pids))
    sys.exit(0 if ok_ else 1)


def set_last_pid(v):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(v))


# ---- the scenarios ----

def exit_ring(init_pid):
    """(magic, count) of init's exit ring, read through /proc."""
    for fd in os.listdir("/proc/%d/fd" % init_pid):
        p = "/proc/%d/fd/%s" % (init_pid, fd)
        try:
            if "init-exits" not in os.readlink(p):
                continue
            with open(p, "rb") as f:
                magic, cap, count = struct.unpack("<IIQ", f.read(16))
            return magic, count
        except OSError:
            continue
    return None, None


def kept_files(init_pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % init_pid):
        try:
            if "envd-process" in os.readlink("/proc/%d/fd/%s" % (init_pid, fd)):
                n += 1
        except OSError:
            pass
    return n


def notify(base, init_pid, work):
    envd = cp.envd_pid(init_pid)
    addr = environ_of(envd).get("NOTIFY_SOCKET", "")
    ok(addr.startswith("/"), "init's notify socket is a path, not an abstract name any process can reach", addr)
    if addr.startswith("/"):
        st = os.stat(os.path.dirname(addr))
        ok(st.st_uid == 0 and st.st_mode & 0o777 == 0o700, "its directory is root's, mode 0700",
           "%d %o" % (st.st_uid, st.st_mode & 0o7777))
    procs = []
    theirs = os.path.join(work, "nobody")  # where the attacker may write
    os.makedirs(theirs, exist_ok=True)
    os.chmod(theirs, 0o777)

    def linger(prefix, out):
        # init stopped while the attacker sends and lets go of its copy:
        # init's close is then the last one, whatever the timing.
        os.kill(init_pid, signal.SIGSTOP)
        try:
            procs.append(subprocess.Popen(prefix + [sys.executable, ME, "linger_send", addr, out]))
            wait(lambda: os.path.exists(out))
        finally:
            os.kill(init_pid, signal.SIGCONT)
        return open(out).read() if os.path.exists(out) else "no result"

    # 1. uid 65534 sends the lingering socket.
    res = linger(NOBODY, os.path.join(theirs, "linger"))
    ok(res != "sent", "uid 65534 cannot send to init's socket", res)

    # 2. Root (what still reaches init): refused, closed by a throw-away child.
    res = linger([], os.path.join(work, "linger.root"))
    ok(res == "sent", "root's datagram with a lingering socket reaches init", res)
    ok(wait(lambda: len(closers(init_pid)) == 1), "its close waits in a child of init, not in init",
       "children %r" % [(k, comm(k), state(k)) for k in children(init_pid)])
    ok(state(init_pid) in ("S", "R"), "init itself is not blocked", state(init_pid))

    # 3. SIGKILL envd: init restarts it at once (it would not while blocked).
    victim = cp.envd_pid(init_pid)
    os.kill(victim, signal.SIGKILL)
    new = cp.wait_new_envd(init_pid, victim)
    ok(new is not None, "after a SIGKILL of envd, init starts it again while the refused socket lingers")
    ok(cp.wait_health(base), "the new envd answers")

    # 4. A flooder of uid 65534 while Starts run: nothing it sends arrives.
    # The time to the start event, without and with it (a figure, not a
    # verdict).
    def starts(n):
        lat = []
        for _ in range(n):
            t0 = time.time()
            try:
                st, pid = cp.start(base, "/bin/true", [])
            except Exception:
                break
            lat.append((time.time() - t0) * 1000)
            cp.drain_in_thread(st)
        return sorted(lat)
    quiet = starts(20)
    stop = os.path.join(theirs, "flood.stop")
    fout = os.path.join(theirs, "flood.json")
    fl = subprocess.Popen(NOBODY + [sys.executable, ME, "flood", addr, fout, stop])
    wait(lambda: os.path.exists(fout + ".ready"))
    loud = starts(20)
    open(stop, "w").close()
    fl.wait(timeout=HANG_S)
    ok(len(loud) == 20, "20 Starts succeed while uid 65534 floods init's socket")
    f = json.load(open(fout)) if os.path.exists(fout) else {}
    ok(f.get("sent", -1) == 0 and f.get("refused", 0) > 0, "none of the flooder's datagrams reach init", f)
    if quiet and loud:
        print("# time to the start event of /bin/true: p50 %.1f ms alone, %.1f ms with the flooder (%d refused sends)"
              % (quiet[len(quiet) // 2], loud[len(loud) // 2], f.get("refused", 0)), flush=True)

    # 5. init stopped: its queue fills; Start does not wait for it, and what
    # envd queued reaches init once it runs again.
    before = kept_files(init_pid)
    os.kill(init_pid, signal.SIGSTOP)
    started = []
    try:
        for i in range(5):
            st, pid = cp.start(base, "/bin/sleep", ["600"], tag="stopped-init-%d" % i)
            started.append(pid)
            cp.drain_in_thread(st)
    except Exception as e:
        ok(False, "Starts answer while init is stopped", e)
    finally:
        os.kill(init_pid, signal.SIGCONT)
    ok(len(started) == 5, "5 Starts answer while init is stopped (envd queues its store messages)")
    ok(wait(lambda: kept_files(init_pid) >= before + 5), "once init runs again it holds their keep files",
       "%d before, %d now" % (before, kept_files(init_pid)))
    victim = cp.envd_pid(init_pid)
    os.kill(victim, signal.SIGKILL)
    ok(cp.wait_new_envd(init_pid, victim) is not None and cp.wait_health(base), "envd restarted")
    _, lst = cp.unary(base, "List", {})
    listed = {int(p.get("pid", 0)) for p in lst.get("processes", [])}
    ok(all(p in listed for p in started), "the 5 processes are taken back after the crash",
       "started %r, listed %r" % (started, sorted(listed)))
    for p in started:
        cp.unary(base, "SendSignal", {"process": {"pid": p}, "signal": "SIGNAL_SIGKILL"})

    # The attackers let go: the lingering close ends and so does its child.
    for p in procs:
        p.kill()
        p.wait()
    ok(wait(lambda: not closers(init_pid)), "the closing child ends once the peer lets go")


def pidns(base, init_pid, work):
    """The exit code of a root job across a crash, with pids reused by
    orphans of uid 65534 that exited 77 (pid namespace of init_pid)."""
    ns = ["nsenter", "-t", str(init_pid), "-p", "--"]
    go = os.path.join(work, "go")
    job = pidr = None
    for attempt in range(3):
        r = subprocess.run(ns + [sys.executable, ME, "orphans_at", "20001", "16", "77"], capture_output=True,
                           text=True, timeout=HANG_S)
        pids = r.stdout.split()
        if len(pids) != 16:
            ok(False, "16 orphans of uid 65534", r.stderr)
            return
        subprocess.run(ns + [sys.executable, ME, "wait_gone"] + pids, timeout=2 * HANG_S)
        subprocess.run(ns + [sys.executable, ME, "set_last_pid", str(int(pids[0]))], timeout=HANG_S)
        st, pidr = cp.start(base, "/bin/bash", ["-c", "while [ ! -e %s ]; do sleep 0.05; done; exit 3" % go],
                            tag="pidns-job-%d" % attempt)
        job = st
        if str(pidr) in pids:
            break
        cp.unary(base, "SendSignal", {"process": {"pid": pidr}, "signal": "SIGNAL_SIGKILL"})
        st.close()
    ok(str(pidr) in pids, "the root job got the pid of an orphan that exited 77", "%s not in %s" % (pidr, pids))
    cp.drain_in_thread(job)

    # SIGKILL envd; the next one takes the job back.
    victim = cp.envd_pid(init_pid)
    os.kill(victim, signal.SIGKILL)
    ok(cp.wait_new_envd(init_pid, victim) is not None and cp.wait_health(base), "envd restarted in the namespace")

    # The job ends while init is stopped: a zombie nobody has reaped.
    host = None
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % d) != os.readlink("/proc/%d/ns/pid" % init_pid):
                continue
            for line in open("/proc/%s/status" % d):
                if line.startswith("NSpid:") and line.split()[-1] == str(pidr):
                    host = int(d)
        except OSError:
            continue
    ok(host is not None, "the job found in the namespace")
    events = []
    conn = cp.Stream(base, "Connect", {"process": {"pid": pidr}})

    def follow():
        for ev in conn.events():
            events.append(ev.get("event", {}))
    t = threading.Thread(target=follow, daemon=True)
    t.start()
    os.kill(init_pid, signal.SIGSTOP)
    try:
        open(go, "w").close()
        ok(wait(lambda: state(host) == "Z"), "the job ended and is a zombie (init stopped)", state(host))
        # Time for a wrong answer from the ring to show (a right one waits
        # for the reap whatever this is).
        wait(lambda: any("end" in e for e in events), secs=1)
    finally:
        os.kill(init_pid, signal.SIGCONT)
    t.join(HANG_S)
    ends = [e["end"] for e in events if "end" in e]
    end = ends[0] if ends else {}
    ok(end.get("exitCode") == 3 and end.get("exited") is True,
       "the end event says exit 3 (not the 77 of an orphan that had the pid)", end)
    u = end.get("usage", {})
    ok(int(u.get("cpuUserUsec", 0)) + int(u.get("cpuSystemUsec", 0)) > 0,
       "its CPU time is init's record of this very process", u)
    conn.close()

    # More than the ring holds: orphans of uid 65534 exiting 77 (they would
    # push the records of envd's processes out).
    magic0, count0 = exit_ring(init_pid)
    r = subprocess.run(ns + [sys.executable, ME, "orphans_at", "0", "1100", "77"], capture_output=True, text=True,
                       timeout=HANG_S)
    flood_pids = r.stdout.split()
    subprocess.run(ns + [sys.executable, ME, "wait_gone"] + flood_pids, timeout=2 * HANG_S)
    magic1, count1 = exit_ring(init_pid)
    ok(len(flood_pids) == 1100 and count1 == count0, "1100 orphans of uid 65534 leave no record in init's exit ring",
       "count %s -> %s" % (count0, count1))


def session_forge(base, user):
    """A command forges status lines (old and new form, with a guessed tag,
    and unfinished ones) on the shell's status pipe, and a background
    subshell does it again while the next command runs: each command ends
    with its own code."""
    # Whole lines, a line longer than any of envd's, then the start of one
    # left unfinished (the real status line lands after it).
    forge = ("for fd in $(seq 4 40); do { printf '42\\n=42 0123456789abcdef\\n+0123456789abcdef\\n%0100d' 0; "
             "printf 'junk=4'; } >&$fd 2>/dev/null; done")
    name = "forge%d" % os.getpid()
    pid, out, end, err = run_cmd(base, forge + "; sleep 0.3; echo after; (exit 5)", user=user, session=name)
    ok(end and end.get("exitCode") == 5 and "after" in out,
       "a command that forges status lines ends with its own code and output", (end, out, err))
    pid, out, end, err = run_cmd(base, "(sleep 0.5; %s) & echo started" % forge, user=user, session=name)
    ok(end and end.get("exitCode", 0) == 0, "a command leaving a forger in the background", (end, err))
    pid, out, end, err = run_cmd(base, "sleep 1.5; echo second; (exit 6)", user=user, session=name)
    ok(end and end.get("exitCode") == 6 and "second" in out,
       "the next command is not ended by the background forger", (end, out, err))
    pid, out, end, err = run_cmd(base, "(exit 7)", user=user, session=name)
    ok(end and end.get("exitCode") == 7, "nor is a code shifted onto the command after it", end)


def session_dir_of(base, user, name):
    """The session directory (the running command's FIFOs are in it)."""
    pid, out, end, err = run_cmd(base, "l=$(readlink /proc/$$/fd/1); l=${l%% *}; echo \"${l%/*}\"",
                                 user=user, session=name)
    return out.strip()


def session_files(base, user):
    name = "files%d" % os.getpid()
    pid, out, end, err = run_cmd(base, ": secret-token-$((6*7)); echo ok", user=user, session=name)
    ok(end and end.get("exitCode", 0) == 0 and out == "ok\n", "a command with a secret in its text runs", (out, end, err))
    d = session_dir_of(base, user, name)
    ok(d.startswith("/run/envd-sessions/") or d.startswith("/tmp/envd-sessions-"), "the session directory", d)
    if not d:
        return None
    left = wait(lambda: not os.listdir(d) and "empty") or os.listdir(d)
    ok(left == "empty", "no file of a finished command is left in the session directory", left)
    st = os.stat(d)
    ok(st.st_uid == 0 and st.st_mode & 0o777 == 0o710, "the session directory is root's, mode 0710",
       "%d %o" % (st.st_uid, st.st_mode & 0o7777))
    # The user cannot put a name there (a FIFO swapped in, a link).
    r = subprocess.run(["runuser", "-u", user, "--", sys.executable, "-c",
                        "import os, sys\nd = sys.argv[1]\nres = []\n"
                        "for f in (lambda: os.mkfifo(d + '/o.999'), lambda: os.symlink('/etc/shadow', d + '/c'),"
                        " lambda: open(d + '/x', 'w')):\n"
                        "    try:\n        f(); res.append('made')\n"
                        "    except OSError as e:\n        res.append(str(e.errno))\n"
                        "print(' '.join(res))", d], capture_output=True, text=True, timeout=HANG_S)
    made = r.stdout.split()
    ok(made and "made" not in made, "the session's user can create no name in its directory", r.stdout + r.stderr)
    return d


def fifo_race(base, user, work, rounds):
    """(root, defence in depth) A racer replaces each new FIFO name in the
    session directory by a hard link to a FIFO of root's: envd refuses the
    command instead of chowning and reading root's FIFO."""
    name = "race%d" % os.getpid()
    d = session_dir_of(base, user, name)
    if not d:
        ok(False, "the race's session directory")
        return
    rootfifo = os.path.join("/run", "envd-hostile-%d.fifo" % os.getpid())
    if os.path.exists(rootfifo):
        os.unlink(rootfifo)
    os.mkfifo(rootfifo, 0o600)
    libc = ctypes.CDLL(None, use_errno=True)
    ifd = libc.inotify_init1(os.O_NONBLOCK)
    libc.inotify_add_watch(ifd, d.encode(), 0x100)  # IN_CREATE
    stop = threading.Event()
    swaps = [0]

    def racer():
        import select
        while not stop.is_set():
            r, _, _ = select.select([ifd], [], [], 0.1)
            if not r:
                continue
            buf = os.read(ifd, 65536)
            i = 0
            while i + 16 <= len(buf):
                wd, mask, cookie, ln = struct.unpack_from("iIII", buf, i)
                nm = buf[i + 16:i + 16 + ln].split(b"\0")[0].decode()
                i += 16 + ln
                if nm[:2] in ("o.", "e.", "i."):
                    try:
                        tmp = os.path.join(d, ".x" + nm)
                        os.link(rootfifo, tmp)
                        os.rename(tmp, os.path.join(d, nm))
                        swaps[0] += 1
                    except OSError:
                        pass
    t = threading.Thread(target=racer, daemon=True)
    t.start()
    refused = failed = ran = 0
    for _ in range(rounds):
        pid, out, end, err = run_cmd(base, "echo x", user=user, session=name)
        if end and end.get("exitCode", 0) == 0 and out == "x\n":
            ran += 1
        elif pid is None:
            refused += 1  # envd found another file under its FIFO's name
        else:
            failed += 1   # the shell could not open root's FIFO
    stop.set()
    t.join()
    os.close(ifd)
    st = os.stat(rootfifo)
    print("# FIFO race: %d names swapped; %d commands refused by envd, %d failed in the shell, %d ran"
          % (swaps[0], refused, failed, ran), flush=True)
    ok(st.st_uid == 0, "root's FIFO stays root's (never chowned to the session's user)", "uid %d" % st.st_uid)
    os.unlink(rootfifo)


def main():
    cmd = sys.argv[1]
    a = sys.argv[2:]
    if cmd == "linger_send":
        linger_send(a[0], a[1])
    elif cmd == "flood":
        flood(a[0], a[1], a[2])
    elif cmd == "orphans_at":
        orphans_at(a[0], a[1], a[2])
    elif cmd == "wait_gone":
        wait_gone(a)
    elif cmd == "set_last_pid":
        set_last_pid(a[0])
    elif cmd == "notify":
        notify(a[0], int(a[1]), a[2])
    elif cmd == "pidns":
        pidns(a[0], int(a[1]), a[2])
    elif cmd == "session_forge":
        session_forge(a[0], a[1])
    elif cmd == "session_files":
        d = session_files(a[0], a[1])
        if d:
            print("SESSION_DIR " + d, flush=True)
    elif cmd == "fifo_race":
        fifo_race(a[0], a[1], a[2], int(a[3]))
    else:
        sys.exit("unknown " + cmd)
    sys.exit(1 if cp.RESULTS[1] else 0)


if __name__ == "__main__":
    main()
