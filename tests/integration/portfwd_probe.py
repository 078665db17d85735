# SPDX-License-Identifier: Apache-2.0
"""Probes for envd's port forwarder, run by portfwd.sh and container.sh.

    portfwd_probe.py latency  SANDBOX PORT [TRIALS [LIMIT_MS]]
                                                    listen on 127.0.0.1, time until SANDBOX:PORT relays
    portfwd_probe.py reopen   SANDBOX PORT            close, wait for teardown, listen again: forwarded again
    portfwd_probe.py halfclose SANDBOX PORT           client half-closes, reply still arrives
    portfwd_probe.py reset    SANDBOX PORT            service resets, client sees a reset
    portfwd_probe.py v6       SANDBOX PORT            a listener on ::1 is forwarded
    portfwd_probe.py notfwd   SANDBOX PORT BINDADDR   a listener on BINDADDR is not forwarded
    portfwd_probe.py many     SANDBOX PORT N          N concurrent connections, all echo correctly
    portfwd_probe.py sink     BINDADDR PORT           serve: read everything, answer the byte count
    portfwd_probe.py throughput HOST PORT MIB         send MIB MiB, print MiB/s

Each prints one line (a measurement or "ok") and exits 0 on success.
Waits are deadlines sized for a machine ten times slower than a loaded one
(DEADLINE seconds, HANG_S from the environment as in tests/common.sh); the
latency limit defaults to one too: the figure is printed, and speed is
judged by the benchmarks, not here.
"""
import hashlib
import os
import socket
import statistics
import sys
import threading
import time

DEADLINE = int(os.environ.get("HANG_S", "300"))


def connect_until(host, port, timeout):
    """Connect to host:port until a relayed connection works; return seconds."""
    t0 = time.monotonic()
    while True:
        try:
            c = socket.create_connection((host, port), timeout=1)
            c.settimeout(DEADLINE)  # the 1 s was for the connect only
            return time.monotonic() - t0, c
        except OSError:
            if time.monotonic() - t0 > timeout:
                raise
            time.sleep(0.001)


def refused(host, port):
    try:
        c = socket.create_connection((host, port), timeout=1)
    except OSError:
        return True
    # A relay that accepted but cannot reach a service resets at once.
    c.settimeout(1)
    try:
        return c.recv(1) == b""
    except OSError:
        return True
    finally:
        c.close()


def gone(host, port):
    """True once nothing listens on host:port (the forward is torn down)."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def wait_gone(host, port, timeout=DEADLINE):
    end = time.monotonic() + timeout
    while not gone(host, port):
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def listen(addr, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(128)
    return s


def roundtrip(lsock, c, payload=b"ping"):
    a, _ = lsock.accept()
    c.sendall(payload)
    got = a.recv(100)
    a.sendall(got[::-1])
    back = c.recv(100)
    a.close()
    c.close()
    return got == payload and back == payload[::-1]


def cmd_latency(host, port, trials=10, limit_ms=DEADLINE * 1000):
    lat = []
    for i in range(trials):
        s = listen("127.0.0.1", port)
        dt, c = connect_until(host, port, DEADLINE)
        if not roundtrip(s, c):
            print("relay returned wrong bytes")
            return 1
        s.close()
        lat.append(dt * 1000)
        # wait for the teardown so the next trial measures a fresh forward
        if not wait_gone(host, port):
            print("forward not torn down after close")
            return 1
    print("detection latency ms: median %.1f max %.1f (n=%d)" % (statistics.median(lat), max(lat), trials))
    return 0 if max(lat) < limit_ms else 1


def cmd_reopen(host, port):
    s = listen("127.0.0.1", port)
    dt, c = connect_until(host, port, DEADLINE)
    ok = roundtrip(s, c)
    s.close()
    t0 = time.monotonic()
    if not wait_gone(host, port):
        print("not torn down")
        return 1
    td = time.monotonic() - t0
    s = listen("127.0.0.1", port)
    dt, c = connect_until(host, port, DEADLINE)
    ok = ok and roundtrip(s, c)
    s.close()
    print("torn down %.0f ms after close; reopened port forwarded again after %.1f ms" % (td * 1000, dt * 1000) if ok else "bad relay")
    return 0 if ok else 1


def cmd_halfclose(host, port):
    s = listen("127.0.0.1", port)
    _, c = connect_until(host, port, DEADLINE)
    a, _ = s.accept()
    data = os.urandom(300000)
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = a.recv(65536)
        if not b:
            break
        got += b
    # the service saw EOF; its reply still reaches the half-closed client
    a.sendall(hashlib.sha256(got).hexdigest().encode())
    a.close()
    reply = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        reply += b
    c.close()
    s.close()
    ok = reply.decode() == hashlib.sha256(data).hexdigest()
    print("ok" if ok else "half-close reply mismatch")
    return 0 if ok else 1


def cmd_reset(host, port):
    s = listen("127.0.0.1", port)
    _, c = connect_until(host, port, DEADLINE)
    a, _ = s.accept()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    a.close()
    c.settimeout(DEADLINE)
    try:
        b = c.recv(10)
        c.send(b"x")
        time.sleep(0.05)
        c.send(b"x")
        print("no reset seen (read %r)" % b)
        return 1
    except ConnectionResetError:
        print("ok")
        return 0
    except OSError as e:
        print("ok (%s)" % e)
        return 0
    finally:
        s.close()


def cmd_v6(host, port):
    s = listen("::1", port, socket.AF_INET6)
    dt, c = connect_until(host, port, DEADLINE)
    ok = roundtrip(s, c)
    s.close()
    print("::1 listener forwarded after %.1f ms" % (dt * 1000) if ok else "bad relay")
    return 0 if ok else 1


def cmd_notfwd(host, port, bindaddr):
    fam = socket.AF_INET6 if ":" in bindaddr else socket.AF_INET
    s = listen(bindaddr, port, fam)
    time.sleep(0.3)
    ok = refused(host, port)
    s.close()
    print("ok" if ok else "listener on %s was forwarded" % bindaddr)
    return 0 if ok else 1


def cmd_many(host, port, n):
    s = listen("127.0.0.1", port)
    stop = threading.Event()

    def serve():
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                a, _ = s.accept()
            except OSError:
                continue
            threading.Thread(target=echo, args=(a,), daemon=True).start()

    def echo(a):
        while True:
            b = a.recv(65536)
            if not b:
                break
            a.sendall(b)
        a.close()

    threading.Thread(target=serve, daemon=True).start()
    connect_until(host, port, DEADLINE)[1].close()
    results = []

    def client(i):
        try:
            c = socket.create_connection((host, port), timeout=DEADLINE)
            data = os.urandom(20000 + i)
            c.sendall(data)
            c.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                b = c.recv(65536)
                if not b:
                    break
                got += b
            c.close()
            results.append(got == data)
        except OSError:
            results.append(False)

    ts = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    s.close()
    ok = len(results) == n and all(results)
    print("%d/%d concurrent relayed connections echoed correctly" % (sum(results), n))
    return 0 if ok else 1


def cmd_sink(bindaddr, port):
    fam = socket.AF_INET6 if ":" in bindaddr else socket.AF_INET
    s = listen(bindaddr, port, fam)
    while True:
        a, _ = s.accept()
        n = 0
        while True:
            b = a.recv(1 << 20)
            if not b:
                break
            n += len(b)
        a.sendall(str(n).encode())
        a.close()


def cmd_throughput(host, port, mib):
    _, c = connect_until(host, port, DEADLINE)
    buf = b"\0" * (1 << 20)
    t0 = time.monotonic()
    for _ in range(mib):
        c.sendall(buf)
    c.shutdown(socket.SHUT_WR)
    reply = c.recv(100)
    dt = time.monotonic() - t0
    c.close()
    if int(reply or b"-1") != mib << 20:
        print("sink counted %r bytes" % reply)
        return 1
    print("%.0f" % (mib / dt))
    return 0


def main(argv):
    cmd = argv[1]
    a = argv[2:]
    if cmd == "latency":
        return cmd_latency(a[0], int(a[1]), int(a[2]) if len(a) > 2 else 10,
                           float(a[3]) if len(a) > 3 else DEADLINE * 1000)
    if cmd == "reopen":
        return cmd_reopen(a[0], int(a[1]))
    if cmd == "halfclose":
        return cmd_halfclose(a[0], int(a[1]))
    if cmd == "reset":
        return cmd_reset(a[0], int(a[1]))
    if cmd == "v6":
        return cmd_v6(a[0], int(a[1]))
    if cmd == "notfwd":
        return cmd_notfwd(a[0], int(a[1]), a[2])
    if cmd == "many":
        return cmd_many(a[0], int(a[1]), int(a[2]))
    if cmd == "sink":
        return cmd_sink(a[0], int(a[1]))
    if cmd == "throughput":
        return cmd_throughput(a[0], int(a[1]), int(a[2]))
    print("unknown command", cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
