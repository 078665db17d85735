#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Make build/arm64/sysroot: Debian's arm64 glibc, Criterion and the
# libraries envd links, unpacked from their .deb files, for the aarch64 unit
# tests (compiled with aarch64-linux-gnu-gcc --sysroot, run under
# qemu-aarch64-static -L).
#
# The packages are downloaded and unpacked, never installed: dpkg would
# have to keep every arm64 library at the host's version of it (Multi-Arch:
# same), and where the archive's arm64 build differs from the host's (a
# binNMU) installing it would remove the host's package.
#
# The sysroot is keyed by the exact .deb files (names carry the versions):
# a run with the same set does nothing; a new version in the apt lists
# rebuilds it. It is assembled in a temporary directory and renamed into
# place, so an interrupted or failed run leaves no sysroot a later run
# takes for done.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
root=$top/build/arm64/sysroot
stamp=$root/.packages

# Headers and link-time files (lib*.so), taken as they are: their own
# dependencies on other -dev packages serve builds that read pkg-config or
# CMake files, which this one does not.
dev=(libc6-dev linux-libc-dev libcriterion-dev libnghttp2-dev libev-dev libprotobuf-c-dev
     libyajl-dev libjansson-dev libhttp-parser-dev libarchive-dev libpcre2-dev zlib1g-dev)
# The shared libraries the tests load, with everything they depend on
# (the linker checks the symbols of these too), and the runtime of
# -fsanitize=undefined.
run=(libc6 libgcc-s1 libcriterion3 libnghttp2-14 libev4 libprotobuf-c1 libyajl2 libjansson4
     libhttp-parser2.9 libarchive13 libpcre2-8-0 zlib1g libubsan1)

die() { echo "arm64-sysroot: $*" >&2; exit 1; }

dpkg --print-foreign-architectures | grep -qx arm64 ||
	die "dpkg does not know arm64 (run scripts/setup.sh)"

# Everything in run[] needs, recursively: hard dependencies only, arm64
# packages only (the closure stays within arm64; a virtual name is in <>).
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances "${run[@]/%/:arm64}" | sed -n 's/^\([^ <][^ ]*\):arm64$/\1/p') ||
	die "apt-cache depends failed for: ${run[*]}"
mapfile -t pkgs < <({ printf '%s\n' "${dev[@]}"; echo "$closure"; } | sort -u)

# The files apt would download: one line per package, "'URL' FILE SIZE HASH".
uris=$(cd /tmp && apt-get download --print-uris "${pkgs[@]/%/:arm64}" 2>&1) || {
	bad=$(sed -n 's/^E: .*package \(.*\)$/\1/p;T;q' <<<"$uris")
	die "no arm64 package ${bad:-in: ${pkgs[*]}} in the apt lists (apt-get update?)"
}
key=$(awk '{print $2, $4}' <<<"$uris" | sort)
[ "$(wc -l <<<"$key")" -eq ${#pkgs[@]} ] || die "apt-get lists $(wc -l <<<"$key") files for ${#pkgs[@]} packages"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
	exit 0
fi

echo "arm64-sysroot: downloading and unpacking ${#pkgs[@]} arm64 packages into $root" >&2
mkdir -p "$(dirname "$root")"
rm -rf "$root".tmp.* # left by a run that was killed
tmp=$(mktemp -d "$root.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/debs" "$tmp/root"
# apt drops its privileges to _apt for downloads: the directory must be its.
chown _apt "$tmp/debs" 2>/dev/null || true
(cd "$tmp/debs" && apt-get -qq download "${pkgs[@]/%/:arm64}" >"$tmp/apt.log" 2>&1) || true
while read -r _ file _ _; do
	[ -f "$tmp/debs/$file" ] && continue
	why=$(grep -m1 '^E: ' "$tmp/apt.log" | cut -c4-) || true
	die "download of ${file%%_*} (arm64) failed: ${why:-no $file}"
done <<<"$uris"

for deb in "$tmp"/debs/*.deb; do
	dpkg-deb -x "$deb" "$tmp/root" || die "cannot unpack $(basename "$deb")"
done

# Links to absolute paths (libz.so -> /lib/aarch64-linux-gnu/libz.so.1...)
# would name the host's files: make them relative, inside the sysroot.
while IFS= read -r -d '' l; do
	ln -sfnr "$tmp/root$(readlink "$l")" "$l"
done < <(find "$tmp/root" -type l -lname '/*' -print0)

printf '%s\n' "$key" >"$tmp/root/.packages"
rm -rf "$root.old"
[ -e "$root" ] && mv "$root" "$root.old"
mv "$tmp/root" "$root"
rm -rf "$root.old"
echo "arm64-sysroot: $(du -sh "$root" | cut -f1) in $root" >&2
