#!/usr/bin/env bash
# Measures the daemon on this host: CPU per tick and memory footprint while it manages N real
# tenants (cgroups under our own memory cgroup, each holding one small process), at a 1 s tick.
# Usage: scripts/bench-daemon.sh [TENANTS] [SECONDS]   (root; cgroup v1 or v2 memory controller)
# DRY_RUN=1 measures observing and deciding alone (no limit writes, so no kernel reclaim work
# done in the daemon's context).
set -euo pipefail

tenants=${1:-100}
seconds=${2:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
memtide=${MEMTIDE:-$here/target/release/memtide}
toucher=${TOUCHER:-$here/target/release/memtide-toucher}

if [[ $(id -u) -ne 0 ]]; then echo "bench-daemon: needs root" >&2; exit 2; fi
for bin in "$memtide" "$toucher"; do
  [[ -x $bin ]] || { echo "bench-daemon: $bin missing (cargo build --release --workspace)" >&2; exit 2; }
done

own=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
if [[ -n $own ]]; then
  mount=$(awk '$3 == "cgroup" && $4 ~ /memory/ {print $2; exit}' /proc/mounts)
else
  own=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
  mount=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
fi
parent="${own%/}/memtide-bench-$$"
dir="$mount$parent"
work=$(mktemp -d)
pids=()

cleanup() {
  [[ -n ${daemon:-} ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for d in "$dir"/t*; do [[ -d $d ]] && rmdir "$d" 2>/dev/null || true; done
  rmdir "$dir" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir "$dir"
{
  printf '[daemon]\ntick = "1s"\nlisten = "127.0.0.1:0"\nstate_file = "%s/state.json"\n' "$work"
  [[ ${DRY_RUN:-0} == 1 ]] && printf 'dry_run = true\n'
  printf '[host]\nparent = "%s"\nbudget = "%dM"\n' "$parent" $((tenants * 64))
} > "$work/memtide.toml"
for i in $(seq 1 "$tenants"); do
  mkdir "$dir/t$i"
  "$toucher" --active 4M --pause-ms 1000 --report-every-ms 60000 >/dev/null 2>&1 &
  pids+=($!)
  echo $! > "$dir/t$i/cgroup.procs"
  printf '[[tenant]]\nname = "t%d"\ncgroup = "%s/t%d"\nmin = "8M"\nmax = "64M"\n' "$i" "$parent" "$i" >> "$work/memtide.toml"
done

"$memtide" daemon --config "$work/memtide.toml" 2>"$work/daemon.log" &
daemon=$!
sleep 3
ticks() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }
start=$(ticks)
sleep "$seconds"
end=$(ticks)
hz=$(getconf CLK_TCK)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$daemon/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
cpu_ms=$(( (end - start) * 1000 / hz ))
awk -v t="$tenants" -v s="$seconds" -v ms="$cpu_ms" -v rss="$rss" -v hwm="$hwm" 'BEGIN {
  printf "tenants %d, %d s at a 1 s tick: CPU %d ms = %.2f ms per tick = %.3f%% of one core; RSS %.1f MiB (peak %.1f MiB)\n",
    t, s, ms, ms / s, ms / s / 10, rss / 1024, hwm / 1024 }'
grep -c '"limit"\| limit ' "$work/daemon.log" | awk '{print "limit log lines:", $1}'
