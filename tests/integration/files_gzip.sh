#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gzip downloads (GET /files with Accept-Encoding: gzip). The encoding
# choice: a client on this machine, data that does not shrink and small
# files get identity even when gzip is offered; over a slow link (a veth
# shaped with tc tbf, servers in a network namespace; needs root) text is
# gzipped, for curl over HTTP/1.1 and h2c and for the SDK. And when gzip is
# sent (forced with identity;q=0 here), every stream must
# pass `gzip -t` and decode to the file, over HTTP/1.1 and h2c, for random
# data (stored blocks), text (deflated blocks), empty and 1-byte files,
# sizes on and around the block boundary, a file growing while it is read,
# a file rewritten in place while it is read, and a client that leaves
# mid-stream.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

envd_start || exit 1
D=$(mktemp -d /tmp/envd-gzip-it.XXXXXX)
WRITER=""
cleanup_gzip() {
	[ -n "$WRITER" ] && kill "$WRITER" 2>/dev/null
	rm -rf "$D"
	_t_cleanup
}
on_exit cleanup_gzip
U="$ENVD_URL/files?username=root&path="

# Deterministic text that shrinks well under gzip (words and lines).
make_text() {
	python3 - "$1" "$2" <<'PY'
import random, sys
n = int(sys.argv[1]); rnd = random.Random(int(sys.argv[2]))
words = "sandbox process stream file block gzip read write the of and to in is envd output input".split()
out = []
size = 0
while size < n:
    line = " ".join(rnd.choice(words) for _ in range(rnd.randint(4, 14))) + "\n"
    out.append(line); size += len(line)
sys.stdout.write("".join(out)[:n])
PY
}

# get NAME FILE [curl args]: download FILE gzip-encoded into $D/NAME.gz,
# headers into $D/NAME.hdr.
get() {
	local name=$1 f=$2
	shift 2
	curl -s -H 'Accept-Encoding: gzip, identity;q=0' -D "$D/$name.hdr" -o "$D/$name.gz" "$@" "$U$f"
}

# verify NAME FILE: gzip -t passes and the body decodes to FILE.
verify() {
	local name=$1 f=$2
	check "$name: Content-Encoding gzip" grep -qi '^content-encoding: gzip' "$D/$name.hdr"
	check "$name: gzip -t" gzip -t "$D/$name.gz"
	check "$name: decodes to the file" sh -c "gzip -dc '$D/$name.gz' | cmp -s - '$f'"
}

head -c $((3 * 1048576 + 12345)) /dev/urandom >"$D/random.bin"
make_text $((2 * 1048576 + 999)) 1 >"$D/text.txt"
: >"$D/empty.bin"
printf 'x' >"$D/one.bin"
head -c 131072 /dev/urandom >"$D/block.bin"
make_text $((262144 + 1)) 2 >"$D/block1.txt"
# Random and text pieces alternating, so stored and deflated blocks mix.
for i in 1 2 3; do head -c 200000 /dev/urandom; make_text 200000 $i; done >"$D/mixed.bin"

for f in random.bin text.txt empty.bin one.bin block.bin block1.txt mixed.bin; do
	get "h1-$f" "$D/$f"
	verify "h1-$f" "$D/$f"
	get "h2-$f" "$D/$f" --http2-prior-knowledge
	verify "h2-$f" "$D/$f"
done

# Data that does not shrink costs no more than a copy: a 128 KiB block goes
# out as three stored blocks (5 bytes each), plus the header and trailer.
rs=$(stat -c %s "$D/random.bin")
gs=$(stat -c %s "$D/h1-random.bin.gz")
check "random data sent stored (gzip $gs for $rs bytes)" test "$gs" -le $((rs + (rs / 131072 + 1) * 15 + 23))
# A client reading slowly (4 MB/s): the level follows how fast the socket
# drains against how fast the compressor fills it, so how much the text
# shrinks depends on this machine's speed at the moment (on a loaded one,
# down to stored blocks): that is measured by the benchmark (bench.sh
# --only sdk_link), not judged here. What holds on any machine: the stream
# is whole, and never larger than a stored copy.
get slowtext "$D/text.txt" --limit-rate 4M
verify slowtext "$D/text.txt"
ts=$(stat -c %s "$D/text.txt")
gs=$(stat -c %s "$D/slowtext.gz")
check "text read slowly: no larger than a stored copy (gzip $gs for $ts bytes)" test "$gs" -le $((ts + (ts / 131072 + 1) * 15 + 23))
echo "# text read at 4 MB/s: gzip $gs for $ts bytes ($(awk -v a="$ts" -v b="$gs" 'BEGIN {printf "%.1f", a / b}')x)"

# A file growing while it is read: the client gets a valid stream of a
# prefix of the final file. The download is slowed down so that the
# writer appends while blocks are still being read.
make_text $((4 * 1048576)) 3 >"$D/grow.txt"
make_text 65536 4 >"$D/chunk.txt"
(for _ in $(seq 1 400); do cat "$D/chunk.txt" >>"$D/grow.txt"; sleep 0.01; done) &
WRITER=$!
get grow "$D/grow.txt" --limit-rate 4M
kill "$WRITER" 2>/dev/null
wait "$WRITER" 2>/dev/null
WRITER=""
check "growing file: gzip -t" gzip -t "$D/grow.gz"
gzip -dc "$D/grow.gz" >"$D/grow.out" 2>/dev/null
gl=$(stat -c %s "$D/grow.out")
check "growing file: at least the size at the start ($gl bytes)" test "$gl" -ge $((4 * 1048576))
check "growing file: a prefix of the final file" cmp -s "$D/grow.out" <(head -c "$gl" "$D/grow.txt")

# A file rewritten in place while it is read: whatever mix of old and new
# bytes the client gets, the stream must stay valid (the dictionary each
# block was compressed with must be what the client decoded).
make_text $((4 * 1048576)) 5 >"$D/rewrite.txt"
make_text $((4 * 1048576)) 6 >"$D/rewrite2.txt"
(for i in $(seq 0 63); do
	dd if="$D/rewrite2.txt" of="$D/rewrite.txt" bs=65536 skip="$i" seek="$i" count=1 conv=notrunc 2>/dev/null
	sleep 0.01
done) &
WRITER=$!
get rewrite "$D/rewrite.txt" --limit-rate 4M
wait "$WRITER" 2>/dev/null
WRITER=""
check "rewritten file: gzip -t" gzip -t "$D/rewrite.gz"
rl=$(gzip -dc "$D/rewrite.gz" 2>/dev/null | wc -c)
expect_eq "rewritten file: full length" $((4 * 1048576)) "$rl"

# A client that goes away mid-stream costs the daemon nothing.
make_text $((16 * 1048576)) 7 >"$D/big.txt"
curl -s -H 'Accept-Encoding: gzip, identity;q=0' -o /dev/null --limit-rate 1M --max-time 1 "$U$D/big.txt"
check "client left mid-stream: envd alive" envd_alive
get after "$D/text.txt"
verify after "$D/text.txt"

# Identity is untouched when gzip is not asked for.
curl -s -D "$D/id.hdr" -o "$D/id.out" "$U$D/text.txt"
check "no Accept-Encoding: identity" sh -c "! grep -qi '^content-encoding' '$D/id.hdr' && cmp -s '$D/id.out' '$D/text.txt'"

# --- the encoding choice ---

# A client on this machine: the bytes cost less than compressing them.
curl -s -H 'Accept-Encoding: gzip, deflate' -D "$D/lo.hdr" -o "$D/lo.out" "$U$D/text.txt"
check "loopback, gzip offered: identity with Content-Length" sh -c \
	"! grep -qi '^content-encoding' '$D/lo.hdr' && grep -qi '^content-length: $(stat -c %s "$D/text.txt")' '$D/lo.hdr'"
check "loopback, gzip offered: the file" cmp -s "$D/lo.out" "$D/text.txt"
curl -s -H 'Accept-Encoding: gzip' -H 'Range: bytes=5-9' -D "$D/lr.hdr" -o "$D/lr.out" "$U$D/text.txt"
check "Range with gzip offered: 206 identity" sh -c "grep -q '^HTTP/1.1 206' '$D/lr.hdr' && ! grep -qi '^content-encoding' '$D/lr.hdr'"
check "Range with gzip offered: the bytes" cmp -s "$D/lr.out" <(tail -c +6 "$D/text.txt" | head -c 5)

# A slow link: envd in a network namespace, its output shaped to 20 Mbit/s.
. scripts/shaped-link.sh
if [ "$(id -u)" = 0 ] && command -v tc >/dev/null && link_up gz$$ 23 2>/dev/null && link_shape 20mbit; then
	on_exit 'link_down; cleanup_gzip'
	LPORT=$(free_port)
	link_exec "$ENVD_BIN" -isnotfc -port "$LPORT" -no-cgroups -default-user root -verbose >"$D/link-envd.log" 2>&1 &
	LPID=$!
	ENVD_PIDS+=("$LPID")
	LU="http://$LINK_SERVER:$LPORT"
	deadline=$((SECONDS + 120))
	until curl -s -o /dev/null "$LU/health"; do
		[ "$SECONDS" -lt "$deadline" ] && kill -0 "$LPID" 2>/dev/null || break
		sleep 0.05
	done
	make_text $((2 * 1048576)) 8 >"$D/slow.txt"
	head -c $((512 * 1024)) /dev/urandom >"$D/slow.bin"
	make_text 1000 9 >"$D/small.txt"
	for proto in h1 h2; do
		extra=()
		[ $proto = h2 ] && extra=(--http2-prior-knowledge)
		curl -s "${extra[@]}" -H 'Accept-Encoding: gzip, deflate' -D "$D/s-$proto.hdr" -o "$D/s-$proto.gz" \
			"$LU/files?username=root&path=$D/slow.txt"
		check "slow link $proto: text gzipped" grep -qi '^content-encoding: gzip' "$D/s-$proto.hdr"
		check "slow link $proto: gzip -t" gzip -t "$D/s-$proto.gz"
		check "slow link $proto: decodes to the file" sh -c "gzip -dc '$D/s-$proto.gz' | cmp -s - '$D/slow.txt'"
	done
	# The link's rate as envd measured it (-verbose logs it with every gzip
	# download), over a download of some seconds. One measured with the
	# link as the bottleneck is the link's: after a loss the acks arrive
	# in a burst, and the best 20 ms interval once read three times this
	# link. No bound rate at all is no error, and no pass either: under
	# qemu-user TCP_INFO has no rate counters, and a compressor slower
	# than the link never makes output wait.
	make_text $((16 * 1048576)) 10 >"$D/long.txt"
	n0=$(wc -l <"$D/link-envd.log")
	curl -s -H 'Accept-Encoding: gzip' -o "$D/long.gz" "$LU/files?username=root&path=$D/long.txt"
	check "slow link, 16 MiB of text: decodes to the file" sh -c "gzip -dc '$D/long.gz' | cmp -s - '$D/long.txt'"
	max_bound=$(tail -n +$((n0 + 1)) "$D/link-envd.log" | grep -ao 'link bound [0-9]*' | awk '{ if ($3 > m) m = $3 } END { print m + 0 }')
	if [ "$max_bound" -gt 0 ]; then
		check "slow link: a bound rate is the link's, not a burst of acks ($max_bound B/s, link 2500000)" \
			test "$max_bound" -le 3250000
	else
		echo "# slow link: no rate measured with the link as the bottleneck; its check not run"
	fi
	curl -s -H 'Accept-Encoding: gzip' -D "$D/sr.hdr" -o "$D/sr.out" "$LU/files?username=root&path=$D/slow.bin"
	check "slow link: random data identity" sh -c "! grep -qi '^content-encoding' '$D/sr.hdr' && cmp -s '$D/sr.out' '$D/slow.bin'"
	curl -s -H 'Accept-Encoding: gzip' -D "$D/ss.hdr" -o "$D/ss.out" "$LU/files?username=root&path=$D/small.txt"
	check "slow link: a 1000-byte file identity" sh -c "! grep -qi '^content-encoding' '$D/ss.hdr' && cmp -s '$D/ss.out' '$D/small.txt'"
	# The SDK's own decoder on what envd chose for it.
	if [ -d tests/sdk/node_modules/e2b ]; then
		out=$(cd tests/sdk && E2B_DEBUG=true E2B_SANDBOX_URL=$LU timeout 300 node --input-type=module -e "
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
const require = createRequire(process.cwd() + '/package.json')
const { Sandbox } = require('e2b')
const sbx = await Sandbox.create({ debug: true })
const p = '$D/slow.txt'
const enc = (await fetch('$LU/files?username=root&path=' + encodeURIComponent(p))).headers.get('content-encoding')
const got = Buffer.from(await sbx.files.read(p, { format: 'bytes', user: 'root' }))
console.log(enc, got.equals(readFileSync(p)) ? 'same' : 'differs')
process.exit(0)" 2>&1)
		expect_eq "slow link: the SDK reads gzip and decodes the file" "gzip same" "$out"
	fi
	check "slow link: envd alive" kill -0 "$LPID"
else
	echo "skip - slow-link checks need root, ip netns and tc"
fi

finish
