#!/usr/bin/env bash
# Measures the daemon on this host: CPU per tick and memory footprint while it manages N real
# tenants (cgroups under our own memory cgroup, each holding one small process), at a 1 s tick,
# and how much it acted meanwhile (limit writes, from the API's /v1/status counters).
# Usage: scripts/bench-daemon.sh [TENANTS] [SECONDS]   (root; cgroup v1 or v2 memory controller)
#
# By default the daemon acts: `reclaim = "always"` with the TWS estimator, a floor margin of
# 1M and a min of 1M, so the probe keeps moving every tenant's limit through its page cache
# (each toucher re-reads FILE_SIZE of its own file every pass) and limits are written every tick.
# DRY_RUN=1 measures observing and deciding alone (no limit writes, so no kernel reclaim work done
# in the daemon's context; the would-be writes are counted as `dry_run` decisions).
# CYCLE=S makes each toucher's file set alternate between FILE_SIZE and FILE_HI every S to S+4
# seconds (spread across tenants), so limits keep moving by MiBs: up when the set grows
# (refaults), down by the probe's steps after it shrinks.
# Knobs (environment): RECLAIM (always | when_short), ESTIMATOR (tws | sampling), BUDGET (a size;
# default TENANTS x 64M), ACTIVE (default 4M), FILE_SIZE (default 4M), FILE_HI (default 16M),
# MEMTIDE, TOUCHER; KEEP_LOG=FILE keeps the daemon's log there.
set -euo pipefail

tenants=${1:-100}
seconds=${2:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
memtide=${MEMTIDE:-$here/target/release/memtide}
toucher=${TOUCHER:-$here/target/release/memtide-toucher}
reclaim=${RECLAIM:-always}
estimator=${ESTIMATOR:-tws}
budget=${BUDGET:-$((tenants * 64))M}
active=${ACTIVE:-4M}
file_size=${FILE_SIZE:-4M}
file_hi=${FILE_HI:-16M}
cycle=${CYCLE:-0}

if [[ $(id -u) -ne 0 ]]; then echo "bench-daemon: needs root" >&2; exit 2; fi
for bin in "$memtide" "$toucher"; do
  [[ -x $bin ]] || { echo "bench-daemon: $bin missing (cargo build --release --workspace)" >&2; exit 2; }
done
for tool in curl jq; do
  command -v "$tool" >/dev/null || { echo "bench-daemon: needs $tool" >&2; exit 2; }
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
  [[ -n ${KEEP_LOG:-} && -f $work/daemon.log ]] && cp "$work/daemon.log" "$KEEP_LOG"
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
  printf '[host]\nparent = "%s"\nbudget = "%s"\n' "$parent" "$budget"
  printf '[policy]\nreclaim = "%s"\n' "$reclaim"
  printf '[rails]\nfloor_margin = "1M"\n'
} > "$work/memtide.toml"
for i in $(seq 1 "$tenants"); do
  mkdir "$dir/t$i"
  phases=()
  if (( cycle > 0 )); then
    # Spread out: tenant i alternates every CYCLE + (i mod 5) seconds, after a first wait of
    # (i mod that) + 1 s, for the whole run.
    period=$(( cycle + i % 5 ))
    phases+=(--phase "$(( i % period + 1 ))s:file=$file_size")
    for (( k = 0; k < (seconds + 20) / period + 1; k++ )); do
      (( k % 2 == 0 )) && size=$file_hi || size=$file_size
      phases+=(--phase "${period}s:file=$size")
    done
  fi
  # Each toucher joins its cgroup before it starts, so its memory is charged there.
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$dir/t$i" \
    "$toucher" --active "$active" --file "$work/file$i" --file-size "$file_size" \
    --pause-ms 1000 --report-every-ms 60000 "${phases[@]}" >/dev/null 2>&1 &
  pids+=($!)
  printf '[[tenant]]\nname = "t%d"\ncgroup = "%s/t%d"\nmin = "1M"\nmax = "64M"\nestimator = "%s"\n' \
    "$i" "$parent" "$i" "$estimator" >> "$work/memtide.toml"
done
sleep 1

"$memtide" daemon --config "$work/memtide.toml" 2>"$work/daemon.log" &
daemon=$!
sleep 3
address=$(sed -n 's/.*listening.*address=\([0-9.:]*\).*/\1/p; s/.*"event":"listening".*"address":"\([0-9.:]*\)".*/\1/p' \
  "$work/daemon.log" | head -1)
[[ -n $address ]] || { echo "bench-daemon: the daemon did not say where it listens" >&2; cat "$work/daemon.log" >&2; exit 1; }
counters() { curl -sf "http://$address/v1/status" | jq -c '.counters | {ticks, limit_raised, limit_lowered, dry_run, held, write_failures}'; }
ticks() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }
before=$(counters)
start=$(ticks)
from=$(date -u +%Y-%m-%dT%H:%M:%S)
sleep "$seconds"
end=$(ticks)
to=$(date -u +%Y-%m-%dT%H:%M:%S)
after=$(counters)
hz=$(getconf CLK_TCK)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$daemon/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
cpu_ms=$(( (end - start) * 1000 / hz ))
awk -v t="$tenants" -v s="$seconds" -v ms="$cpu_ms" -v rss="$rss" -v hwm="$hwm" 'BEGIN {
  printf "tenants %d, %d s at a 1 s tick: CPU %d ms = %.2f ms per tick = %.3f%% of one core; RSS %.1f MiB (peak %.1f MiB)\n",
    t, s, ms, ms / s, ms / s / 10, rss / 1024, hwm / 1024 }'
jq -rn --argjson a "$before" --argjson b "$after" '
  ($b.ticks - $a.ticks) as $ticks
  | ($b.limit_raised - $a.limit_raised) as $up | ($b.limit_lowered - $a.limit_lowered) as $down
  | "in those \($ticks) ticks: limit writes \($up + $down) (raised \($up), lowered \($down)) = \(if $ticks > 0 then ((($up + $down) / $ticks * 10 | round) / 10) else 0 end) per tick; dry-run decisions \($b.dry_run - $a.dry_run); holds \($b.held - $a.held); failed writes \($b.write_failures - $a.write_failures)"'
# Seconds of the window in which the log shows a limit written (or decided, in a dry run).
awk -v from="$from" -v to="$to" '$3 == "limit" || $3 == "rescued" {
    s = substr($1, 1, 19); if (s >= from && s < to) seen[s] = 1 }
  END { n = 0; for (s in seen) n++; printf "seconds with a limit write: %d of %d\n", n, '"$seconds"' }' "$work/daemon.log"
