#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The racers of hostile_write.sh, run as an unprivileged user. Each
# watches a directory with inotify and acts on a name the moment envd
# creates it, until a stop file appears (or HANG_S passes), then prints
# what it achieved on its last line.
#
#   temp_reader DIR STOP    opens every upload temporary (.envd-upload.*)
#                           for reading and keeps it; at the end reads
#                           them: "opened N read M"
#   dir_swapper DIR TARGET STOP
#                           a new directory d* is moved aside and a
#                           symbolic link d* -> TARGET put in its place:
#                           "swapped N"
import ctypes
import os
import select
import struct
import sys
import time

HANG_S = float(os.environ.get("HANG_S", "600"))
IN_CREATE = 0x100
IN_ISDIR = 0x40000000


def events(d, stop):
    """Yield (name, mask) of creations in d until the stop file exists."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if fd < 0 or libc.inotify_add_watch(fd, d.encode(), IN_CREATE) < 0:
        sys.exit("inotify: %s" % os.strerror(ctypes.get_errno()))
    print("ready", flush=True)
    deadline = time.time() + HANG_S
    while time.time() < deadline and not os.path.exists(stop):
        r, _, _ = select.select([fd], [], [], 0.05)
        if not r:
            continue
        buf = os.read(fd, 65536)
        i = 0
        while i + 16 <= len(buf):
            _, mask, _, ln = struct.unpack_from("iIII", buf, i)
            name = buf[i + 16:i + 16 + ln].split(b"\0")[0].decode(errors="replace")
            i += 16 + ln
            yield name, mask
    os.close(fd)


def temp_reader(d, stop):
    fds = []
    for name, _ in events(d, stop):
        if name.startswith(".envd-upload."):
            try:
                fds.append(os.open(os.path.join(d, name), os.O_RDONLY | os.O_NONBLOCK))
            except OSError:
                pass
    read = 0
    for fd in fds:
        try:
            if os.pread(fd, 4096, 0):
                read += 1
        except OSError:
            pass
        os.close(fd)
    print("opened %d read %d" % (len(fds), read), flush=True)


def dir_swapper(d, target, stop):
    swapped = 0
    for name, mask in events(d, stop):
        if mask & IN_ISDIR and name.startswith("d"):
            p = os.path.join(d, name)
            try:
                os.rename(p, os.path.join(d, ".aside-%d" % swapped))
                os.symlink(target, p)
                swapped += 1
            except OSError:
                pass
    print("swapped %d" % swapped, flush=True)


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "temp_reader":
        temp_reader(a[0], a[1])
    elif cmd == "dir_swapper":
        dir_swapper(a[0], a[1], a[2])
    else:
        sys.exit("unknown " + cmd)
