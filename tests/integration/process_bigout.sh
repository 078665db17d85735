#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 1 GiB of child output through one binary-protobuf Start stream: the SHA-256
# computed by the child equals the one of the bytes the client received,
# offsets are contiguous, and the throughput is printed.
. "$(dirname "$0")/process_lib.sh"
start_envd

# The sanitizer build checks the same path with 64 MiB; the static one
# carries the volume.
case $ENVD_BIN in
*asan*) SIZE=${BIGOUT_SIZE:-67108864} ;;
*) SIZE=${BIGOUT_SIZE:-1073741824} ;;
esac
"$PY" - "$TMP/req.bin" "$SIZE" <<'PY'
import struct, sys
def ln(field, b):
    out = bytearray([field << 3 | 2]); n = len(b)
    while n >= 0x80: out.append(n & 0x7f | 0x80); n >>= 7
    out.append(n); return bytes(out) + b
script = b"head -c %s /dev/urandom | tee >(sha256sum >&2)" % sys.argv[2].encode()
cfg = ln(1, b"/bin/bash") + ln(2, b"-c") + ln(2, script)
msg = ln(1, cfg) + bytes([4 << 3, 0])
open(sys.argv[1], "wb").write(b"\0" + struct.pack(">I", len(msg)) + msg)
PY

t0=$(date +%s%N)
# 1 GiB takes minutes on a loaded machine: the stream is a hang only when
# nothing at all arrives for HANG_S.
res=$(curl -s -N --speed-limit 1 --speed-time "$HANG_S" -X POST "$(url Start)" -H 'Content-Type: application/connect+proto' \
	--data-binary @"$TMP/req.bin" | "$PY" -c '
import sys, struct, hashlib
r = sys.stdin.buffer; h = hashlib.sha256(); n = 0; err = b""; exit_code = None
contiguous = True; eos = None
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i
def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i); f, t = key >> 3, key & 7
        if t == 0: v, i = varint(b, i); yield f, v
        elif t == 2:
            l, i = varint(b, i); yield f, b[i:i+l]; i += l
        else: raise SystemExit("wire type %d" % t)
while True:
    hd = r.read(5)
    if len(hd) < 5: break
    p = memoryview(r.read(struct.unpack(">I", hd[1:5])[0]))
    if hd[0] & 2: eos = bytes(p).decode(); continue
    for f, ev in fields(p):                 # StartResponse.event
        for k, v in fields(ev):             # ProcessEvent
            if k == 2:                      # data
                off = 0; chunk = None; is_err = False
                for df, dv in fields(v):
                    if df == 1000: off = dv
                    elif df in (1, 2): chunk = dv; is_err = df == 2
                if is_err: err += bytes(chunk)
                else:
                    h.update(chunk); n += len(chunk)
            elif k == 3:
                exit_code = 0
                for ef, evv in fields(v):
                    if ef == 1: exit_code = evv
print(n, h.hexdigest(), err.decode().split()[0] if err else "-", exit_code, eos)')
t1=$(date +%s%N)
read -r n got want code eos <<<"$res"
check "all bytes arrived" "$SIZE" "$n"
check "sha256 equal on both ends" "$want" "$got"
check "exit 0 and end-stream {}" "0 {}" "$code $eos"
ms=$(((t1 - t0) / 1000000))
echo "# $SIZE bytes in $ms ms: $((SIZE / 1048576 * 1000 / (ms > 0 ? ms : 1))) MiB/s end to end (urandom + sha256 + python decode included)"
summary
