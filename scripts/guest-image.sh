#!/usr/bin/env bash
# guest-image.sh: builds the tiny Linux guest that memtide's QEMU tests boot: a kernel and an
# initramfs, from Debian's packages only (nothing else is downloaded), cached between runs.
#
#   guest-image.sh [--force] [DIR]
#
# DIR is where the image goes: the argument, else $MEMTIDE_GUEST_DIR, else
# /var/cache/memtide/guest. It gets:
#   vmlinuz             the kernel of Debian's cloud-amd64 flavour (boots on QEMU's q35 and pc)
#   initramfs.cpio.gz   gzip'd newc cpio: static busybox with its applet links, the kernel's
#                       virtio (virtio_pci, virtio_balloon, virtio_blk, virtio_rng), zram and
#                       compressor modules with what they depend on (uncompressed, for busybox
#                       insmod; with modules.dep and modules.alias for busybox modprobe),
#                       memtide-toucher built static from crates/toucher as /bin/memtide-toucher,
#                       and scripts/guest-init.sh as /init (its kernel command line parameters and
#                       console markers are described there)
#   manifest            key=value lines: the inputs (kernel package and version, busybox-static's
#                       version, the toucher's and these scripts' sha256) then the build's
#                       kernel release, modules and date
# When DIR's manifest already names the current inputs nothing is built. Either way it ends by
# printing the two image paths, one a line (kernel first). --force builds regardless.
#
# Inputs: the kernel package is the one Debian's meta package linux-image-cloud-amd64 depends
# on (override with MEMTIDE_GUEST_KERNEL=linux-image-...-cloud-amd64[-unsigned]); it is fetched
# with `apt-get download` and unpacked in a scratch directory, never installed. busybox-static
# must be installed (/bin/busybox). The toucher is built with cargo for x86_64-unknown-linux-gnu
# with +crt-static (glibc, static), under $CARGO_TARGET_DIR if set. Needs apt-get, dpkg-deb,
# cargo, gzip, sha256sum and flock; xz or zstd only for a kernel whose modules are compressed.
#
# Booting it (TCG, no KVM needed; ready in about 2.5 s):
#   qemu-system-x86_64 -machine q35,accel=tcg -m 1024 -smp 1 -nodefaults -display none \
#     -kernel DIR/vmlinuz -initrd DIR/initramfs.cpio.gz \
#     -append 'console=ttyS0 quiet memtide.run="memtide-toucher --active 300M"' \
#     -device virtio-balloon-pci,id=balloon0,free-page-reporting=on -device virtio-rng-pci \
#     -serial file:console.log -serial unix:shell.sock,server=on,wait=off \
#     -qmp unix:qmp.sock,server=on,wait=off
# The second -serial (the guest's command shell) and virtio-rng-pci (without it the guest waits
# about a second for random numbers) are optional; so is -drive file=DISK,if=virtio,format=raw
# for memtide.disk=vda. guest-init.sh describes the kernel command line and console markers.
#
# Errors: one line naming what is missing or failed, on stderr, and a non-zero exit (2 for bad
# usage). Progress goes to stderr; stdout has only the two paths.
set -euo pipefail

readonly PROG=guest-image.sh
readonly USAGE="usage: $PROG [--force] [DIR]"
readonly META=linux-image-cloud-amd64
readonly TARGET=x86_64-unknown-linux-gnu
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
readonly REPO=${HERE%/scripts}
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
out=${out:-${MEMTIDE_GUEST_DIR:-/var/cache/memtide/guest}}

for tool in apt-get apt-cache dpkg-deb dpkg-query cargo gzip sha256sum flock awk find; do
    command -v "$tool" >/dev/null 2>&1 || die 1 "$tool is missing"
done
[[ -f $INIT ]] || die 1 "the guest's init $INIT is missing"
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' ||
    [[ ! -x /bin/busybox ]]; then
    die 1 "busybox-static is missing (apt-get install busybox-static)"
fi

mkdir -p "$out" || die 1 "cannot create the output directory $out"
out=$(cd "$out" && pwd)
readonly KERNEL=$out/vmlinuz INITRD=$out/initramfs.cpio.gz MANIFEST=$out/manifest
exec 9>"$out/.lock"
flock 9 || die 1 "cannot lock $out/.lock"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/memtide-guest.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch" # apt-get download's _apt user writes here

# The kernel package: MEMTIDE_GUEST_KERNEL, else the meta package's dependency.
kernel_package() {
    if [[ -n ${MEMTIDE_GUEST_KERNEL:-} ]]; then
        echo "$MEMTIDE_GUEST_KERNEL"
        return
    fi
    apt-cache depends "$META" 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }' || true
}
candidate_version() { # package
    apt-cache show --no-all-versions "$1" 2>/dev/null |
        awk '$1 == "Version:" { print $2; exit }' || true
}
resolve_kernel() {
    kpkg=$(kernel_package)
    kver=""
    [[ -z $kpkg ]] || kver=$(candidate_version "$kpkg")
}
resolve_kernel
if [[ -z $kpkg || -z $kver ]]; then
    note "apt-get update (${kpkg:-$META} unknown to apt)"
    apt-get update -q >&2 || die 1 "apt-get update failed"
    resolve_kernel
fi
[[ -n $kpkg ]] || die 1 "apt knows no $META to take the kernel from (set MEMTIDE_GUEST_KERNEL)"
[[ -n $kver ]] || die 1 "apt knows no kernel package $kpkg"

bbver=$(dpkg-query -W -f='${Version}' busybox-static)

# The toucher, static. cargo prints each artifact as JSON; the binary's line has "executable".
note "building memtide-toucher (static)"
toucher=$(cd "$REPO" && env -u CARGO_ENCODED_RUSTFLAGS RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --release -p memtide-toucher --target "$TARGET" \
    --message-format=json-render-diagnostics |
    sed -n 's/.*"executable":"\([^"]*\/memtide-toucher\)".*/\1/p' | tail -n 1) ||
    die 1 "cargo could not build memtide-toucher"
[[ -n $toucher && -x $toucher ]] || die 1 "cargo built no memtide-toucher executable"
if command -v readelf >/dev/null 2>&1 && readelf -lW "$toucher" | grep -q 'INTERP'; then
    die 1 "$toucher is dynamically linked (needs glibc's static libc.a: apt-get install libc6-dev)"
fi
touch_sum=$(sha256sum "$toucher" | cut -d' ' -f1)
script_sum=$(cat "${BASH_SOURCE[0]}" "$INIT" | sha256sum | cut -d' ' -f1)

inputs="kernel_package=$kpkg
kernel_version=$kver
busybox_static=$bbver
toucher_sha256=$touch_sum
script_sha256=$script_sum"

if [[ $force == 0 && -s $KERNEL && -s $INITRD && -f $MANIFEST ]] &&
    [[ "$(head -n 5 "$MANIFEST")" == "$inputs" ]]; then
    note "up to date ($kpkg $kver)"
    echo "$KERNEL"
    echo "$INITRD"
    exit 0
fi

# The kernel package, unpacked.
note "downloading $kpkg $kver"
if ! (cd "$scratch" && apt-get download -q "$kpkg=$kver" >&2 2>"$scratch/apt.err"); then
    # Old package lists name a version the mirror may no longer have.
    note "apt-get update (download of $kpkg $kver failed)"
    apt-get update -q >&2 || die 1 "apt-get update failed"
    resolve_kernel
    [[ -n $kpkg && -n $kver ]] || die 1 "apt knows no kernel package ${kpkg:-from $META}"
    (cd "$scratch" && apt-get download -q "$kpkg=$kver" >&2) ||
        die 1 "apt-get download $kpkg=$kver failed"
    inputs="kernel_package=$kpkg
kernel_version=$kver
busybox_static=$bbver
toucher_sha256=$touch_sum
script_sha256=$script_sum"
fi
deb=$(find "$scratch" -maxdepth 1 -name '*.deb' | head -n 1)
[[ -n $deb ]] || die 1 "apt-get download left no .deb for $kpkg"
pkgroot=$scratch/pkg
dpkg-deb -x "$deb" "$pkgroot" || die 1 "dpkg-deb cannot unpack $deb"
vmlinuz=$(find "$pkgroot/boot" -maxdepth 1 -name 'vmlinuz-*' | head -n 1)
[[ -n $vmlinuz ]] || die 1 "$kpkg has no /boot/vmlinuz-*"
rel=${vmlinuz##*/vmlinuz-}
modsrc=$pkgroot/lib/modules/$rel
[[ -d $modsrc ]] || modsrc=$pkgroot/usr/lib/modules/$rel
[[ -d $modsrc/kernel ]] || die 1 "$kpkg has no modules for $rel"

# The initramfs tree.
root=$scratch/root
moddst=$root/lib/modules/$rel
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,root,mnt,etc} "$moddst"
cp /bin/busybox "$root/bin/busybox"
while read -r applet; do
    [[ $applet == bin/busybox || -e $root/$applet || -L $root/$applet ]] && continue
    [[ $applet == */* ]] && mkdir -p "$root/${applet%/*}"
    ln -s /bin/busybox "$root/$applet"
done < <(/bin/busybox --list-full)
[[ -L $root/bin/sh ]] || ln -s busybox "$root/bin/sh"
if command -v strip >/dev/null 2>&1; then
    strip -o "$root/bin/memtide-toucher" "$toucher"
else
    cp "$toucher" "$root/bin/memtide-toucher"
fi
install -m 0755 "$INIT" "$root/init"
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"
if [[ $EUID -eq 0 ]]; then
    mknod -m 600 "$root/dev/console" c 5 1
    mknod -m 666 "$root/dev/null" c 1 3
fi

# Modules: each wanted one with its dependencies (from the .ko's modinfo "depends="), copied
# uncompressed as NAME.ko; built-in ones (modules.builtin) only noted. memtide.deps tells the
# init the order: "NAME DEP..." or "NAME builtin".
declare -A ko=() builtin=() done_=()
while read -r f; do
    n=${f##*/}
    n=${n%%.ko*}
    ko[${n//-/_}]=$f
done < <(find "$modsrc/kernel" -name '*.ko' -o -name '*.ko.*')
if [[ -f $modsrc/modules.builtin ]]; then
    while read -r f; do
        n=${f##*/}
        n=${n%.ko}
        builtin[${n//-/_}]=1
    done <"$modsrc/modules.builtin"
fi
: >"$moddst/memtide.deps"
order=()
uncompress() { # source dest
    case $1 in
    *.ko) cp "$1" "$2" ;;
    *.ko.xz)
        command -v xz >/dev/null 2>&1 || die 1 "xz is missing (the kernel's modules are .ko.xz)"
        xz -dc "$1" >"$2"
        ;;
    *.ko.zst)
        command -v zstd >/dev/null 2>&1 ||
            die 1 "zstd is missing (the kernel's modules are .ko.zst)"
        zstd -qdc "$1" >"$2"
        ;;
    *.ko.gz) gzip -dc "$1" >"$2" ;;
    *) die 1 "unknown module compression: $1" ;;
    esac
}
add_module() { # name required(1|0)
    local name=${1//-/_} deps dep
    [[ -z ${done_[$name]:-} ]] || return 0
    if [[ -n ${builtin[$name]:-} ]]; then
        done_[$name]=1
        echo "$name builtin" >>"$moddst/memtide.deps"
        return 0
    fi
    if [[ -z ${ko[$name]:-} ]]; then
        [[ $2 == 1 ]] && die 1 "$kpkg has no module $name (neither a .ko nor built in)"
        note "$kpkg has no module $name (optional; left out)"
        return 0
    fi
    done_[$name]=1
    uncompress "${ko[$name]}" "$moddst/$name.ko"
    deps=$(tr '\0' '\n' <"$moddst/$name.ko" | sed -n 's/^depends=//p' | head -n 1 | tr ',' ' ')
    for dep in $deps; do
        add_module "$dep" 1
    done
    echo "$name $deps" >>"$moddst/memtide.deps"
    order+=("$name")
}
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_balloon \
    zram; do
    add_module "$m" 1
done
# Compressors for zram (the default, lzo-rle, is needed unless built in), a virtio disk, and a
# virtio RNG (without one the guest's first read of /dev/urandom waits about a second under TCG).
add_module lzo_rle 1
for m in lzo lz4 zstd virtio_blk virtio_rng; do
    add_module "$m" 0
done
# modules.dep and modules.alias for busybox modprobe in the guest (a workload's `modprobe`, and
# the kernel's own requests such as crypto-lzo-rle); a convenience, so a failure only warns.
/bin/busybox depmod -b "$root" "$rel" 2>/dev/null ||
    note "busybox depmod failed (modprobe in the guest will not work)"

note "packing the initramfs"
cp "$vmlinuz" "$scratch/vmlinuz"
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
    /bin/busybox cpio -o -H newc -R 0:0 2>/dev/null) |
    gzip -9 >"$scratch/initramfs.cpio.gz" || die 1 "cannot pack the initramfs"

# Replace the image: the manifest goes first and comes back last, so a half-written image never
# matches.
rm -f "$MANIFEST"
mv -f "$scratch/vmlinuz" "$KERNEL"
mv -f "$scratch/initramfs.cpio.gz" "$INITRD"
{
    echo "$inputs"
    echo "kernel_release=$rel"
    echo "modules=$(
        IFS=,
        echo "${order[*]}"
    )"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$MANIFEST.tmp"
mv -f "$MANIFEST.tmp" "$MANIFEST"
note "built $kpkg $kver ($rel): vmlinuz $(stat -c %s "$KERNEL") bytes," \
    "initramfs $(stat -c %s "$INITRD") bytes"
echo "$KERNEL"
echo "$INITRD"
