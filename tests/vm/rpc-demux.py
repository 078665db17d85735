#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One guest connection to the host's NFS server, on stdin/stdout (QEMU's
guestfwd runs this once per connection).

/init mounts NFS volumes the way the platform's proxy serves them: the
MOUNT protocol and NFS itself on the same port (mountport=2049, port=2049).
A stock server has them on two ports, so this reads the first RPC call of
the connection, takes its program number (100005 is MOUNT) and relays the
whole connection to the server's MOUNT port or NFS port.

    rpc-demux.py NFS_PORT MOUNT_PORT      (server on 127.0.0.1)
    rpc-demux.py --listen SOCKET NFS_PORT MOUNT_PORT

With --listen it stays up and serves every connection made to the Unix
socket SOCKET the same way (a thread each): QEMU then runs only a socat
per guest connection, not a Python start-up each.
"""
import os
import select
import socket
import struct
import sys
import threading

MOUNT_PROG = 100005


def read_exact(fd, n):
    b = b""
    while len(b) < n:
        c = os.read(fd, n - len(b))
        if not c:
            return None
        b += c
    return b


def relay(cin, cout, nfs_port, mount_port):
    """One connection: its first call picks the server; then both ways."""
    # Record mark (4), xid (4), message type (4), RPC version (4), program (4).
    head = read_exact(cin, 20)
    if head is None:
        return
    prog = struct.unpack(">I", head[16:20])[0]
    port = mount_port if prog == MOUNT_PROG else nfs_port
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(head)
        fds = [cin, s.fileno()]
        while fds:
            r, _, _ = select.select(fds, [], [])
            if cin in r:
                c = os.read(cin, 65536)
                if c:
                    s.sendall(c)
                else:
                    s.shutdown(socket.SHUT_WR)
                    fds.remove(cin)
            if s.fileno() in r:
                c = s.recv(65536)
                if not c:
                    return
                view = memoryview(c)
                while view:
                    view = view[os.write(cout, view):]
    finally:
        s.close()


def serve(conn, nfs_port, mount_port):
    try:
        relay(conn.fileno(), conn.fileno(), nfs_port, mount_port)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    if sys.argv[1] == "--listen":
        path, nfs_port, mount_port = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        ls.listen(64)
        while True:
            conn, _ = ls.accept()
            threading.Thread(target=serve, args=(conn, nfs_port, mount_port), daemon=True).start()
    relay(0, 1, int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    try:
        main()
    except OSError:
        pass
