#!/usr/bin/env bash
# debian-guest.sh: builds the Debian 12 (bookworm) guest with systemd on a real cgroup v2
# hierarchy that memtide's systemd test boots (crates/cli/tests/linux/systemd.rs), as root,
# from Debian's packages only, cached between runs.
#
#   debian-guest.sh [--force] [DIR]
#
# The kernel is the tiny guest's (scripts/guest-image.sh, in $MEMTIDE_GUEST_DIR, else
# /var/cache/memtide/guest: build it first). DIR is where this image goes: the argument, else
# that directory's debian/. It gets:
#   rootfs.img          raw ext4 (2 GiB, sparse), made with `mkfs.ext4 -d` from a
#                       `debootstrap --variant=minbase` tree (no loop mount): systemd, dbus,
#                       redis-server, redis-tools, procps, kmod, udev; root without password,
#                       redis-server.service, the apt timers and the serial getty disabled;
#                       memtide-guest-run.service (below) enabled
#   vmlinuz             the tiny guest's kernel (ext4 is built in)
#   initramfs.cpio.gz   the tiny guest's initramfs with this checkout's scripts/guest-init.sh
#                       appended as /init: with memtide.root=vda it loads virtio and zram, then
#                       switch_roots to the disk's systemd
#   manifest            key=value lines: the root file system's inputs (suite, mirror, packages,
#                       this script's sha256), then the boot files' (the tiny guest's kernel
#                       release and initramfs sha256, guest-init.sh's sha256), then what was built
# Each part is rebuilt only when its inputs changed (debootstrap takes about 1.5 min, the
# initramfs a second). Either way it ends by printing the three paths, one a line (kernel,
# initramfs, root image). --force rebuilds both.
#
# memtide-guest-run.service runs at boot once the system is up (`systemctl is-system-running
# --wait`): it mounts a second virtio disk (/dev/vdb, ext4, read-only) on /run/memtide-test,
# prints `memtide-debian: ready state=STATE uptime_s=S` on ttyS0, runs its run.sh with output to
# ttyS0, prints `memtide-debian: run exited N`, and powers the guest off when the disk holds a
# file named poweroff. Without a second disk it prints `memtide-debian: ready ...` and
# `memtide-debian: no test disk`.
#
# Booting it (TCG; 1.5 GiB, 2 vCPUs; the root disk in snapshot mode keeps the image unchanged):
#   qemu-system-x86_64 -machine q35,accel=tcg -m 1536 -smp 2 -nodefaults -display none \
#     -kernel DIR/vmlinuz -initrd DIR/initramfs.cpio.gz \
#     -append 'console=ttyS0 quiet memtide.root=vda memtide.balloon=off' \
#     -drive file=DIR/rootfs.img,if=virtio,format=raw,snapshot=on \
#     -drive file=TEST.img,if=virtio,format=raw,readonly=on \
#     -device virtio-rng-pci -serial file:console.log
# systemd 252 mounts the unified (v2) hierarchy by default: no kernel parameter is needed.
#
# The mirror is the one apt uses for bookworm (apt-get indextargets), or $MEMTIDE_DEBIAN_MIRROR.
# Needs root, debootstrap, mkfs.ext4 (e2fsprogs), apt-get, sha256sum, cpio, gzip, flock.
# Errors: one line naming what is missing or failed, on stderr, and a non-zero exit (2 for bad
# usage). Progress goes to stderr; stdout has only the three paths.
set -euo pipefail

readonly PROG=debian-guest.sh
readonly USAGE="usage: $PROG [--force] [DIR]"
readonly SUITE=bookworm
readonly PACKAGES=systemd,systemd-sysv,dbus,redis-server,redis-tools,procps,kmod,udev
readonly SIZE=2G
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
readonly INIT=$HERE/guest-init.sh

die() { # status message
    echo "$PROG: $2" >&2
    exit "$1"
}
note() { echo "$PROG: $*" >&2; }

force=0
out=""
while [[ $# -gt 0 ]]; do
    case $1 in
    -f | --force) force=1 ;;
    -h | --help)
        echo "$USAGE"
        exit 0
        ;;
    -*) die 2 "unknown option $1; $USAGE" ;;
    *)
        [[ -z $out ]] || die 2 "one DIR only; $USAGE"
        out=$1
        ;;
    esac
    shift
done
tiny=${MEMTIDE_GUEST_DIR:-/var/cache/memtide/guest}
out=${out:-$tiny/debian}

[[ $EUID -eq 0 ]] || die 1 "needs root (debootstrap, and files owned by the guest's users)"
for tool in debootstrap mkfs.ext4 apt-get sha256sum cpio gzip flock chroot findmnt; do
    command -v "$tool" >/dev/null 2>&1 || die 1 "$tool is missing"
done
[[ -f $INIT ]] || die 1 "the guest's init $INIT is missing"
[[ -s $tiny/vmlinuz && -s $tiny/initramfs.cpio.gz && -f $tiny/manifest ]] ||
    die 1 "no tiny guest in $tiny (run scripts/guest-image.sh first)"

mirror=${MEMTIDE_DEBIAN_MIRROR:-}
if [[ -z $mirror ]]; then
    mirror=$(apt-get indextargets --format '$(RELEASE) $(SITE)' 2>/dev/null |
        awk -v s="$SUITE" '$1 == s { print $2; exit }') || true
fi
[[ -n $mirror ]] ||
    die 1 "apt knows no $SUITE mirror (add one to /etc/apt/sources.list or set MEMTIDE_DEBIAN_MIRROR)"

mkdir -p "$out" || die 1 "cannot create the output directory $out"
out=$(cd "$out" && pwd)
readonly ROOTFS=$out/rootfs.img KERNEL=$out/vmlinuz INITRD=$out/initramfs.cpio.gz
readonly MANIFEST=$out/manifest
exec 9>"$out/.lock"
flock 9 || die 1 "cannot lock $out/.lock"

scratch=$(mktemp -d "$out/.build.XXXXXX")
cleanup() {
    # debootstrap mounts proc and sys in its tree; a failure may leave them there.
    local m
    for m in $(findmnt -rn -o TARGET | grep "^$scratch/" | sort -r || true); do
        umount -l "$m" || true
    done
    rm -rf --one-file-system "$scratch" || true
}
trap cleanup EXIT

rootfs_inputs="suite=$SUITE
mirror=$mirror
packages=$PACKAGES
size=$SIZE
script_sha256=$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
boot_inputs="kernel_release=$(sed -n 's/^kernel_release=//p' "$tiny/manifest")
tiny_initramfs_sha256=$(sha256sum "$tiny/initramfs.cpio.gz" | cut -d' ' -f1)
init_sha256=$(sha256sum "$INIT" | cut -d' ' -f1)"

old_rootfs="" old_boot=""
if [[ -f $MANIFEST ]]; then
    old_rootfs=$(head -n 5 "$MANIFEST")
    old_boot=$(sed -n 6,8p "$MANIFEST")
fi
build_rootfs=1 build_boot=1
[[ $force == 0 && -s $ROOTFS && $old_rootfs == "$rootfs_inputs" ]] && build_rootfs=0
[[ $force == 0 && -s $KERNEL && -s $INITRD && $old_boot == "$boot_inputs" ]] && build_boot=0
if [[ $build_rootfs == 0 && $build_boot == 0 ]]; then
    note "up to date"
    printf '%s\n' "$KERNEL" "$INITRD" "$ROOTFS"
    exit 0
fi
# The manifest goes first and comes back last, so a half-written image never matches.
versions=""
[[ $build_rootfs == 1 ]] || versions=$(sed -n '9,$p' "$MANIFEST" | grep -v '^built=')
rm -f "$MANIFEST"

if [[ $build_boot == 1 ]]; then
    note "initramfs: the tiny guest's with this checkout's guest-init.sh as /init"
    mkdir -p "$scratch/init"
    install -m 0755 "$INIT" "$scratch/init/init"
    # Concatenated newc archives: the kernel unpacks them in order, the later /init wins.
    {
        cat "$tiny/initramfs.cpio.gz"
        (cd "$scratch/init" && echo init | cpio -o -H newc -R 0:0 2>/dev/null) | gzip -9
    } >"$scratch/initramfs.cpio.gz" || die 1 "cannot pack the initramfs"
    cp "$tiny/vmlinuz" "$scratch/vmlinuz"
    mv -f "$scratch/vmlinuz" "$KERNEL"
    mv -f "$scratch/initramfs.cpio.gz" "$INITRD"
fi

if [[ $build_rootfs == 1 ]]; then
    root=$scratch/root
    start=$(date +%s)
    note "debootstrap $SUITE from $mirror (about 1.5 min)"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$mirror" \
        >"$scratch/debootstrap.log" 2>&1 ||
        die 1 "debootstrap failed: $(grep -E '^(E|W):' "$scratch/debootstrap.log" | tail -n 1)"
    echo debian-guest >"$root/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 debian-guest\n' >"$root/etc/hosts"
    # The initramfs mounts the root read-write; nothing to check at boot.
    echo '/dev/vda / ext4 rw,errors=remount-ro 0 0' >"$root/etc/fstab"
    chroot "$root" passwd -d root >/dev/null || die 1 "cannot clear root's password"
    chroot "$root" systemctl disable --quiet redis-server.service ||
        die 1 "cannot disable redis-server.service"
    chroot "$root" systemctl mask --quiet apt-daily.timer apt-daily-upgrade.timer \
        e2scrub_all.timer fstrim.timer serial-getty@ttyS0.service getty@tty1.service ||
        die 1 "cannot mask the timers and gettys"
    cat >"$root/usr/local/sbin/memtide-guest-run" <<'EOF'
#!/bin/sh
# memtide-guest-run: at boot, once the system is up, runs run.sh from the second virtio disk
# (/dev/vdb) with its output on ttyS0, then powers off when the disk holds `poweroff`. Made by
# memtide's scripts/debian-guest.sh; its markers are described there.
exec >/dev/ttyS0 2>&1
state=$(systemctl is-system-running --wait)
echo "memtide-debian: ready state=$state uptime_s=$(cut -d' ' -f1 /proc/uptime)"
if [ ! -b /dev/vdb ]; then
    echo "memtide-debian: no test disk"
    exit 0
fi
mkdir -p /run/memtide-test
if ! mount -o ro /dev/vdb /run/memtide-test; then
    echo "memtide-debian: error: cannot mount /dev/vdb"
    exit 1
fi
cd /run/memtide-test || exit 1
sh ./run.sh </dev/null
echo "memtide-debian: run exited $?"
if [ -e /run/memtide-test/poweroff ]; then
    echo "memtide-debian: poweroff"
    systemctl poweroff
fi
EOF
    chmod 0755 "$root/usr/local/sbin/memtide-guest-run"
    cat >"$root/etc/systemd/system/memtide-guest-run.service" <<'EOF'
# Runs a memtide test's script from the second virtio disk (scripts/debian-guest.sh).
[Unit]
Description=memtide test run from /dev/vdb
After=multi-user.target

[Service]
# Not oneshot: its start job must not hold the boot, which it waits for.
Type=simple
ExecStart=/usr/local/sbin/memtide-guest-run

[Install]
WantedBy=multi-user.target
EOF
    chroot "$root" systemctl enable --quiet memtide-guest-run.service ||
        die 1 "cannot enable memtide-guest-run.service"
    chroot "$root" apt-get clean >/dev/null 2>&1 || true
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
    versions=$(chroot "$root" dpkg-query -W -f='${Package}=${Version}\n' systemd redis-server \
        dbus)
    note "mkfs.ext4 -d (no loop mount)"
    truncate -s "$SIZE" "$scratch/rootfs.img"
    mkfs.ext4 -q -F -L debian-root -d "$root" "$scratch/rootfs.img" >&2 ||
        die 1 "mkfs.ext4 could not make the root image"
    mv -f "$scratch/rootfs.img" "$ROOTFS"
    note "root file system built in $(($(date +%s) - start)) s"
fi

{
    echo "$rootfs_inputs"
    echo "$boot_inputs"
    echo "$versions"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$MANIFEST.tmp"
mv -f "$MANIFEST.tmp" "$MANIFEST"
printf '%s\n' "$KERNEL" "$INITRD" "$ROOTFS"
