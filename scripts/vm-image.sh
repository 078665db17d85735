#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build what `make vm-run` boots, under build/vm/ (ARCH=arm64: the arm64
# template under build/arm64/vm/, from build/arm64/rootfs):
#
#   vmlinuz         Debian's cloud kernel (linux-image-*-cloud-$ARCH), taken
#                   from the .deb with dpkg-deb -x: nothing goes into /boot
#                   (arm64: an uncompressed Image, booted as it is)
#   initramfs.gz    static busybox that loads the virtio modules, sets the
#                   guest address, mounts the root disk and switch_roots to
#                   the init= of the kernel command line
#   modules/        the filesystem modules users mount with (FUSE, NFS and
#                   what they need) and overlayfs (try runs, docs/try.md),
#                   with a modules.dep from depmod; put in
#                   the root disk's /lib/modules so the kernel loads them
#                   on demand (nfs when mount.nfs runs); fuse is loaded by
#                   the initramfs, as /dev/fuse must exist before the first
#                   FUSE mount opens it
#   rootfs.ext4     the template rootfs (scripts/rootfs.sh: Debian 12, envd,
#                   envd-init, user `user`) as a raw ext4 image, made with
#                   mkfs.ext4 -d (no loop mount)
#
# Kernel and initramfs are cached (build/vm/.kernel-done names the kernel
# package); the disk is rebuilt only when the rootfs, envd or init changed.
set -euo pipefail
cd "$(dirname "$0")/.."

ARCH=${ARCH:-amd64}
case $ARCH in
amd64) ABUILD=build ;;
arm64) ABUILD=build/arm64 ;;
*) echo "vm-image: unknown ARCH $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac
OUT=$ABUILD/vm
ROOTFS=${ROOTFS:-$ABUILD/rootfs}
KPKG=${VM_KERNEL_PKG:-linux-image-cloud-$ARCH}
# Order matters: busybox insmod has no modules.dep to resolve dependencies.
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_mmio
virtio_blk failover net_failover virtio_net virtio-rng fuse"
# Loaded on demand from the root disk (kernel/ subdirectories of the package).
DISK_MODULES="fs/fuse fs/nfs fs/lockd fs/nfs_common fs/netfs fs/fscache net/sunrpc fs/overlayfs"
INITRD_STAMP=v3

log() { echo "vm-image: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (the rootfs is owned by many users)"
for t in dpkg-deb apt-get mkfs.ext4 cpio gzip depmod; do
	command -v "$t" >/dev/null || die "$t is missing (scripts/setup.sh installs it)"
done
mkdir -p "$OUT"
BUSYBOX=/bin/busybox
if [ "$ARCH" = arm64 ]; then
	# The arm64 busybox-static cannot be installed beside the amd64 one
	# (it would replace it): unpack it from its package instead.
	BUSYBOX=$OUT/busybox
	if ! file -L "$BUSYBOX" 2>/dev/null | grep -q 'ARM aarch64.*statically linked'; then
		bb=$OUT/busybox.tmp
		rm -rf "$bb"
		mkdir -p "$bb"
		if ! (cd "$bb" && apt-get download -qq busybox-static:arm64) >"$bb.log" 2>&1; then
			why=$(grep -Eo '[0-9]{3}  [A-Za-z ]+|Unable to locate package.*|Hash Sum mismatch|File has unexpected size|Could not resolve.*' \
				"$bb.log" | tail -n1)
			url=$(apt-get download --print-uris busybox-static:arm64 2>/dev/null | awk -F"'" '{print $2; exit}')
			rm -rf "$bb"
			die "apt-get download busybox-static:arm64${url:+ from $url} failed: ${why:-see $bb.log} (dpkg --add-architecture arm64; apt-get update)"
		fi
		dpkg-deb -x "$bb"/*.deb "$bb/x"
		# By a rename: an interrupted copy must not pass the check above.
		cp "$bb/x/bin/busybox" "$BUSYBOX.new"
		mv "$BUSYBOX.new" "$BUSYBOX"
		rm -rf "$bb" "$bb.log"
	fi
fi
file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	die "a static busybox is needed at $BUSYBOX (package busybox-static)"

# ---- kernel ----
# The kernels to try, newest first, as PKG=VERSION: for the meta package,
# each version of it names a versioned kernel package; an index can list a
# version the mirror no longer serves, so an older one must do then.
kernel_candidates() {
	case $KPKG in
	linux-image-[0-9]*)
		apt-cache madison "$KPKG:$ARCH" 2>/dev/null | awk -F'|' '$3 ~ /Packages/ {gsub(/ /, "", $2); print "'"$KPKG"'=" $2}' ;;
	*)
		local v
		for v in $(apt-cache madison "$KPKG:$ARCH" 2>/dev/null | awk -F'|' '$3 ~ /Packages/ {gsub(/ /, "", $2); print $2}'); do
			apt-cache show "$KPKG:$ARCH=$v" 2>/dev/null |
				sed -n 's/^Depends:.*\(linux-image-[0-9][^ ,]*\) (= \([^)]*\)).*/\1=\2/p' | head -n1
		done ;;
	esac
}

build_kernel() {
	local pkg=$1 tmp="$OUT/kernel.tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	log "downloading $pkg"
	(cd "$tmp" && apt-get download -qq "${pkg%%=*}:$ARCH=${pkg#*=}") >"$tmp.log" 2>&1 || {
		rm -rf "$tmp"
		return 1
	}
	dpkg-deb -x "$tmp"/*.deb "$tmp/x"
	local vmlinuz kver
	vmlinuz=$(ls "$tmp"/x/boot/vmlinuz-* | head -n1)
	kver=${vmlinuz##*/vmlinuz-}
	cp "$vmlinuz" "$OUT/vmlinuz.new"

	# ---- initramfs ----
	local ir="$tmp/initramfs" m f
	mkdir -p "$ir"/{bin,dev,proc,sys,newroot,lib/modules}
	cp "$BUSYBOX" "$ir/bin/busybox"
	for m in $MODULES; do
		f=$(find "$tmp/x/lib/modules/$kver" \( -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" \) | head -n1)
		[ -n "$f" ] || die "module $m not found in $pkg"
		case $f in
		*.xz) xz -dc "$f" >"$ir/lib/modules/$m.ko" ;;
		*.zst) zstd -qdc "$f" >"$ir/lib/modules/$m.ko" ;;
		*) cp "$f" "$ir/lib/modules/$m.ko" ;;
		esac
	done
	echo "$MODULES" | tr '\n' ' ' >"$ir/lib/modules/order"

	# ---- modules for the root disk ----
	local md="$tmp/modules/lib/modules/$kver" d
	mkdir -p "$md/kernel"
	for d in $DISK_MODULES; do
		mkdir -p "$md/kernel/$(dirname "$d")"
		cp -a "$tmp/x/lib/modules/$kver/kernel/$d" "$md/kernel/$d"
	done
	cp "$tmp/x/lib/modules/$kver/modules.builtin"* "$md/" 2>/dev/null || true
	depmod -b "$tmp/modules" "$kver" || die "depmod failed"
	cat >"$ir/init" <<'EOF'
#!/bin/busybox sh
# Stage one: modules, network, root disk, then the real init.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /lib/modules/order); do
	insmod /lib/modules/$m.ko 2>/dev/null || echo "initramfs: insmod $m failed"
done
arg() { sed -n "s/.*\(^\| \)$1=\([^ ]*\).*/\2/p" /proc/cmdline; }
root=$(arg root); init=$(arg init); ip=$(arg vm.ip); gw=$(arg vm.gw)
: ${root:=/dev/vda} ${init:=/sbin/init}
ip link set lo up
if [ -n "$ip" ]; then
	ip link set eth0 up && ip addr add "$ip" dev eth0 &&
		{ [ -z "$gw" ] || ip route add default via "$gw"; } ||
		echo "initramfs: cannot configure eth0 with $ip"
fi
i=0
while [ ! -b "$root" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
mount -t ext4 -o rw,noatime "$root" /newroot || { echo "initramfs: cannot mount $root"; exec sh; }
umount /sys /proc
umount -l /dev
exec switch_root /newroot "$init"
EOF
	chmod 0755 "$ir/init"
	(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -9) >"$OUT/initramfs.gz.new"
	mv "$OUT/vmlinuz.new" "$OUT/vmlinuz"
	mv "$OUT/initramfs.gz.new" "$OUT/initramfs.gz"
	rm -rf "$OUT/modules"
	mv "$tmp/modules" "$OUT/modules"
	echo "$pkg $kver $INITRD_STAMP" >"$OUT/.kernel-done"
	rm -rf "$tmp"
	log "kernel $kver, initramfs $(du -k "$OUT/initramfs.gz" | cut -f1) KiB"
}

cands=$(kernel_candidates)
[ -n "$cands" ] || { apt-get update -qq >/dev/null 2>&1 || true; cands=$(kernel_candidates); }
[ -n "$cands" ] || die "no version of $KPKG is known to apt (apt-get update?)"
have=$(cut -d' ' -f1,3 "$OUT/.kernel-done" 2>/dev/null || true)
if [ -s "$OUT/vmlinuz" ] && [ -s "$OUT/initramfs.gz" ] &&
	grep -qxF "${have% *}" <<<"$cands" && [ "${have##* }" = "$INITRD_STAMP" ] &&
	[ -d "$OUT/modules/lib/modules" ]; then
	log "reusing kernel $(cut -d' ' -f2 "$OUT/.kernel-done")"
else
	skipped=()
	for kpkg in $cands; do
		if build_kernel "$kpkg"; then
			[ ${#skipped[@]} -eq 0 ] || log "kernel $kpkg (skipped: ${skipped[*]})"
			break
		fi
		why=$(grep -Eo '[0-9]{3}  [A-Za-z ]+|Unable to locate package|Hash Sum mismatch|File has unexpected size' \
			"$OUT/kernel.tmp.log" 2>/dev/null | tail -n1 | sed 's/ *$//')
		log "kernel $kpkg could not be downloaded (${why:-see $OUT/kernel.tmp.log}); trying an older one"
		skipped+=("$kpkg: ${why:-failed};")
		kpkg=
	done
	[ -n "$kpkg" ] || die "no kernel package could be downloaded (tried: ${skipped[*]})"
	rm -f "$OUT/kernel.tmp.log"
fi

# ---- root disk ----
[ -f "$ROOTFS/.base-done" ] || die "$ROOTFS is missing: run make rootfs"
for b in $ABUILD/envd $ABUILD/init; do [ -x "$b" ] || die "$b is missing: run make ARCH=$ARCH"; done
# (The base's stamp and its time: a base rebuilt is a new disk.)
key=$( { cat "$ROOTFS/.base-done" "$OUT/.kernel-done"; stat -c %Y "$ROOTFS/.base-done"; sha256sum $ABUILD/envd $ABUILD/init "$0" | cut -d' ' -f1; } | sha256sum | cut -c1-16)
if [ "$(cat "$OUT/.disk-key" 2>/dev/null)" = "$key" ] && [ -s "$OUT/rootfs.ext4" ]; then
	log "reusing $OUT/rootfs.ext4"
else
	# The image's envd and init are the ones just built (scripts/rootfs.sh
	# installs them; again here in case the rootfs was made before).
	bash rootfs-overlay/install.sh --envd $ABUILD/envd --init $ABUILD/init --user user "$ROOTFS" >/dev/null
	# The kernel's filesystem modules (the container test never looks there).
	rm -rf "$ROOTFS/lib/modules"
	mkdir -p "$ROOTFS/lib"
	cp -a "$OUT/modules/lib/modules" "$ROOTFS/lib/modules"
	# Room for the tests: the root plus 1 GiB; the file is sparse.
	used=$(du -sxm "$ROOTFS" | cut -f1)
	size=$((used + 1024))
	rm -f "$OUT/rootfs.ext4.new"
	truncate -s "${size}M" "$OUT/rootfs.ext4.new"
	mkfs.ext4 -q -F -L envd-root -E root_owner=0:0 -d "$ROOTFS" "$OUT/rootfs.ext4.new" ||
		die "mkfs.ext4 -d failed"
	mv "$OUT/rootfs.ext4.new" "$OUT/rootfs.ext4"
	echo "$key" >"$OUT/.disk-key"
	log "root disk $OUT/rootfs.ext4: ${size} MiB (sparse), $(du -m "$OUT/rootfs.ext4" | cut -f1) MiB used"
fi
log "ready: $OUT/vmlinuz $OUT/initramfs.gz $OUT/rootfs.ext4"
