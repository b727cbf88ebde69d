#!/usr/bin/env bash
# density-guest.sh: the density benchmark (`memtide bench density`, docs/benchmarks.md,
# "Density") on real cgroup v2, in the tiny QEMU guest (this host's memory controller is v1
# only), so Senpai (Meta's TMO agent) is compared with the kernel alone, static sizing and
# memtide on the same servers and load; issue 31's policy (f).
#
#   density-guest.sh SENPAI_PY OUT [CONFIG]      (as root)
#
# SENPAI_PY is Senpai's senpai.py (github.com/facebookincubator/senpai, one stdlib-only Python
# file; not shipped with memtide, so this is a benchmark, not a test). CONFIG is the set-up
# (default bench/density-guest.toml; its `senpai = "senpai.py"` names the copy put beside it
# in the guest). OUT gets the guest's output directory (every trial's raw lines under
# OUT/raw), then results.json, density.md and density.svg, written on this host by
# `memtide bench density --merge` from the guest's results.
#
# The guest: scripts/guest-image.sh's kernel and initramfs (Debian's 6.1 cloud kernel), GUEST_MEM
# of RAM (default 3G), 2 vCPUs, TCG, a zram swap of ZRAM (default 2G), and a second initramfs
# archive holding memtide, memtide-loadgen, redis-server, memcached, this host's python3.11,
# senpai.py, the set-up, and every shared library ldd names (scripts/guest-overlay.sh). A
# scratch disk (a sparse 2 GiB file, ext2 made by the guest) holds the output directory; this
# script reads it back with debugfs. In the guest, the workload mounts cgroup2 on
# /sys/fs/cgroup, gives the root's children the memory controller and runs
# `memtide bench density` from the root cgroup.
#
# Environment: GUEST_MEM, ZRAM, TIMEOUT (seconds the guest may run, default 14400), LOCK (a file
# to hold with flock while QEMU runs, for a host shared with other guests), MEMTIDE (default
# target/release/memtide, with memtide-loadgen beside it), MEMTIDE_GUEST_DIR (the guest image,
# default /var/cache/memtide/guest). Temporary files live in one mktemp directory, removed at
# exit; a QEMU still running at exit is killed. Needs qemu-system-x86_64, cpio, gzip, strip,
# ldd, debugfs (e2fsprogs), redis-server and memcached.
set -euo pipefail

readonly PROG=density-guest.sh
die() { echo "$PROG: $*" >&2; exit 1; }
[[ $# -ge 2 && $# -le 3 ]] || { echo "usage: $PROG SENPAI_PY OUT [CONFIG]" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/guest-overlay.sh
. "$here/scripts/guest-overlay.sh"
senpai=$1
out=$2
config=${3:-$here/bench/density-guest.toml}
memtide=${MEMTIDE:-$here/target/release/memtide}
loadgen=$(dirname "$memtide")/memtide-loadgen
guest=${MEMTIDE_GUEST_DIR:-/var/cache/memtide/guest}
mem=${GUEST_MEM:-3G}
zram=${ZRAM:-2G}
timeout=${TIMEOUT:-14400}

[[ $EUID -eq 0 ]] || die "needs root"
[[ -f $senpai ]] || die "no senpai.py at $senpai"
[[ -f $config ]] || die "no set-up at $config"
for f in "$memtide" "$loadgen" /usr/bin/redis-server /usr/bin/memcached /usr/bin/python3.11 \
  "$guest/vmlinuz" "$guest/initramfs.cpio.gz"; do
  [[ -e $f ]] || die "$f is missing"
done
for tool in qemu-system-x86_64 cpio gzip strip ldd debugfs flock truncate; do
  command -v "$tool" >/dev/null || die "$tool is missing"
done
work=$(mktemp -d /tmp/density-guest.XXXXXX)
qemu=""
cleanup() {
  if [[ -n $qemu ]]; then kill "$qemu" 2>/dev/null || true; wait "$qemu" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root=$work/overlay
bench=$root/usr/local/lib/bench
mkdir -p "$root/usr/local/bin" "$bench" "$root/usr/bin"
install -m 0755 "$memtide" "$root/usr/local/bin/memtide"
install -m 0755 "$loadgen" "$root/usr/local/bin/memtide-loadgen"
strip --strip-debug "$root/usr/local/bin/memtide" "$root/usr/local/bin/memtide-loadgen"
install -m 0755 /usr/bin/redis-server /usr/bin/memcached "$root/usr/bin/"
install -m 0644 "$senpai" "$bench/senpai.py"
install -m 0644 "$config" "$bench/density.toml"
overlay_python "$root"
overlay_libs "$root" "$memtide" "$loadgen" /usr/bin/redis-server /usr/bin/memcached
overlay_users "$root"
cat >"$bench/run.sh" <<'GUEST'
# density-guest workload (scripts/density-guest.sh): the benchmark on cgroup v2, its output
# on the scratch disk at /mnt.
export PATH=/usr/local/bin:/usr/bin:/bin:/sbin:/usr/sbin
ip link set lo up || echo "density-guest: error what=loopback"
mount -t cgroup2 none /sys/fs/cgroup || echo "density-guest: error what=mount-cgroup2"
echo +memory >/sys/fs/cgroup/cgroup.subtree_control || echo "density-guest: error what=subtree"
echo "density-guest: start kernel=$(uname -r) mem_kb=$(awk '/MemTotal/ { print $2 }' /proc/meminfo)"
memtide bench density --config /usr/local/lib/bench/density.toml --out /mnt/density
echo "density-guest: exit $?"
sync
GUEST
overlay_pack "$root" "$guest/initramfs.cpio.gz" "$work/initrd.cpio.gz"
rm -rf "$root"

disk=$work/scratch.img
truncate -s 2G "$disk"
console=$work/console
echo "$PROG: booting (RAM $mem, zram $zram; host load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
start=$(date +%s)
if [[ -n ${LOCK:-} ]]; then exec 8>"$LOCK" && flock 8; fi
qemu-system-x86_64 -machine q35 -accel tcg,tb-size=256 -nodefaults -no-user-config \
  -display none -m "$mem" -smp 2 -kernel "$guest/vmlinuz" -initrd "$work/initrd.cpio.gz" \
  -append "console=ttyS0 quiet memtide.zram=$zram memtide.balloon=off memtide.disk=vda:mkfs memtide.then=poweroff memtide.run=\"sh /usr/local/lib/bench/run.sh\"" \
  -drive "file=$disk,format=raw,if=virtio" -device virtio-rng-pci -serial "file:$console" \
  -no-reboot &
qemu=$!
[[ -z ${LOCK:-} ]] || exec 8>&-
shown=0
while kill -0 "$qemu" 2>/dev/null; do
  if (($(date +%s) - start > timeout)); then
    kill "$qemu" 2>/dev/null || true
    echo "$PROG: the guest did not finish within $timeout s" >&2
    break
  fi
  # The benchmark's progress lines, as they come.
  lines=$(grep -c '^density' "$console" 2>/dev/null || true)
  if ((lines > shown)); then
    grep '^density' "$console" | tail -n +$((shown + 1)) >&2
    shown=$lines
  fi
  sleep 5
done
wait "$qemu" 2>/dev/null || true
qemu=""
grep '^density' "$console" | tail -n +$((shown + 1)) >&2 || true
echo "$PROG: the guest ran $(($(date +%s) - start)) s" >&2

mkdir -p "$out"
rm -rf "$out/raw"
debugfs -R "rdump /density $work" "$disk" >/dev/null 2>&1 || true
[[ -f $work/density/results.json ]] || { tail -n 40 "$console" >&2; die "the guest wrote no results"; }
mv "$work/density" "$out/raw"
cp "$console" "$out/raw/console.log"
"$memtide" bench density --config "$config" --merge "$out/raw" --out "$out"
