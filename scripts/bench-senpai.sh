#!/usr/bin/env bash
# bench-senpai.sh: Senpai (Meta's TMO agent) and memtide side by side on real cgroup v2, in the
# tiny QEMU guest (this host's memory controller is v1 only); issue 29 item 4.
#
#   bench-senpai.sh SENPAI_PY [MANAGER...]      (as root)
#
# SENPAI_PY is Senpai's senpai.py (github.com/facebookincubator/senpai, one stdlib-only Python
# file; CI cannot fetch it, so this is a benchmark, not a test). MANAGERs, in the order run
# (default all four): none (no manager), senpai (Senpai as published: its defaults, one process
# per tenant cgroup), tws and sampling (memtide's daemon with that estimator).
#
# Each manager gets a guest of its own (scripts/guest-image.sh's kernel and initramfs, 1536 MiB,
# 2 vCPUs, TCG, a 1 GiB zram swap), booted with a second initramfs archive holding memtide,
# memtide-toucher, redis-server/-cli/-benchmark, this host's /usr/bin/python3.11 (Debian 12's,
# as the guest's libraries are this host's) with its standard library's top-level modules,
# every shared library ldd names,
# senpai.py and the guest's workload (written below). The same workloads run in every guest, at
# once, each tenant a cgroup under /sys/fs/cgroup/bench:
#   busy    memtide-toucher --active 200M --pause-ms 100 (incompressible pages), reporting each
#           second: passes (throughput) and each pass's time (latency)
#   idle    memtide-toucher --active 8M --idle 200M
#   redis   redis-server 7 filled with 40,000 values of 4,000 random hex bytes (~170 MiB); idle
#           for the first IDLE seconds of the run, then served random GETs over every key by
#           redis-benchmark (4 clients, 3,000 requests a window) until the end
# Once they hold their memory the manager starts (t = 0) and every tenant is sampled each
# second for RUN seconds: memory.current, memory.high, swap, memory.stat (anon, file,
# workingset_refault_anon/file, pgmajfault), memory.pressure, and the manager's utime+stime
# from /proc/PID/stat (all its processes). memtide runs with `reclaim = "always"` (its setting
# for sizing tenants proactively, as Senpai does, rather than only when the budget runs short),
# `cap_at_estimate = true`, min 100M (Senpai's default --min-size), max 400M (admission control
# wants each max - min backed by RAM beyond the budget plus swap), budget 1G (more than the
# tenants hold, so the budget never forces anything), every other setting its default. Senpai
# runs unbuffered (PYTHONUNBUFFERED=1) so its log survives its SIGTERM; nothing else differs.
# scripts/bench-senpai.py turns the consoles into one table per workload.
#
# Environment: RUN (seconds, default 210), IDLE (redis's idle phase, default 90), LOCK (a file
# to hold with flock around each QEMU run, for a host shared with other guests), KEEP=DIR (keep
# the consoles there), MEMTIDE, TOUCHER (default target/release's), MEMTIDE_GUEST_DIR (the
# guest image, default /var/cache/memtide/guest).
# Temporary files live in one mktemp directory, removed at exit; a QEMU still running at exit
# is killed. Needs qemu-system-x86_64, cpio, gzip, strip, ldd, python3 and redis-server.
set -euo pipefail

readonly PROG=bench-senpai.sh
die() { echo "$PROG: $*" >&2; exit 1; }
[[ $# -ge 1 ]] || { echo "usage: $PROG SENPAI_PY [none|senpai|tws|sampling]..." >&2; exit 2; }
senpai=$1
shift
managers=("$@")
[[ ${#managers[@]} -gt 0 ]] || managers=(none senpai tws sampling)
for m in "${managers[@]}"; do
  case $m in none | senpai | tws | sampling) ;; *) die "unknown manager $m" ;; esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/guest-overlay.sh
. "$here/scripts/guest-overlay.sh"
memtide=${MEMTIDE:-$here/target/release/memtide}
toucher=${TOUCHER:-$here/target/release/memtide-toucher}
guest=${MEMTIDE_GUEST_DIR:-/var/cache/memtide/guest}
run=${RUN:-210}
idle=${IDLE:-90}
python=/usr/bin/python3.11

[[ $EUID -eq 0 ]] || die "needs root"
[[ -f $senpai ]] || die "no senpai.py at $senpai"
for f in "$memtide" "$toucher" "$python" /usr/bin/redis-server /usr/bin/redis-cli \
  /usr/bin/redis-benchmark "$guest/vmlinuz" "$guest/initramfs.cpio.gz"; do
  [[ -e $f ]] || die "$f is missing"
done
for tool in qemu-system-x86_64 cpio gzip strip ldd python3 flock; do
  command -v "$tool" >/dev/null || die "$tool is missing"
done

work=$(mktemp -d /tmp/bench-senpai.XXXXXX)
qemu=""
cleanup() {
  if [[ -n $qemu ]]; then kill "$qemu" 2>/dev/null || true; wait "$qemu" 2>/dev/null || true; fi
  if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$work"/*.console "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The second initramfs archive.
root=$work/overlay
mkdir -p "$root/usr/local/bin" "$root/usr/local/lib/bench" "$root/usr/bin"
install -m 0755 "$memtide" "$root/usr/local/bin/memtide"
install -m 0755 "$toucher" "$root/usr/local/bin/memtide-toucher"
strip --strip-debug "$root/usr/local/bin/memtide" "$root/usr/local/bin/memtide-toucher"
for b in redis-server redis-cli redis-benchmark; do install -m 0755 "/usr/bin/$b" "$root/usr/bin/$b"; done
install -m 0644 "$senpai" "$root/usr/local/lib/bench/senpai.py"
overlay_python "$root"
overlay_libs "$root" "$memtide" "$toucher" /usr/bin/redis-server /usr/bin/redis-cli \
  /usr/bin/redis-benchmark

cat >"$root/usr/local/lib/bench/run.sh" <<'GUEST'
# bench-senpai guest workload (scripts/bench-senpai.sh): sh run.sh MANAGER RUN IDLE
# Starts the three tenants, then MANAGER, samples for RUN seconds and prints `bench: ` lines.
M=$1
RUN=$2
IDLE=$3
export PATH=/usr/local/bin:/usr/bin:/bin:/sbin:/usr/sbin
say() { echo "bench: $*"; }
CG=/sys/fs/cgroup/bench
B=/tmp/bench
ip link set lo up || say "error what=loopback"
mount -t cgroup2 none /sys/fs/cgroup || say "error what=mount-cgroup2"
echo +memory >/sys/fs/cgroup/cgroup.subtree_control || say "error what=root-subtree"
mkdir -p $CG $B /run/memtide /etc/memtide
echo +memory >$CG/cgroup.subtree_control || say "error what=bench-subtree"
up() { cut -d' ' -f1 /proc/uptime; }
rel() { awk -v a="$(up)" -v b="$T0" 'BEGIN { printf "%.2f", a - b }'; }
# NAME COMMAND...: COMMAND in the cgroup NAME (joined before it starts), in the background.
join() {
    n=$1
    shift
    mkdir -p $CG/$n
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG/$n" "$@" &
}
# SECONDS COMMAND...: runs COMMAND every 0.5 s until it succeeds; 1 after SECONDS.
wait_until() {
    end=$(($(cut -d. -f1 /proc/uptime) + $1))
    shift
    until "$@"; do
        [ "$(cut -d. -f1 /proc/uptime)" -ge $end ] && return 1
        sleep 0.5
    done
}
filled() { [ "$(cat $CG/$1/memory.current)" -ge "$2" ]; }
sample() {
    t=$(rel)
    for n in busy idle redis; do
        d=$CG/$n
        say "sample t=$t tenant=$n current=$(cat $d/memory.current) high=$(cat $d/memory.high)" \
            "swap=$(cat $d/memory.swap.current)$(awk '$1 == "anon" || $1 == "file" ||
                $1 ~ /^workingset_refault_(anon|file)$/ || $1 == "pgmajfault" {
                printf " %s=%s", $1, $2 }' $d/memory.stat)$(awk '{ split($2, a, "=");
                split($5, b, "="); printf " %s_avg10=%s %s_total=%s", $1, a[2], $1, b[2] }' \
                $d/memory.pressure)"
    done
    ticks=0
    for p in $MPIDS; do
        [ -r /proc/$p/stat ] && ticks=$((ticks + $(awk '{ print $14 + $15 }' /proc/$p/stat)))
    done
    say "cpu t=$t ticks=$ticks hz=100"
}

say "start manager=$M run=$RUN idle=$IDLE kernel=$(uname -r)"
join busy memtide-toucher --active 200M --pause-ms 100 --report-every-ms 1000 >$B/busy.json 2>&1
join idle memtide-toucher --active 8M --idle 200M --report-every-ms 60000 >/dev/null 2>&1
join redis redis-server --port 6379 --bind 127.0.0.1 --save "" --appendonly no \
    --protected-mode no >$B/redis.log 2>&1
wait_until 60 redis-cli ping >/dev/null 2>&1 || say "error what=redis-start"
python3 -c '
import os, sys
w = sys.stdout.buffer.write
for i in range(40000):
    k = b"key:%012d" % i
    v = os.urandom(2000).hex().encode()
    w(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
' | redis-cli --pipe >$B/fill.log 2>&1 || say "error what=redis-fill"
say "filled redis keys=$(redis-cli dbsize) $(tail -n 1 $B/fill.log | tr ' ' _)"
wait_until 120 filled busy $((198 << 20)) || say "error what=fill tenant=busy"
wait_until 120 filled idle $((206 << 20)) || say "error what=fill tenant=idle"
sleep 5

T0=$(up)
MPIDS=""
case $M in
senpai)
    for n in busy idle redis; do
        PYTHONUNBUFFERED=1 python3 /usr/local/lib/bench/senpai.py $CG/$n >$B/senpai-$n.log 2>&1 &
        MPIDS="$MPIDS $!"
    done
    ;;
tws | sampling)
    {
        printf '[daemon]\nlisten = "127.0.0.1:9464"\nstate_file = "/run/memtide/state.json"\n\n'
        printf '[host]\nparent = "/bench"\nbudget = "1G"\n\n[policy]\nreclaim = "always"\n'
        for n in busy idle redis; do
            printf '\n[[tenant]]\nname = "%s"\ncgroup = "/bench/%s"\nmin = "100M"\nmax = "400M"\n' $n $n
            printf 'estimator = "%s"\ncap_at_estimate = true\n' $M
        done
    } >/etc/memtide/bench.toml
    memtide daemon --config /etc/memtide/bench.toml >/dev/null 2>$B/memtide.log &
    MPIDS=$!
    ;;
esac
say "manager-started t=$(rel) pids=$(echo $MPIDS | tr ' ' ,)"

redis_load() {
    while [ ! -e $B/stop ]; do
        s=$(rel)
        csv=$(redis-benchmark -h 127.0.0.1 -p 6379 -t get -r 40000 -n 3000 -c 4 --csv 2>/dev/null |
            tail -n 1)
        say "redis from=$s to=$(rel) csv=$csv"
    done
}
LOAD=""
while :; do
    sample
    now=$(rel)
    if [ -z "$LOAD" ] && awk -v a="$now" -v b="$IDLE" 'BEGIN { exit !(a >= b) }'; then
        redis_load &
        LOAD=$!
        say "busy-phase t=$now"
    fi
    awk -v a="$now" -v b="$RUN" 'BEGIN { exit !(a >= b) }' && break
    sleep 1
done
touch $B/stop
wait $LOAD
say "redis-stats $(redis-cli info stats | tr -d '\r' | grep -E '^keyspace_(hits|misses):' | tr '\n' ' ')"
for p in $MPIDS; do kill -TERM $p; done
for p in $MPIDS; do wait $p; done
say "toucher-clock t=$(rel) t_s=$(tail -n 1 $B/busy.json | sed 's/.*"t_s":\([0-9.]*\).*/\1/')"
sed 's/^/bench: toucher tenant=busy json=/' $B/busy.json
[ -f $B/memtide.log ] && sed 's/^/bench: log /' $B/memtide.log
for n in busy idle redis; do
    [ -f $B/senpai-$n.log ] && sed "s/^/bench: senpai tenant=$n /" $B/senpai-$n.log
done
say "oom busy=$(awk '$1 == "oom_kill" { print $2 }' $CG/busy/memory.events)" \
    "idle=$(awk '$1 == "oom_kill" { print $2 }' $CG/idle/memory.events)" \
    "redis=$(awk '$1 == "oom_kill" { print $2 }' $CG/redis/memory.events)"
say done
GUEST

overlay_pack "$root" "$guest/initramfs.cpio.gz" "$work/initrd.cpio.gz"
rm -rf "$root"

for m in "${managers[@]}"; do
  console=$work/$m.console
  echo "$PROG: $m: booting (RUN=$run s, IDLE=$idle s; host load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  start=$(date +%s)
  cmd=(qemu-system-x86_64 -machine q35 -accel tcg,tb-size=64 -nodefaults -no-user-config
    -display none -m 1536M -smp 2 -kernel "$guest/vmlinuz" -initrd "$work/initrd.cpio.gz"
    -append "console=ttyS0 quiet memtide.zram=1G memtide.balloon=off memtide.then=poweroff memtide.run=\"sh /usr/local/lib/bench/run.sh $m $run $idle\""
    -device virtio-rng-pci -serial "file:$console" -no-reboot)
  # The lock is taken here and held by QEMU's inherited descriptor until it exits.
  if [[ -n ${LOCK:-} ]]; then exec 8>"$LOCK" && flock 8; fi
  "${cmd[@]}" &
  [[ -z ${LOCK:-} ]] || exec 8>&-
  qemu=$!
  limit=$((run + 420))
  while kill -0 "$qemu" 2>/dev/null; do
    if (($(date +%s) - start > limit)); then
      kill "$qemu" 2>/dev/null || true
      echo "$PROG: $m: the guest did not finish within $limit s" >&2
      break
    fi
    sleep 2
  done
  wait "$qemu" 2>/dev/null || true
  qemu=""
  grep -q '^bench: done' "$console" || { tail -n 40 "$console" >&2; die "$m: the guest's workload did not finish"; }
  echo "$PROG: $m: done in $(($(date +%s) - start)) s (host load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

consoles=()
for m in "${managers[@]}"; do consoles+=("$work/$m.console"); done
python3 "$here/scripts/bench-senpai.py" --idle "$idle" "${consoles[@]}"
