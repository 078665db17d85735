#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the static musl libraries envd links, from Debian source packages.
#
# `apt-get source` unpacks each package with dpkg-source, which applies the
# Debian patch series (security fixes included) on top of the upstream
# tarball. Each library is then compiled with musl-gcc into
# build/deps/musl/{include,lib}. A stamp per package makes a second run free.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/deps/musl
src=$top/build/deps/src
mkdir -p "$out/include" "$out/lib" "$src"
jobs=$(nproc 2>/dev/null || echo 2)
export CC=musl-gcc
export CFLAGS="-Os -fPIC -ffunction-sections -fdata-sections -D_GNU_SOURCE"

# musl-gcc does not search the kernel headers; expose them (read-only
# symlinks) for the headers envd needs (linux/*, asm/*).
for d in linux asm-generic; do
	[ -e "$out/include/$d" ] || ln -s "/usr/include/$d" "$out/include/$d"
done
arch_asm=$(ls -d /usr/include/*-linux-gnu/asm 2>/dev/null | head -n1)
[ -e "$out/include/asm" ] || ln -s "$arch_asm" "$out/include/asm"

fetch() { # fetch PKG -> prints the unpacked directory
	local pkg=$1
	local dir
	dir=$(ls -d "$src/$pkg"-[0-9]*/ 2>/dev/null | head -n1 || true)
	if [ -z "$dir" ]; then
		(cd "$src" && apt-get source -qq "$pkg" >"$src/$pkg.log" 2>&1) || {
			echo "deps: apt-get source $pkg failed (see $src/$pkg.log)" >&2; exit 1; }
		dir=$(ls -d "$src/$pkg"-[0-9]*/ | head -n1)
	fi
	echo "${dir%/}"
}

stamp() { [ -f "$out/.$1.done" ]; }
done_() { touch "$out/.$1.done"; }

if ! stamp zlib; then
	d=$(fetch zlib)
	(cd "$d" && ./configure --static --prefix="$out" >/dev/null && make -s -j"$jobs" libz.a >/dev/null \
		&& cp libz.a "$out/lib/" && cp zlib.h zconf.h "$out/include/")
	done_ zlib
fi

if ! stamp libev; then
	d=$(fetch libev)
	(cd "$d" && ./configure --disable-shared --enable-static --prefix="$out" >/dev/null \
		&& make -s -j"$jobs" >/dev/null && make -s install >/dev/null)
	done_ libev
fi

if ! stamp nghttp2; then
	d=$(fetch nghttp2)
	# The Debian source carries no generated configure; its CMake build
	# needs nothing beyond cmake itself for the library alone.
	rm -rf "$d/build-musl"
	(cd "$d" && cmake -S . -B build-musl -DCMAKE_C_COMPILER=musl-gcc -DCMAKE_BUILD_TYPE=MinSizeRel \
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
	(cd "$d" && cmake -S . -B build-musl -DCMAKE_C_COMPILER=musl-gcc -DCMAKE_BUILD_TYPE=MinSizeRel \
		-DCMAKE_C_FLAGS="$CFLAGS" -DJANSSON_BUILD_SHARED_LIBS=OFF -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON -DCMAKE_INSTALL_PREFIX="$out" \
		-DCMAKE_INSTALL_LIBDIR=lib >/dev/null \
		&& cmake --build build-musl -j"$jobs" >/dev/null && cmake --install build-musl >/dev/null)
	done_ jansson
fi

if ! stamp http-parser; then
	d=$(fetch http-parser)
	(cd "$d" && $CC $CFLAGS -DHTTP_PARSER_STRICT=0 -c http_parser.c -o http_parser.o \
		&& ar rcs "$out/lib/libhttp_parser.a" http_parser.o && cp http_parser.h "$out/include/")
	done_ http-parser
fi

if ! stamp protobuf-c; then
	# Only the runtime library; the code generator (protoc-c) is the host's.
	d=$(fetch protobuf-c)
	mkdir -p "$out/include/protobuf-c"
	(cd "$d" && $CC $CFLAGS -I. -c protobuf-c/protobuf-c.c -o protobuf-c.o \
		&& ar rcs "$out/lib/libprotobuf-c.a" protobuf-c.o \
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
	(cd "$d" && cmake -S . -B build-musl -DCMAKE_C_COMPILER=musl-gcc -DCMAKE_BUILD_TYPE=MinSizeRel \
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
