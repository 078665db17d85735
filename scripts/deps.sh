#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the static musl libraries envd links, from Debian source packages.
#
# `apt-get source` unpacks each package with dpkg-source, which applies the
# Debian patch series (security fixes included) on top of the upstream
# tarball. Each library is then compiled with musl-gcc into
# build/deps/musl/{include,lib}. A stamp per package makes a second run free.
#
#   deps.sh                 amd64 (x86-64): build/deps/
#   ARCH=arm64 deps.sh      aarch64, cross-compiled: build/arm64/deps/
#
# The cross build uses Debian's aarch64 cross compiler through the musl
# wrapper of musl-dev:arm64 (aarch64-linux-musl-gcc) and the arm64 kernel
# headers of linux-libc-dev-arm64-cross; the sources and options are the
# same as for amd64.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
ARCH=${ARCH:-amd64}
cross=
case $ARCH in
amd64)
	base=$top/build/deps
	export CC=musl-gcc
	AR=ar
	# The triplet is named: with another architecture's linux-libc-dev
	# installed a glob could pick its asm/ headers, which compile
	# silently and carry the wrong syscall numbers.
	kinc=/usr/include
	kasm=/usr/include/x86_64-linux-gnu/asm
	;;
arm64)
	base=$top/build/arm64/deps
	cross=aarch64-linux-gnu
	export CC=aarch64-linux-musl-gcc
	AR=$cross-ar
	kinc=/usr/$cross/include
	kasm=/usr/$cross/include/asm
	;;
*) echo "deps: unknown ARCH $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac
out=$base/musl
src=$base/src
# deps.sh --fetch PKG DIR: only fetch PKG's source into DIR (the test of the
# version fallback drives this with stand-ins for apt-get and apt-cache).
fetch_only=
if [ "${1:-}" = --fetch ]; then
	fetch_only=$2; src=$3
fi
jobs=$(nproc 2>/dev/null || echo 2)
export CFLAGS="-Os -fPIC -ffunction-sections -fdata-sections -D_GNU_SOURCE"

# musl-gcc does not search the kernel headers; expose them (read-only
# symlinks) for the headers envd needs (linux/*, asm/*).
if [ -z "$fetch_only" ]; then
	command -v "$CC" >/dev/null || {
		echo "deps: $CC is missing (scripts/setup.sh installs it)" >&2; exit 1; }
	[ -d "$kasm" ] || { echo "deps: kernel headers $kasm are missing (scripts/setup.sh installs them)" >&2; exit 1; }
	mkdir -p "$out/include" "$out/lib" "$src"
	for d in linux asm-generic; do
		[ -e "$out/include/$d" ] || ln -s "$kinc/$d" "$out/include/$d"
	done
	[ -e "$out/include/asm" ] || ln -s "$kasm" "$out/include/asm"
fi

# CMake for the cross build: the target's compiler and archiver, and
# libraries and headers looked for under our prefix only (the host's
# x86-64 ones must never be found).
cmake_cross=()
if [ -n "$cross" ] && [ -z "$fetch_only" ]; then
	cat >"$base/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER $CC)
set(CMAKE_AR /usr/bin/$cross-ar)
set(CMAKE_RANLIB /usr/bin/$cross-ranlib)
set(CMAKE_FIND_ROOT_PATH $out)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
EOF
	cmake_cross=(-DCMAKE_TOOLCHAIN_FILE="$base/toolchain.cmake")
fi

# Every version of a source package apt knows, newest first, the one apt
# itself would choose leading. An index can list a version whose files the
# mirror no longer serves (a stale security-suite entry answers 404), so one
# missing version must not stop the build while an older one is there.
source_versions() { # PKG -> versions, one a line
	local pkg=$1 v
	local all
	all=$(apt-cache showsrc "$pkg" 2>/dev/null | awk -v p="$pkg" '
		/^Package:/ { cur = $2 } /^Version:/ && cur == p { print $2 }' | sort -u)
	[ -n "$all" ] || return 0
	# insertion sort with dpkg's ordering (a handful of versions at most)
	local sorted=()
	for v in $all; do
		local i=0 placed=0 next=()
		for s in "${sorted[@]}"; do
			if [ $placed = 0 ] && dpkg --compare-versions "$v" gt "$s"; then next+=("$v"); placed=1; fi
			next+=("$s")
		done
		[ $placed = 1 ] || next+=("$v")
		sorted=("${next[@]}")
	done
	printf '%s\n' "${sorted[@]}"
}

fetch() { # fetch PKG -> prints the unpacked directory; notes the version in $versions
	local pkg=$1 dir v tmp log tried=()
	dir=$(ls -d "$src/$pkg"-[0-9]*/ 2>/dev/null | head -n1 || true)
	if [ -n "$dir" ] && [ -f "$src/$pkg.version" ]; then
		echo "${dir%/}"; return 0
	fi
	rm -rf "$src/$pkg"-[0-9]*/ "$src/$pkg.version"
	log=$src/$pkg.log
	: >"$log"
	local list
	list=$(source_versions "$pkg")
	if [ -z "$list" ]; then
		echo "deps: no source version of $pkg known to apt (is a deb-src entry missing? run: apt-get update)" >&2
		exit 1
	fi
	for v in $list; do
		# Each try unpacks in a scratch directory: a failed or partial
		# download never leaves a half-built source tree behind.
		tmp=$(mktemp -d "$src/.fetch-$pkg.XXXXXX")
		echo "== apt-get source $pkg=$v" >>"$log"
		if (cd "$tmp" && apt-get source -qq "$pkg=$v" >>"$log" 2>&1); then
			dir=$(ls -d "$tmp/$pkg"-[0-9]*/ 2>/dev/null | head -n1 || true)
			if [ -n "$dir" ]; then
				mv "${dir%/}" "$src/"
				rm -rf "$tmp"
				echo "$v" >"$src/$pkg.version"
				if [ ${#tried[@]} -gt 0 ]; then
					echo "deps: $pkg $v (skipped: $(IFS=';'; echo "${tried[*]}" | sed 's/;/; /g'))" >&2
				fi
				ls -d "$src/$pkg"-[0-9]*/ | head -n1 | sed 's:/$::'
				return 0
			fi
		fi
		rm -rf "$tmp"
		local why
		why=$(grep -Eo '[0-9]{3}  [A-Za-z ]+|Unable to find a source package|Hash Sum mismatch|File has unexpected size' "$log" | tail -n1 | sed "s/ *$//")
		tried+=("$v: ${why:-failed}")
		echo "deps: $pkg $v could not be fetched (${why:-see $log}); trying an older version" >&2
	done
	echo "deps: no version of the source package $pkg could be fetched (tried: $(IFS=';'; echo "${tried[*]}" | sed 's/;/; /g'); see $log)" >&2
	exit 1
}

if [ -n "$fetch_only" ]; then
	mkdir -p "$src"
	d=$(fetch "$fetch_only")
	echo "$d $(cat "$src/$fetch_only.version")"
	exit 0
fi

# The stamp holds the version built, so the record below survives the
# source trees being removed (only the installed libraries are needed).
stamp() { [ -f "$out/.$1.done" ]; }
done_() { cat "$src/$1.version" >"$out/.$1.done" 2>/dev/null || : >"$out/.$1.done"; }

if ! stamp zlib; then
	d=$(fetch zlib)
	# zlib's configure takes no --host; CHOST names the cross tools.
	(cd "$d" && CHOST=$cross ./configure --static --prefix="$out" >/dev/null && make -s -j"$jobs" libz.a >/dev/null \
		&& cp libz.a "$out/lib/" && cp zlib.h zconf.h "$out/include/")
	done_ zlib
fi

if ! stamp libev; then
	d=$(fetch libev)
	(cd "$d" && ./configure ${cross:+--host=$cross} --disable-shared --enable-static --prefix="$out" >/dev/null \
		&& make -s -j"$jobs" >/dev/null && make -s install >/dev/null)
	done_ libev
fi

if ! stamp nghttp2; then
	d=$(fetch nghttp2)
	# The Debian source carries no generated configure; its CMake build
	# needs nothing beyond cmake itself for the library alone.
	rm -rf "$d/build-musl"
	(cd "$d" && cmake -S . -B build-musl -DCMAKE_C_COMPILER="$CC" ${cmake_cross[@]+"${cmake_cross[@]}"} -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_C_FLAGS="$CFLAGS" -DENABLE_LIB_ONLY=ON -DENABLE_STATIC_LIB=ON \
		-DENABLE_SHARED_LIB=OFF -DENABLE_DOC=OFF -DENABLE_FAILMALLOC=OFF \
		-DWITH_LIBXML2=OFF -DWITH_JEMALLOC=OFF -DCMAKE_INSTALL_PREFIX="$out" \
		-DCMAKE_INSTALL_LIBDIR=lib >/dev/null \
		&& cmake --build build-musl -j"$jobs" >/dev/null && cmake --install build-musl >/dev/null)
	done_ nghttp2
fi

if ! stamp jansson; then
	d=$(fetch jansson)
	rm -rf "$d/build-musl"
	(cd "$d" && cmake -S . -B build-musl -DCMAKE_C_COMPILER="$CC" ${cmake_cross[@]+"${cmake_cross[@]}"} -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_C_FLAGS="$CFLAGS" -DJANSSON_BUILD_SHARED_LIBS=OFF -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON -DCMAKE_INSTALL_PREFIX="$out" \
		-DCMAKE_INSTALL_LIBDIR=lib >/dev/null \
		&& cmake --build build-musl -j"$jobs" >/dev/null && cmake --install build-musl >/dev/null)
	done_ jansson
fi

if ! stamp yajl; then
	# The streaming JSON parser proto/pbjson decodes requests with. Its
	# sources are compiled directly (the CMake build wants its tools and
	# doxygen); yajl_version.h is made from its template as CMake would.
	d=$(fetch yajl)
	mkdir -p "$out/include/yajl"
	(cd "$d" && rm -rf build-musl && mkdir -p build-musl/include/yajl \
		&& cp src/api/yajl_common.h src/api/yajl_parse.h src/api/yajl_gen.h src/api/yajl_tree.h build-musl/include/yajl/ \
		&& sed -e 's/${YAJL_MAJOR}/2/' -e 's/${YAJL_MINOR}/1/' -e 's/${YAJL_MICRO}/0/' \
			src/api/yajl_version.h.cmake >build-musl/include/yajl/yajl_version.h \
		&& for c in yajl yajl_alloc yajl_buf yajl_encode yajl_gen yajl_lex yajl_parser yajl_tree yajl_version; do
			$CC $CFLAGS -Isrc -Ibuild-musl/include -c "src/$c.c" -o "build-musl/$c.o" || exit 1
		done \
		&& rm -f "$out/lib/libyajl.a" && $AR rcs "$out/lib/libyajl.a" build-musl/*.o \
		&& cp build-musl/include/yajl/*.h "$out/include/yajl/")
	done_ yajl
fi

if ! stamp http-parser; then
	d=$(fetch http-parser)
	(cd "$d" && $CC $CFLAGS -DHTTP_PARSER_STRICT=0 -c http_parser.c -o http_parser.o \
		&& $AR rcs "$out/lib/libhttp_parser.a" http_parser.o && cp http_parser.h "$out/include/")
	done_ http-parser
fi

if ! stamp protobuf-c; then
	# Only the runtime library; the code generator (protoc-c) is the host's.
	d=$(fetch protobuf-c)
	mkdir -p "$out/include/protobuf-c"
	(cd "$d" && $CC $CFLAGS -I. -c protobuf-c/protobuf-c.c -o protobuf-c.o \
		&& $AR rcs "$out/lib/libprotobuf-c.a" protobuf-c.o \
		&& cp protobuf-c/protobuf-c.h "$out/include/protobuf-c/")
	done_ protobuf-c
fi

if ! stamp libarchive; then
	# Only the library, and only what envd reads and writes: tar (ustar/pax),
	# zip, gzip through our zlib. Every optional codec, crypto, ACL/xattr
	# and XML backend is off, so the static binary pulls in nothing else.
	# CMake rather than configure: the Debian patches touch the autotools
	# inputs, which would make configure want automake.
	d=$(fetch libarchive)
	rm -rf "$d/build-musl"
	(cd "$d" && cmake -S . -B build-musl -DCMAKE_C_COMPILER="$CC" ${cmake_cross[@]+"${cmake_cross[@]}"} -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_PREFIX_PATH="$out" -DZLIB_ROOT="$out" \
		-DBUILD_SHARED_LIBS=OFF -DENABLE_TAR=OFF -DENABLE_CPIO=OFF -DENABLE_CAT=OFF -DENABLE_TEST=OFF \
		-DENABLE_ACL=OFF -DENABLE_XATTR=OFF -DENABLE_ICONV=OFF -DENABLE_LIBXML2=OFF -DENABLE_EXPAT=OFF \
		-DENABLE_OPENSSL=OFF -DENABLE_NETTLE=OFF -DENABLE_MBEDTLS=OFF -DENABLE_LZ4=OFF -DENABLE_LZMA=OFF \
		-DENABLE_ZSTD=OFF -DENABLE_BZip2=OFF -DENABLE_LIBB2=OFF -DENABLE_LZO=OFF -DENABLE_CNG=OFF \
		-DENABLE_PCREPOSIX=OFF -DENABLE_ZLIB=ON -DENABLE_INSTALL=OFF >/dev/null \
		&& cmake --build build-musl -j"$jobs" --target archive_static >/dev/null \
		&& cp build-musl/libarchive/libarchive.a "$out/lib/" \
		&& cp libarchive/archive.h libarchive/archive_entry.h "$out/include/")
	done_ libarchive
fi

if ! stamp pcre2; then
	# The regular expressions of the agent tools' Grep (search/pattern.c):
	# the 8-bit library only, with Unicode (UTF-8 subjects, \p{..}) and the
	# JIT compiler (x86-64 and aarch64); no pcre2grep, no POSIX wrapper,
	# no shared library.
	d=$(fetch pcre2)
	rm -rf "$d/build-musl"
	(cd "$d" && cmake -S . -B build-musl -DCMAKE_C_COMPILER="$CC" ${cmake_cross[@]+"${cmake_cross[@]}"} -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_C_FLAGS="$CFLAGS" -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON \
		-DPCRE2_BUILD_PCRE2_8=ON -DPCRE2_BUILD_PCRE2_16=OFF -DPCRE2_BUILD_PCRE2_32=OFF \
		-DPCRE2_SUPPORT_JIT=ON -DPCRE2_SUPPORT_UNICODE=ON -DPCRE2_BUILD_PCRE2GREP=OFF \
		-DPCRE2_BUILD_TESTS=OFF -DPCRE2_SUPPORT_LIBBZ2=OFF -DPCRE2_SUPPORT_LIBZ=OFF \
		-DPCRE2_SUPPORT_LIBEDIT=OFF -DPCRE2_SUPPORT_LIBREADLINE=OFF \
		-DCMAKE_INSTALL_PREFIX="$out" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null \
		&& cmake --build build-musl -j"$jobs" --target pcre2-8-static >/dev/null \
		&& cp build-musl/libpcre2-8.a "$out/lib/" && cp build-musl/pcre2.h "$out/include/")
	done_ pcre2
fi

# The versions built, one "package version" a line; make prints them once,
# when the libraries are built.
for f in "$out"/.*.done; do
	[ -f "$f" ] || continue
	p=${f##*/.}
	p=${p%.done}
	v=$(cat "$src/$p.version" 2>/dev/null || cat "$f")
	[ -n "$v" ] && printf '%s %s\n' "$p" "$v"
done >"$base/versions"
echo "deps ($ARCH): built from Debian sources: $(tr '\n' ' ' <"$base/versions")" >&2
