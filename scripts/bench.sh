#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The benchmark suite: envd and, in the same run, the floor or the best
# existing server for the same work. Loopback only; every loop is bounded;
# every process started here is killed and every temp file removed on exit.
#
#   scripts/bench.sh [--quick] [--only ID,ID...] [--out FILE]
#
# IDs: rtt rtt_cgroup sdk_rtt sdk_session sdk_today unary json tree stream files sdk_files sdk_link archive footprint idle busy sdk_concurrent conns hung tools try vm_boot vm_rtt
# Writes FILE (default bench/results/latest.json) and prints a table. Each
# figure carries the command that reproduces it: `scripts/bench.sh --only ID`
# (add --quick for the small variant), and the raw client command it ran.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

QUICK=0
ONLY=""
OUT=bench/results/latest.json
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--only) ONLY=$2; shift ;;
	--out) OUT=$2; shift ;;
	*) echo "usage: $0 [--quick] [--only ID,...] [--out FILE]" >&2; exit 2 ;;
	esac
	shift
done

if [ $QUICK = 1 ]; then
	N_RTT=100 N_SDK=30 N_SDK_CONC=50 N_UNARY=2000 STREAM_BYTES=$((16 << 20))
	FILE_MB=16 TEXT_MB=8 SDK_FILE_MB=8 N_IDLE=50 N_BUSY=10 BUSY_BYTES=$((1 << 20)) N_CONNS=200 N_EXEC=5
	ARCH_FILES=1000 ARCH_MB=16 N_HUNG=30 TOOLS_FILES=10000 TOOLS_ROUNDS=3 TOOLS_SDK=5 N_TREE=2000
	TRY_FILES=10000 TRY_ROUNDS=2 TRY_MOD=100 TRY_NEW=100
else
	N_RTT=1000 N_SDK=1000 N_SDK_CONC=1000 N_UNARY=100000 STREAM_BYTES=$((1 << 30))
	FILE_MB=1024 TEXT_MB=128 SDK_FILE_MB=64 N_IDLE=1000 N_BUSY=100 BUSY_BYTES=$((16 << 20)) N_CONNS=10000 N_EXEC=20
	ARCH_FILES=10000 ARCH_MB=1024 N_HUNG=200 TOOLS_FILES=100000 TOOLS_ROUNDS=7 TOOLS_SDK=20 N_TREE=100000
	TRY_FILES=100000 TRY_ROUNDS=5 TRY_MOD=1000 TRY_NEW=1000
fi
MODE_FLAG=$([ $QUICK = 1 ] && echo " --quick" || true)

ENVD=$ROOT/build/envd
BENCH=$ROOT/build/bench/envdbench
[ -x "$ENVD" ] && [ -x "$BENCH" ] || { echo "bench: build/envd and build/bench/envdbench are needed (make bench)" >&2; exit 1; }

# Both servers and clients need more than the default 1024 descriptors for
# the 10 000-connection test.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

mkdir -p build/bench
TMP=$(mktemp -d "$ROOT/build/bench/run.XXXXXX")
RAW=$TMP/raw.jsonl
: >"$RAW"
PIDS=()
cleanup() {
	type hungfs_cleanup >/dev/null 2>&1 && hungfs_cleanup
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }
log() { echo "bench: $*" >&2; }

# The system python3: a version-manager shim on PATH costs hundreds of ms
# per start, and a figure starts one or two.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

free_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT: until something accepts on it (bounded: 60 s, for a busy
# machine; the time is not a figure).
wait_port() {
	local end=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$end" ]; do
		(exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
		sleep 0.01
	done
	return 1
}

# start_envd [flags]: sets EPORT, EPID. No cgroups unless -cgroup-root is
# given: the machine's own cgroup tree is left alone.
start_envd() {
	EPORT=$(free_port)
	local cg=-no-cgroups
	case " $* " in *" -cgroup-root "*) cg= ;; esac
	"$ENVD" -isnotfc -port "$EPORT" $cg "$@" >>"$TMP/envd.log" 2>&1 &
	EPID=$!
	PIDS+=("$EPID")
	wait_port "$EPORT" || { log "envd did not start"; cat "$TMP/envd.log" >&2; return 1; }
	curl -s -o /dev/null "http://127.0.0.1:$EPORT/health"
}
# stop_pid PID: a server that died before we stopped it is an error worth a
# figure of its own, with its log kept for a look.
stop_pid() {
	if ! kill -0 "$1" 2>/dev/null; then
		log "process $1 died during the run; logs in build/bench/last-run-logs"
		record died "{\"errors\":1,\"pid\":$1}" "see build/bench/last-run-logs"
		mkdir -p build/bench/last-run-logs && cp "$TMP"/*.log build/bench/last-run-logs/ 2>/dev/null
	fi
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

WWW=$TMP/www
mkdir -p "$WWW"
printf 'ok\n' >"$WWW/tiny"
printf 'ok\n' >"$WWW/health"

# start_nghttpd: sets NPORT, NPID (h2c, serves $WWW).
start_nghttpd() {
	NPORT=$(free_port)
	nghttpd --no-tls -d "$WWW" "$NPORT" >/dev/null 2>&1 &
	NPID=$!
	PIDS+=("$NPID")
	wait_port "$NPORT"
}

# start_nginx: sets XPORT, XPID (HTTP/1.1, one worker process like envd's one
# event loop; gzip at zlib's default level 6, the level envd uses).
start_nginx() {
	XPORT=$(free_port)
	local d=$TMP/nginx
	mkdir -p "$d/logs" "$d/tmp"
	cat >"$d/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $d/nginx.pid;
error_log $d/logs/error.log;
events { worker_connections 20000; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	keepalive_requests 10000000;
	client_body_temp_path $d/tmp/body;
	proxy_temp_path $d/tmp/proxy;
	fastcgi_temp_path $d/tmp/fcgi;
	uwsgi_temp_path $d/tmp/uwsgi;
	scgi_temp_path $d/tmp/scgi;
	default_type application/octet-stream;
	gzip on;
	gzip_comp_level 6;
	gzip_types *;
	gzip_min_length 0;
	server { listen 127.0.0.1:$XPORT; root $WWW; }
}
EOF
	nginx -p "$d" -c "$d/nginx.conf" -e "$d/logs/error.log" >/dev/null 2>&1 &
	XPID=$!
	PIDS+=("$XPID")
	wait_port "$XPORT"
}

# gen_text MIB FILE: deterministic log-like text (timestamps, levels,
# words from a few hundred, numbers, paths) that gzip shrinks 3-6x, as
# build and application logs do.
gen_text() {
	python3 - "$1" "$2" <<'PY'
import random, sys
mib, path = int(sys.argv[1]), sys.argv[2]
rnd = random.Random(15)
syll = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "dex", "bin", "proc", "file", "net", "io"]
words = sorted({"".join(rnd.choice(syll) for _ in range(rnd.randint(1, 4))) for _ in range(600)})
levels = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"]
lines = []
for i in range(20000):
    w = " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 12)))
    lines.append("2026-11-30T%02d:%02d:%02d.%06dZ %-5s [%s] %s id=%d path=/home/user/%s/%s.txt\n" % (
        rnd.randrange(24), rnd.randrange(60), rnd.randrange(60), rnd.randrange(10**6), rnd.choice(levels),
        rnd.choice(words), w, rnd.randrange(10**7), rnd.choice(words), rnd.choice(words)))
block = "".join(lines).encode()
with open(path, "wb") as f:
    left = mib << 20
    while left > 0:
        # Reorder lines per block: repeats are farther apart than a window.
        rnd.shuffle(lines)
        b = "".join(lines).encode()[:left]
        f.write(b)
        left -= len(b)
PY
}

# record ID JSON CMD: one raw result line.
record() {
	"$PY" -c 'import json,sys; print(json.dumps({"id":sys.argv[1],"result":json.loads(sys.argv[2]),"cmd":sys.argv[3]}))' \
		"$1" "$2" "$3" >>"$RAW" || log "$1: unparsable result: $2"
}

# run_json ID CMD...: run a client that prints one JSON line, record it.
run_json() {
	local id=$1
	shift
	local out
	out=$("$@" 2>>"$TMP/client.log" | tail -n1)
	[ -n "$out" ] || out='{"errors":1}'
	record "$id" "$out" "$(printf '%q ' "$@" | sed "s#$ROOT/##g")"
}

# h2load_json ARGS...: run h2load, print its figures as JSON.
h2load_json() {
	h2load "$@" 2>&1 | "$PY" "$ROOT/bench/report.py" h2load
}

# curl_json ARGS...: one transfer, its figures as JSON.
curl_json() {
	local out rc
	out=$(curl -s -o /dev/null -w '"seconds":%{time_total},"first_byte":%{time_starttransfer},"down":%{size_download},"up":%{size_upload},"status":%{http_code}' "$@")
	rc=$?
	echo "{${out/\"status\":000/\"status\":0},\"errors\":$((rc != 0))}"
}

# timed_json CMD...: wall time of a shell pipeline as JSON.
timed_json() {
	local t0 t1
	t0=$(date +%s.%N)
	bash -c "$1" >/dev/null 2>&1
	local rc=$?
	t1=$(date +%s.%N)
	"$PY" -c 'import sys; print("{\"seconds\":%.4f,\"errors\":%d}" % (float(sys.argv[2])-float(sys.argv[1]), int(sys.argv[3])!=0))' "$t0" "$t1" "$rc"
}

# base_envd: the path of a build of BENCH_BASE (default e015229), made once
# from `git archive` of that commit with this tree's static libraries and
# cached in build/bench/base-COMMIT/; empty when it cannot be built.
base_envd() {
	local c=${BENCH_BASE:-e015229} d
	d=$ROOT/build/bench/base-$c
	if [ ! -x "$d/build/envd" ]; then
		git -C "$ROOT" cat-file -e "$c^{commit}" 2>/dev/null || return 0
		[ -d "$ROOT/build/deps/musl/lib" ] || return 0
		log "building envd at $c for the path-request comparison (once; cached in $d)"
		rm -rf "$d" && mkdir -p "$d/build" || return 0
		git -C "$ROOT" archive "$c" | tar -x -C "$d" || return 0
		ln -sfn "$(readlink -f "$ROOT/build/deps")" "$d/build/deps"
		make -C "$d" -j2 build/envd COMMIT="$c" >"$d/build.log" 2>&1 || { log "build of $c failed: $d/build.log"; return 0; }
	fi
	echo "$d/build/envd"
}

START=$(date +%s)

# 1. Command round trip ------------------------------------------------------
if want rtt; then
	log "command round trip ($N_RTT runs each, interleaved)"
	start_envd
	run_json rtt "$BENCH" rtt "$EPORT" "$N_RTT"
	stop_pid "$EPID"
fi

# 1b. The same with a cgroup per command, where a private cgroup2 directory
# can be made (root, writable cgroup2 mount): the cost of the leaf.
if want rtt_cgroup; then
	CGB=""
	for base in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ "$(stat -fc %T "$base" 2>/dev/null)" = cgroup2fs ] || continue
		mkdir "$base/envd-bench-$$" 2>/dev/null && { CGB=$base/envd-bench-$$; break; }
	done
	if [ -n "$CGB" ]; then
		log "command round trip with a cgroup per command ($N_RTT runs each)"
		start_envd -cgroup-root "$CGB"
		run_json rtt_cgroup "$BENCH" rtt "$EPORT" "$N_RTT"
		stop_pid "$EPID"
		for _ in $(seq 100); do
			find "$CGB" -depth -type d -exec rmdir {} \; 2>/dev/null
			[ -d "$CGB" ] || break
			sleep 0.05
		done
	else
		log "rtt_cgroup: no writable cgroup2 mount here, skipped"
	fi
fi

SDK_OK=0
[ -d tests/sdk/node_modules/e2b ] && command -v node >/dev/null && SDK_OK=1
sdk_env() {
	id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
	export E2B_DEBUG=true E2B_SANDBOX_URL="http://127.0.0.1:$EPORT"
	export BENCH_USER=user BENCH_UID=$(id -u user) BENCH_GID=$(id -g user) BENCH_HOME=$(getent passwd user | cut -d: -f6)
}
if want sdk_rtt && [ $SDK_OK = 1 ]; then
	log "SDK commands.run('true') vs bash -l -c true ($N_SDK each)"
	start_envd -default-user user
	sdk_env
	run_json sdk_rtt node bench/sdk.mjs rtt "$N_SDK"
	stop_pid "$EPID"
fi
if want sdk_session && [ $SDK_OK = 1 ]; then
	log "SDK commands.run('true') in a warm session vs a plain one ($N_SDK each)"
	start_envd -default-user user
	sdk_env
	run_json sdk_session node bench/sdk.mjs session "$N_SDK"
	stop_pid "$EPID"
fi
# The SDK's commands.run('true') and files.read of a small file beside the
# same through a build of BENCH_TODAY (default: where this branch left main,
# the tree before its changes), all interleaved: "no slower than today".
if want sdk_today && [ $SDK_OK = 1 ]; then
	TODAY=${BENCH_TODAY:-$(git -C "$ROOT" merge-base HEAD main 2>/dev/null)}
	TODAY_BIN=$([ -n "$TODAY" ] && BENCH_BASE=$(git -C "$ROOT" rev-parse --short "$TODAY") base_envd)
	if [ -n "$TODAY_BIN" ]; then
		log "SDK commands.run('true') and a small files.read beside envd $TODAY ($N_SDK each)"
		start_envd -default-user user
		TPORT=$EPORT TPID=$EPID
		ENVD=$TODAY_BIN start_envd -default-user user
		OPORT=$EPORT OPID=$EPID
		EPORT=$TPORT EPID=$TPID
		sdk_env
		mkdir -p "$TMP/sdkread" && chmod 755 "$TMP" "$TMP/sdkread"
		head -c 2000 /dev/urandom | base64 -w 100 >"$TMP/sdkread/small.txt"
		chmod 644 "$TMP/sdkread/small.txt"
		run_json sdk_today node bench/sdk.mjs pair "$N_SDK" "$TMP/sdkread/small.txt" \
			"http://127.0.0.1:$TPORT" "http://127.0.0.1:$OPORT"
		stop_pid "$TPID"; stop_pid "$OPID"
	else
		log "sdk_today: no build of ${BENCH_TODAY:-the merge base with main}; skipped"
	fi
fi

# 2. Unary RPC: filesystem.Filesystem/Stat vs a tiny static file -------------
if want unary; then
	log "unary Stat: h2load, $N_UNARY requests per run"
	printf '\n\004/tmp' >"$TMP/stat.bin" # StatRequest{path:"/tmp"}
	start_envd
	start_nghttpd
	start_nginx
	H2=(-n "$N_UNARY" -c 4 -m 32 -t 1)
	H1=(-n "$N_UNARY" -c 32 -t 1 --h1)
	SH=(-d "$TMP/stat.bin" -H 'content-type: application/proto' -H 'connect-protocol-version: 1')
	for round in 1 2; do
		record unary_h2_envd "$(h2load_json "${H2[@]}" "${SH[@]}" "http://127.0.0.1:$EPORT/filesystem.Filesystem/Stat")" \
			"h2load ${H2[*]} -d stat.bin -H 'content-type: application/proto' -H 'connect-protocol-version: 1' http://127.0.0.1:PORT/filesystem.Filesystem/Stat"
		record unary_h2_nghttpd "$(h2load_json "${H2[@]}" "http://127.0.0.1:$NPORT/tiny")" \
			"h2load ${H2[*]} http://127.0.0.1:NGHTTPD_PORT/tiny"
		record unary_h1_envd "$(h2load_json "${H1[@]}" "${SH[@]}" "http://127.0.0.1:$EPORT/filesystem.Filesystem/Stat")" \
			"h2load ${H1[*]} -d stat.bin -H 'content-type: application/proto' -H 'connect-protocol-version: 1' http://127.0.0.1:PORT/filesystem.Filesystem/Stat"
		record unary_h1_nginx "$(h2load_json "${H1[@]}" "http://127.0.0.1:$XPORT/tiny")" \
			"h2load ${H1[*]} http://127.0.0.1:NGINX_PORT/tiny"
	done
	stop_pid "$EPID"; stop_pid "$NPID"; stop_pid "$XPID"

	# 2b. Path requests at low and high concurrency: Stat, GET /files of a
	# small file, ListDir of a small directory. Beside nghttpd / nginx
	# serving a small file, and beside the same requests to a build of
	# BENCH_BASE (default e015229: path syscalls still on the loop), made
	# once and cached under build/bench/ when the commit can be built here.
	log "path requests: Stat, small GET /files, ListDir at -c1 -m1 and -c8 -m16"
	printf 'hello\n' >"$WWW/small6"
	mkdir -p "$TMP/smalldir"
	for i in 1 2 3 4 5 6 7 8 9 10; do printf '%s\n' "$i" >"$TMP/smalldir/f$i"; done
	"$PY" -c 'import sys; p=sys.argv[1].encode(); open(sys.argv[2],"wb").write(b"\n"+bytes([len(p)])+p)' \
		"$TMP/smalldir" "$TMP/ls.bin" # ListDirRequest{path}
	BASE_BIN=$(base_envd)
	start_envd
	start_nghttpd
	start_nginx
	BPORT=""
	if [ -n "$BASE_BIN" ]; then
		EP0=$EPORT EPID0=$EPID
		ENVD=$BASE_BIN start_envd && { BPORT=$EPORT; BPID=$EPID; }
		EPORT=$EP0 EPID=$EPID0
	else
		log "no build of ${BENCH_BASE:-e015229}: its column is left out"
	fi
	N1=$((N_UNARY / 4)) N8=$N_UNARY
	LH=(-d "$TMP/ls.bin" -H 'content-type: application/proto' -H 'connect-protocol-version: 1')
	# path ID N C M H1 URL-PATH-ON-ENVD ANCHOR-PORT ANCHOR-NAME [h2load flags for envd...]
	path_fig() {
		local id=$1 n=$2 c=$3 m=$4 h1=$5 up=$6 aport=$7 aname=$8
		shift 8
		local flags=(-n "$n" -c "$c" -t 1) shown=${up//$WWW\/small6/FILE}
		[ "$h1" = 1 ] && flags+=(--h1) || flags+=(-m "$m")
		record "path_${id}_envd" "$(h2load_json "${flags[@]}" "$@" "http://127.0.0.1:$EPORT$up")" \
			"h2load ${flags[*]} ... http://127.0.0.1:PORT$shown"
		[ -n "$BPORT" ] && record "path_${id}_base" "$(h2load_json "${flags[@]}" "$@" "http://127.0.0.1:$BPORT$up")" \
			"h2load ${flags[*]} ... http://127.0.0.1:BASE_PORT$shown (envd ${BENCH_BASE:-e015229})"
		[ -n "$aport" ] && record "path_${id}_anchor" "$(h2load_json "${flags[@]}" "http://127.0.0.1:$aport/small6")" \
			"h2load ${flags[*]} http://127.0.0.1:${aname}_PORT/small6"
	}
	for round in 1 2; do
		path_fig stat_h2_c1 "$N1" 1 1 0 /filesystem.Filesystem/Stat "$NPORT" NGHTTPD "${SH[@]}"
		path_fig stat_h2_c8 "$N8" 8 16 0 /filesystem.Filesystem/Stat "$NPORT" NGHTTPD "${SH[@]}"
		path_fig stat_h1_c8 "$N8" 8 1 1 /filesystem.Filesystem/Stat "$XPORT" NGINX "${SH[@]}"
		path_fig get_h2_c1 "$N1" 1 1 0 "/files?path=$WWW/small6" "$NPORT" NGHTTPD
		path_fig get_h2_c8 "$N8" 8 16 0 "/files?path=$WWW/small6" "$NPORT" NGHTTPD
		path_fig get_h1_c8 "$N8" 8 1 1 "/files?path=$WWW/small6" "$XPORT" NGINX
		path_fig ls_h2_c8 $((N8 / 10)) 8 16 0 /filesystem.Filesystem/ListDir "" "" "${LH[@]}"
	done
	record path_threads "{\"threads\":$(ls /proc/"$EPID"/task 2>/dev/null | wc -l),\"errors\":0}" "ls /proc/ENVD_PID/task | wc -l"
	stop_pid "$EPID"; stop_pid "$NPID"; stop_pid "$XPID"
	[ -n "$BPORT" ] && stop_pid "$BPID"
fi

# 2c. Stat with Connect JSON (what the SDK and curl send) beside proto on
# the same build, beside a build of BENCH_BASE with the same JSON, and
# beside nghttpd serving a small file: three rounds, each pair alternating,
# medians taken (a shared machine moves single figures by 10-30 %).
if want json; then
	log "Stat with Connect JSON beside proto: h2load -c1 -m1 and -c8 -m16, 3 rounds alternating"
	printf '{"path":"/tmp"}' >"$TMP/stat.json"
	printf '\n\004/tmp' >"$TMP/stat.bin"
	printf 'hello\n' >"$WWW/small6"
	BASE_BIN=$(base_envd)
	start_envd
	start_nghttpd
	BPORT=""
	if [ -n "$BASE_BIN" ]; then
		EP0=$EPORT EPID0=$EPID
		ENVD=$BASE_BIN start_envd && { BPORT=$EPORT; BPID=$EPID; }
		EPORT=$EP0 EPID=$EPID0
	else
		log "no build of ${BENCH_BASE:-e015229}: its column is left out"
	fi
	SP=(-d "$TMP/stat.bin" -H 'content-type: application/proto' -H 'connect-protocol-version: 1')
	SJ=(-d "$TMP/stat.json" -H 'content-type: application/json' -H 'connect-protocol-version: 1')
	U=/filesystem.Filesystem/Stat
	json_fig() { # ID N C M ROUND
		local flags=(-n "$2" -c "$3" -m "$4" -t 1) k
		# The pair's order changes every round: the first run of a
		# round follows another server's and finds the worker threads
		# asleep, which cost proto 10-40 % when it always went first.
		for k in $( [ $(($5 % 2)) = 1 ] && echo "proto json" || echo "json proto"); do
			if [ "$k" = proto ]; then
				record "json_$1_proto" "$(h2load_json "${flags[@]}" "${SP[@]}" "http://127.0.0.1:$EPORT$U")" \
					"h2load ${flags[*]} -d stat.bin -H 'content-type: application/proto' http://127.0.0.1:PORT$U"
			else
				record "json_$1_json" "$(h2load_json "${flags[@]}" "${SJ[@]}" "http://127.0.0.1:$EPORT$U")" \
					"h2load ${flags[*]} -d stat.json -H 'content-type: application/json' http://127.0.0.1:PORT$U"
			fi
		done
		[ -n "$BPORT" ] && record "json_$1_base" "$(h2load_json "${flags[@]}" "${SJ[@]}" "http://127.0.0.1:$BPORT$U")" \
			"h2load ${flags[*]} -d stat.json -H 'content-type: application/json' http://127.0.0.1:BASE_PORT$U (envd ${BENCH_BASE:-e015229})"
		record "json_$1_anchor" "$(h2load_json "${flags[@]}" "http://127.0.0.1:$NPORT/small6")" \
			"h2load ${flags[*]} http://127.0.0.1:NGHTTPD_PORT/small6"
	}
	for round in 1 2 3; do
		json_fig c1 $((N_UNARY / 4)) 1 1 "$round"
		json_fig c8 "$N_UNARY" 8 16 "$round"
	done
	stop_pid "$EPID"; stop_pid "$NPID"
	[ -n "$BPORT" ] && stop_pid "$BPID"
fi

# 2d. Large trees: a ListDir of N_TREE entries in JSON (one directory)
# beside `ls -la` of it, archive=tar of N_TREE files (N_TREE/100
# directories of 100 files of 512 B-2 KiB) beside GNU tar, and their
# extract beside `tar -x`, each pair alternating, 3 rounds, medians; the
# first byte of the ListDir, envd's peak RSS, and /health asked every 5 ms
# throughout (p99).
if want tree; then
	log "large trees: ListDir of $N_TREE entries (JSON), archive=tar and extract of $N_TREE files"
	TR=$TMP/tree
	mkdir -p "$TR/flat" "$TR/deep"
	"$PY" - "$TR" "$N_TREE" <<'PYTREE'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.close(os.open(os.path.join(root, "flat", "f%06d" % i), os.O_WRONLY | os.O_CREAT, 0o644))
for i in range(n):
    d = os.path.join(root, "deep", "d%04d" % (i // 100))
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d.txt" % i), "wb") as f:
        f.write(os.urandom(512 + i % 1536))
PYTREE
	printf '{"path":"%s"}' "$TR/flat" >"$TMP/lsflat.json"
	start_envd
	# The probe alone first (3 s, envd idle): what this machine's load
	# makes of /health by itself, the anchor of the figure during the trees.
	"$PY" bench/healthprobe.py "$EPORT" "$TMP/probe.none" 3 >"$TMP/probe0.json" 2>>"$TMP/client.log"
	record tree_health_idle "$(cat "$TMP/probe0.json")" "bench/healthprobe.py PORT (GET /health every 5 ms for 3 s, envd idle)"
	rm -f "$TMP/probe.stop"
	"$PY" bench/healthprobe.py "$EPORT" "$TMP/probe.stop" 3600 >"$TMP/probe.json" 2>>"$TMP/client.log" &
	PRPID=$!
	PIDS+=("$PRPID")
	ls -la "$TR/flat" >/dev/null
	tar -cf - -C "$TR" deep | cat >/dev/null # warm the cache
	LSU="http://127.0.0.1:$EPORT/filesystem.Filesystem/ListDir"
	for round in 1 2 3; do
		record tree_ls_envd "$(curl_json -H 'content-type: application/json' --data-binary @"$TMP/lsflat.json" "$LSU")" \
			"curl -o /dev/null -H 'content-type: application/json' --data-binary '{\"path\":\"DIR\"}' http://127.0.0.1:PORT/filesystem.Filesystem/ListDir"
		record tree_ls_ls "$(timed_json "ls -la '$TR/flat' >/dev/null")" "ls -la DIR >/dev/null"
	done
	record tree_ls_rss "{\"envd_kib\":$(awk '/^VmHWM/ {print $2}' "/proc/$EPID/status"),\"errors\":0}" \
		"grep VmHWM /proc/ENVD_PID/status (peak RSS after the ListDir rounds)"
	for round in 1 2 3; do
		record tree_tar_envd "$(curl_json "http://127.0.0.1:$EPORT/files?path=$TR/deep&archive=tar")" \
			"curl -o /dev/null 'http://127.0.0.1:PORT/files?path=DIR&archive=tar'"
		record tree_tar_tarpipe "$(timed_json "tar -cf - -C '$TR' deep | cat >/dev/null")" "tar -cf - DIR | cat >/dev/null"
		record tree_tar_tar "$(timed_json "tar -cf - -C '$TR' deep >/dev/null")" "tar -cf - DIR >/dev/null"
	done
	tar -cf "$TMP/deep.tar" -C "$TR" deep
	for round in 1 2 3; do
		rm -rf "$TMP/x1" "$TMP/x2"
		mkdir -p "$TMP/x2"
		record tree_x_envd "$(curl_json -X POST --data-binary @"$TMP/deep.tar" -H 'Content-Type: application/octet-stream' \
			"http://127.0.0.1:$EPORT/files?path=$TMP/x1&extract=tar")" \
			"curl -X POST --data-binary @DIR.tar 'http://127.0.0.1:PORT/files?path=OUT&extract=tar'"
		record tree_x_tar "$(timed_json "tar -xf '$TMP/deep.tar' -C '$TMP/x2'")" "tar -xf DIR.tar -C OUT"
	done
	touch "$TMP/probe.stop"
	wait "$PRPID"
	record tree_health "$(cat "$TMP/probe.json")" "bench/healthprobe.py PORT (GET /health every 5 ms during the tree rounds)"
	stop_pid "$EPID"
	rm -rf "$TR" "$TMP/x1" "$TMP/x2" "$TMP/deep.tar"
fi

# 3. Output streaming ----------------------------------------------------------
if want stream; then
	log "output streaming: $STREAM_BYTES bytes"
	start_envd
	for round in 1 2; do
		run_json stream_pipe "$BENCH" pipe "$STREAM_BYTES"
		run_json stream_h2 "$BENCH" stream-h2 "$EPORT" "$STREAM_BYTES"
		run_json stream_h1 "$BENCH" stream-h1 "$EPORT" "$STREAM_BYTES"
	done
	stop_pid "$EPID"
fi

# 4. File transfer ---------------------------------------------------------------
if want files; then
	log "file transfer: ${FILE_MB} MiB"
	F=$WWW/big.bin
	head -c "$((FILE_MB << 20))" /dev/urandom >"$F"
	gzip -1 -c "$F" >"$TMP/big.bin.gz"
	start_envd
	start_nghttpd
	start_nginx
	U="http://127.0.0.1:$EPORT/files?path=$F"
	for round in 1 2; do
		record dl_h1_envd "$(curl_json "$U")" "curl -o /dev/null 'http://127.0.0.1:PORT/files?path=FILE'"
		record dl_h1_nginx "$(curl_json "http://127.0.0.1:$XPORT/big.bin")" "curl -o /dev/null http://127.0.0.1:NGINX_PORT/big.bin"
		record dl_h2_envd "$(h2load_json -n 1 -c 1 "$U")" "h2load -n 1 -c 1 'http://127.0.0.1:PORT/files?path=FILE'"
		record dl_h2_nghttpd "$(h2load_json -n 1 -c 1 "http://127.0.0.1:$NPORT/big.bin")" "h2load -n 1 -c 1 http://127.0.0.1:NGHTTPD_PORT/big.bin"
		record dl_cat "$(timed_json "cat '$F' >/dev/null")" "cat FILE >/dev/null"
	done
	record dl_gzip_envd "$(curl_json -H 'Accept-Encoding: gzip, identity;q=0' "$U")" "curl -H 'Accept-Encoding: gzip, identity;q=0' -o /dev/null 'http://127.0.0.1:PORT/files?path=FILE'"
	record dl_gzip_nginx "$(curl_json -H 'Accept-Encoding: gzip' "http://127.0.0.1:$XPORT/big.bin")" "curl -H 'Accept-Encoding: gzip' -o /dev/null http://127.0.0.1:NGINX_PORT/big.bin"
	record dl_gzip_floor "$(timed_json "gzip -6 -c '$F' >/dev/null")" "gzip -6 -c FILE >/dev/null"
	# Compressible text: throughput and the compressed size beside nginx at
	# level 6 (size_download is what went over the wire).
	T=$WWW/text.log
	gen_text "$TEXT_MB" "$T"
	UT="http://127.0.0.1:$EPORT/files?path=$T"
	for round in 1 2; do
		record dl_gzip_text_envd "$(curl_json -H 'Accept-Encoding: gzip, identity;q=0' "$UT")" "curl -H 'Accept-Encoding: gzip, identity;q=0' -o /dev/null 'http://127.0.0.1:PORT/files?path=TEXT'"
		record dl_gzip_text_nginx "$(curl_json -H 'Accept-Encoding: gzip' "http://127.0.0.1:$XPORT/text.log")" "curl -H 'Accept-Encoding: gzip' -o /dev/null http://127.0.0.1:NGINX_PORT/text.log"
	done
	record dl_gzip_text_size "{\"bytes\":$(stat -c %s "$T")}" "stat -c %s TEXT"
	rm -f "$T"
	for round in 1 2; do
		record ul_envd "$(curl_json -X POST -T "$F" -H 'Content-Type: application/octet-stream' "http://127.0.0.1:$EPORT/files?path=$TMP/up.bin")" \
			"curl -X POST -T FILE -H 'Content-Type: application/octet-stream' 'http://127.0.0.1:PORT/files?path=DIR/up.bin'"
		rm -f "$TMP/up.bin"
		record ul_dd "$(timed_json "dd if='$F' of='$TMP/up.bin' bs=1M")" "dd if=FILE of=DIR/up.bin bs=1M"
		rm -f "$TMP/up.bin"
	done
	record ul_gzip_envd "$(curl_json -X POST -T "$TMP/big.bin.gz" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' "http://127.0.0.1:$EPORT/files?path=$TMP/up.bin")" \
		"curl -X POST -T FILE.gz -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' 'http://127.0.0.1:PORT/files?path=DIR/up.bin'"
	cmp -s "$F" "$TMP/up.bin" || record ul_gzip_check '{"errors":1}' "cmp FILE DIR/up.bin"
	rm -f "$TMP/up.bin"
	record ul_gzip_floor "$(timed_json "gzip -dc '$TMP/big.bin.gz' >'$TMP/up.bin'")" "gzip -dc FILE.gz >DIR/up.bin"
	rm -f "$TMP/up.bin" "$F" "$TMP/big.bin.gz"
	stop_pid "$EPID"; stop_pid "$NPID"; stop_pid "$XPID"
fi

# 4b. Directory archives: GET /files?archive=tar against GNU tar on the same
# tree, both warm in the page cache. `tar -cf - DIR >/dev/null` is the
# anchor asked for; GNU tar notices that its output is /dev/null and then
# skips reading file contents, so `| cat >/dev/null` (every byte produced
# and moved once more, as envd's client does) is recorded beside it.
if want archive; then
	log "directory archives: $ARCH_FILES small files; one $ARCH_MB MiB file"
	A=$TMP/arch
	mkdir -p "$A/small" "$A/big"
	python3 - "$A/small" "$ARCH_FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d.txt" % i), "wb") as f:
        f.write(os.urandom(512 + i % 1536))
PY
	head -c "$((ARCH_MB << 20))" /dev/urandom >"$A/big/big.bin"
	start_envd
	for tree in small big; do
		tar -cf - -C "$A" "$tree" | cat >/dev/null # warm the cache
		for round in 1 2; do
			record "arch_${tree}_envd" "$(curl_json "http://127.0.0.1:$EPORT/files?path=$A/$tree&archive=tar")" \
				"curl -o /dev/null 'http://127.0.0.1:PORT/files?path=DIR&archive=tar'"
			record "arch_${tree}_tar" "$(timed_json "tar -cf - -C '$A' '$tree' >/dev/null")" "tar -cf - DIR >/dev/null"
			record "arch_${tree}_tarpipe" "$(timed_json "tar -cf - -C '$A' '$tree' | cat >/dev/null")" \
				"tar -cf - DIR | cat >/dev/null"
		done
	done
	# the same bytes as a plain download: what the archive path itself costs
	for round in 1 2; do
		record arch_big_plain "$(curl_json "http://127.0.0.1:$EPORT/files?path=$A/big/big.bin")" \
			"curl -o /dev/null 'http://127.0.0.1:PORT/files?path=DIR/big.bin'"
	done
	record arch_small_tgz_envd "$(curl_json "http://127.0.0.1:$EPORT/files?path=$A/small&archive=tgz")" \
		"curl -o /dev/null 'http://127.0.0.1:PORT/files?path=DIR&archive=tgz'"
	record arch_small_tgz_tar "$(timed_json "tar -czf - -C '$A' small | cat >/dev/null")" "tar -czf - DIR | cat >/dev/null"
	curl -s -o "$TMP/small.tar" "http://127.0.0.1:$EPORT/files?path=$A/small&archive=tar"
	record arch_extract_envd "$(curl_json -X POST --data-binary @"$TMP/small.tar" -H 'Content-Type: application/octet-stream' \
		"http://127.0.0.1:$EPORT/files?path=$TMP/x1&extract=tar")" \
		"curl -X POST --data-binary @DIR.tar 'http://127.0.0.1:PORT/files?path=OUT&extract=tar'"
	mkdir -p "$TMP/x2"
	record arch_extract_tar "$(timed_json "tar -xf '$TMP/small.tar' -C '$TMP/x2'")" "tar -xf DIR.tar -C OUT"
	stop_pid "$EPID"
	rm -rf "$A" "$TMP/x1" "$TMP/x2" "$TMP/small.tar"
fi

# SDK downloads: files.read(..., {format:'stream'}) through the official
# SDK (gzip-encoded, as its HTTP stack always asks) against node's fetch of
# the same file from nginx without encoding.
if want sdk_files && [ $SDK_OK = 1 ]; then
	log "SDK files.read: ${SDK_FILE_MB} MiB random and text"
	start_envd -default-user user
	start_nginx
	sdk_env
	chmod 755 "$TMP" "$WWW"
	head -c "$((SDK_FILE_MB << 20))" /dev/urandom >"$WWW/sdk-random.bin"
	gen_text "$SDK_FILE_MB" "$WWW/sdk-text.log"
	chmod 644 "$WWW"/sdk-*
	run_json sdk_files node bench/sdk.mjs download 5 \
		"random=$WWW/sdk-random.bin=http://127.0.0.1:$XPORT/sdk-random.bin" \
		"text=$WWW/sdk-text.log=http://127.0.0.1:$XPORT/sdk-text.log"
	rm -f "$WWW"/sdk-*
	stop_pid "$EPID"; stop_pid "$XPID"
fi

# SDK downloads over links of known speed: the servers in a network
# namespace behind a veth whose server->client direction is shaped with tc
# tbf, the SDK outside; envd against nginx answering the same
# GET /files?path=... without gzip and with gzip level 6. envd starts
# afresh for every link, so what it knows of a link it learnt on that one.
link_wait() { # URL: until it answers (bounded: 60 s)
	local end=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$end" ]; do
		curl -s -o /dev/null "$1" && return 0
		sleep 0.05
	done
	return 1
}
if want sdk_link && [ $SDK_OK = 1 ]; then
	. scripts/shaped-link.sh
	if [ "$(id -u)" != 0 ] || ! command -v tc >/dev/null || ! link_up b$$ 21; then
		log "sdk_link: needs root, ip netns and tc; skipped"
	else
		trap 'link_down; cleanup' EXIT
		LINK_MB=$([ $QUICK = 1 ] && echo 2 || echo 64)
		LINK_SHAPES=${LINK_SHAPES:-none 1gbit 100mbit 20mbit}
		log "SDK files.read over shaped links: $LINK_MB MiB random and text, envd vs nginx identity and gzip 6"
		EPORT=${EPORT:-0} # every Sandbox gets its sandboxUrl
		sdk_env
		L=$TMP/link
		mkdir -p "$L/logs" "$L/tmp"
		chmod 755 "$TMP" "$L"
		head -c "$((LINK_MB << 20))" /dev/urandom >"$L/random.bin"
		# Text: C headers, as a source tree or an SDK's include directory.
		find /usr/include -name '*.h' -type f -print0 | sort -z | xargs -0 cat 2>/dev/null |
			head -c "$((LINK_MB << 20))" >"$L/text.txt"
		while [ "$(stat -c %s "$L/text.txt")" -lt "$((LINK_MB << 20))" ]; do
			cat "$L/text.txt" "$L/text.txt" | head -c "$((LINK_MB << 20))" >"$L/text2" && mv "$L/text2" "$L/text.txt"
		done
		head -c $((4 << 20)) /dev/urandom >"$L/warm.bin"
		chmod 644 "$L"/*.bin "$L"/*.txt
		LXI=$(free_port)
		LXG=$(free_port)
		cat >"$L/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $L/nginx.pid;
error_log $L/logs/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	client_body_temp_path $L/tmp/body;
	proxy_temp_path $L/tmp/proxy;
	fastcgi_temp_path $L/tmp/fcgi;
	uwsgi_temp_path $L/tmp/uwsgi;
	scgi_temp_path $L/tmp/scgi;
	default_type application/octet-stream;
	gzip_comp_level 6;
	gzip_types *;
	gzip_min_length 0;
	map \$arg_path \$dlfile { default ""; ~random\.bin\$ random.bin; ~text\.txt\$ text.txt; ~warm\.bin\$ warm.bin; }
	server { listen $LINK_SERVER:$LXI; gzip off; root $L; location = /files { try_files /\$dlfile =404; } }
	server { listen $LINK_SERVER:$LXG; gzip on; root $L; location = /files { try_files /\$dlfile =404; } }
}
EOF
		link_exec nginx -p "$L" -c "$L/nginx.conf" -e "$L/logs/error.log" >/dev/null 2>&1 &
		LXPID=$!
		PIDS+=("$LXPID")
		link_wait "http://$LINK_SERVER:$LXI/files?path=warm.bin" || log "sdk_link: nginx did not start"
		for shape in $LINK_SHAPES; do
			link_shape "$shape" || { log "sdk_link: tc could not shape $shape"; continue; }
			LEP=$(free_port)
			link_exec "$ENVD" -isnotfc -port "$LEP" -no-cgroups -default-user user >>"$TMP/envd.log" 2>&1 &
			LEPID=$!
			PIDS+=("$LEPID")
			link_wait "http://$LINK_SERVER:$LEP/health" || log "sdk_link: envd did not start"
			log "  link $shape"
			# The unmeasured first read: on the fast links the whole random
			# file, as the first 64 MiB read of a client carries one-time
			# costs (its first round was 30-65 % slower, nginx's as envd's);
			# on the slow ones, where the link decides, 4 MiB.
			warm=$L/warm.bin
			case $shape in none | 1gbit) warm=$L/random.bin ;; esac
			run_json "sdk_link_$shape" node bench/sdk.mjs link 2 "$warm" \
				"random=$L/random.bin,text=$L/text.txt" \
				"envd=http://$LINK_SERVER:$LEP" "nginx_identity=http://$LINK_SERVER:$LXI" \
				"nginx_gzip6=http://$LINK_SERVER:$LXG"
			stop_pid "$LEPID"
		done
		stop_pid "$LXPID"
		link_down
		rm -rf "$L"
	fi
fi

# 5. Footprint ---------------------------------------------------------------
# pages_touched PID CMD: distinct pages the process referenced while CMD ran.
pages_touched() {
	local pid=$1
	shift
	sleep 0.2
	echo 1 >"/proc/$pid/clear_refs" || { echo -1; return; }
	"$@" >/dev/null 2>&1
	awk '/^Referenced:/ {k += $2} END {print k / 4}' "/proc/$pid/smaps"
}
if want footprint; then
	log "footprint"
	size=$(stat -c %s "$ENVD")
	record binary "{\"bytes\":$size,\"stripped\":$(file "$ENVD" | grep -q 'not stripped' && echo false || echo true),\"static\":$(file "$ENVD" | grep -q 'statically linked\|static-pie' && echo true || echo false)}" "stat -c %s build/envd"
	start_envd
	start_nghttpd
	start_nginx
	sleep 0.3
	erss=$(awk '/^VmRSS/ {print $2}' "/proc/$EPID/status")
	nrss=$(awk '/^VmRSS/ {print $2}' "/proc/$NPID/status")
	xrss=$(awk '/^VmRSS/ {print $2}' "/proc/$XPID/status")
	record rss_idle "{\"envd_kib\":$erss,\"nghttpd_kib\":$nrss,\"nginx_kib\":$xrss}" "grep VmRSS /proc/PID/status (after start and one /health)"
	"$PY" -c 'import sys; m=b"{\"process\":{\"cmd\":\"/bin/true\"},\"stdin\":false}"; sys.stdout.buffer.write(b"\0"+len(m).to_bytes(4,"big")+m)' >"$TMP/start.json"
	ep=$(pages_touched "$EPID" curl -s --data-binary @"$TMP/start.json" -H 'content-type: application/connect+json' "http://127.0.0.1:$EPORT/process.Process/Start")
	np=$(pages_touched "$NPID" nghttp "http://127.0.0.1:$NPORT/tiny")
	xp=$(pages_touched "$XPID" curl -s "http://127.0.0.1:$XPORT/tiny")
	record pages_first "{\"envd_pages\":$ep,\"nghttpd_pages\":$np,\"nginx_pages\":$xp}" \
		"echo 1 >/proc/PID/clear_refs; curl --data-binary @start.json -H 'content-type: application/connect+json' .../process.Process/Start; sum Referenced in /proc/PID/smaps"
	stop_pid "$EPID"; stop_pid "$NPID"; stop_pid "$XPID"
	run_json exec_health_envd "$BENCH" exec-health h1 "$N_EXEC" "$ENVD" -isnotfc -port "{PORT}"
	run_json exec_health_nghttpd "$BENCH" exec-health h2 "$N_EXEC" /usr/sbin/nghttpd --no-tls -d "$WWW" "{PORT}"
fi

if want idle; then
	log "RSS with $N_IDLE idle Connect streams"
	start_envd
	run_json idle "$BENCH" idle "$EPORT" "$EPID" "$N_IDLE"
	stop_pid "$EPID"
fi

if want busy; then
	log "RSS with $N_BUSY processes streaming $BUSY_BYTES bytes each"
	start_envd
	run_json busy "$BENCH" busy "$EPORT" "$EPID" "$N_BUSY" "$BUSY_BYTES"
	stop_pid "$EPID"
fi

# 6. Concurrency -------------------------------------------------------------
if want sdk_concurrent && [ $SDK_OK = 1 ]; then
	log "$N_SDK_CONC concurrent commands.run from the SDK"
	start_envd -default-user user
	sdk_env
	run_json sdk_concurrent node bench/sdk.mjs concurrent "$N_SDK_CONC"
	stop_pid "$EPID"
fi

if want conns; then
	log "$N_CONNS open connections"
	start_envd
	run_json conns_envd "$BENCH" conns "$EPORT" "$EPID" "$N_CONNS" /health
	stop_pid "$EPID"
	start_nginx
	run_json conns_nginx "$BENCH" conns "$XPORT" "$XPID" "$N_CONNS" /health
	stop_pid "$XPID"
fi

# 7. A hung filesystem --------------------------------------------------------
if want hung; then
	log "latency with 40 requests hung on a stopped FUSE mount (bindfs)"
	if command -v bindfs >/dev/null && [ -e /dev/fuse ]; then
		. tests/common.sh
		. tests/integration/hungfs_lib.sh
		# A deadline past the run: the 40 stay hung while the probes run.
		start_envd -fs-timeout 600
		if hungfs_mount "$TMP/hungmnt"; then
			run_json hung "$PY" bench/hung.py "$EPORT" "$EPID" "$TMP/hungmnt" "$HUNGFS_PID" "$TMP/hungelse" "$N_HUNG"
		else
			record hung '{"errors":1}' "bindfs did not mount"
		fi
		hungfs_cleanup
		stop_pid "$EPID"
	else
		record hung '{"errors":1}' "bindfs or /dev/fuse missing (scripts/setup.sh)"
	fi
fi

# 7b. The agent's file tools beside ripgrep ---------------------------------
# A generated git checkout (bench/tools_tree.py, kept in build/bench/ between
# runs), warm; envd fresh so its peak RSS is the tools'.
if want tools; then
	if command -v rg >/dev/null; then
		TREE=$ROOT/build/bench/tools-tree-$TOOLS_FILES
		log "agent tools: a $TOOLS_FILES-file checkout (made once in $TREE), Grep and Glob beside rg, best of $TOOLS_ROUNDS"
		"$PY" bench/tools_tree.py "$TREE" "$TOOLS_FILES"
		chmod -R a+rX "$TREE"
		# No change journal: what is measured is the tools' memory, not
		# the journal's record of whatever else the machine writes. The
		# registry of temporary files (an Edit's among them) on a tmpfs,
		# as /run is in a sandbox (here /run may be the root disk, where
		# each entry is an inode to journal: 25 us an Edit more).
		mkdir -p /dev/shm/envd-bench-$$
		start_envd -default-user user -changes-max-paths 0 -upload-registry /dev/shm/envd-bench-$$/uploads
		run_json tools "$PY" bench/tools.py "$EPORT" "$EPID" "$TREE" "$TOOLS_ROUNDS"
		if [ $SDK_OK = 1 ]; then
			sdk_env
			run_json tools_sdk node bench/tools.mjs "$TOOLS_SDK" "$TREE/src/mod000" zqxjTOKEN
			run_json tools_sdk_tree node bench/tools.mjs "$((TOOLS_SDK / 4 + 1))" "$TREE" zqxjTOKEN
		fi
		stop_pid "$EPID"
		rm -rf /dev/shm/envd-bench-$$
	else
		record tools '{"errors":1}' "ripgrep missing (scripts/setup.sh)"
	fi
fi

# 7c. A try run's commit beside cp -a ----------------------------------------
# The generated checkout again (its own copy: commits change it, and
# bench/try.py puts it back), a try that changes TRY_MOD files and makes
# TRY_NEW; CommitTry against cp -a of the same changed files (docs/try.md).
if want try; then
	TTREE=$ROOT/build/bench/try-tree-$TRY_FILES
	log "try runs: CommitTry of $((TRY_MOD + TRY_NEW)) changed files in a $TRY_FILES-file tree beside cp -a of them, best of $TRY_ROUNDS"
	"$PY" bench/tools_tree.py "$TTREE" "$TRY_FILES"
	# The registry of temporary files on a tmpfs, as /run is in a sandbox
	# (here /run may be the root disk, where each entry is an inode to journal).
	mkdir -p /dev/shm/envd-bench-$$
	start_envd -changes-max-paths 0 -upload-registry /dev/shm/envd-bench-$$/uploads
	run_json try "$PY" bench/try.py "$EPORT" "$TTREE" "$TRY_ROUNDS" "$TRY_MOD" "$TRY_NEW"
	stop_pid "$EPID"
	rm -rf /dev/shm/envd-bench-$$
fi

# 8. The image as a VM -------------------------------------------------------
# Only in the full run and when the image is built (make vm-image): a boot
# under emulation takes seconds.
if want vm_boot && [ $QUICK = 0 ] && [ -s build/vm/rootfs.ext4 ] && command -v qemu-system-x86_64 >/dev/null; then
	log "VM boot, 3 times (QEMU microvm, scripts/vm-boot-time.sh)"
	run_json vm_boot bash scripts/vm-boot-time.sh 3
fi
# The cost of a command's cgroup where every controller is delegated: the
# image's envd against a second one with -no-cgroups in the same guest.
if want vm_rtt && [ $QUICK = 0 ] && [ -s build/vm/rootfs.ext4 ] && [ -x build/bench/guestrtt ] &&
	command -v qemu-system-x86_64 >/dev/null; then
	log "VM: Start round trip with and without cgroups, 50 one at a time and 50 at once (scripts/vm-bench-rtt.sh)"
	run_json vm_rtt bash scripts/vm-bench-rtt.sh 50 50 5
fi

ELAPSED=$(($(date +%s) - START))
mkdir -p "$(dirname "$OUT")"
"$PY" bench/report.py report "$RAW" "$OUT" --quick "$QUICK" --elapsed "$ELAPSED" --mode-flag "$MODE_FLAG" --envd "$ENVD"
