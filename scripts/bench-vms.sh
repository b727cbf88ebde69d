#!/usr/bin/env bash
# Measures memtide's QEMU world on this host (TCG), the three speed measures of the VM issue:
#
#   cpu      the daemon's own CPU with VMS (default 10) small VMs at a 1 s tick, as a share of
#            one core (utime + stime of its process from /proc/PID/stat over MEASURE seconds,
#            once every VM is running and booted), beside the QEMU processes' CPU, how long the
#            VMs took to launch and boot, and whether the host stayed in the high state (nothing
#            reclaimed) meanwhile. Target: < 1% of one core.
#   balloon  the virtio balloon's latency per STEP (256M): a 1 GiB guest launched here with
#            qemu-system-x86_64 (not by the daemon), its toucher holding 300M active (after 700M for
#            5 s, so that the memory it frees was resident in QEMU), inflated by
#            STEP and deflated back REPS (5) times over QMP (from `balloon` to query-balloon's
#            `actual` within 1 MiB); and the same STEP through a cgroup v1 memory limit (a
#            toucher of 300M active + 300M idle in a cgroup under our own memory cgroup, with a
#            1G zram host swap from scripts/zram-swap.sh): the limit written STEP lower until the
#            write returns and usage is under it, then raised back. Also how far the QEMU
#            process's RSS falls after an inflate, and when, and after the guest frees its 400M:
#            with free page reporting on (the command line of the issue) and, for contrast, off.
#   run4     a 4-VM daemon run: from starting the daemon to the 4 VMs running (status shows 4
#            tenants with allocated > 0) and booted (`memtide-guest: ready` on each console),
#            then from SIGTERM to the daemon and every QEMU gone.
#
# Usage: scripts/bench-vms.sh [PART...]   (root; default: cpu balloon run4)
# Knobs (environment): VMS (10), VM_MEMORY (192M, each VM's guest memory), VM_MAX (400M, each VM
# tenant's max: the limit of its cgroup, which holds QEMU's own memory as well, TCG's 64 MiB
# translation cache among it: with VM_MAX = VM_MEMORY the cgroup's OOM killer ends QEMU as the
# guest boots), MEASURE (60 s), SAMPLING (the sampling estimator's period, default 30s: ESX's and the daemon's), STEP (256M), REPS (5),
# PROFILE=1 (perf record the daemon during the cpu window and name its costliest functions),
# BUDGET (the host budget of the daemon runs, default 8G: far above what the VMs hold, so the
# host stays in the high state), MEMTIDE, TOUCHER (default /work/target-bench/release/...,
# else target/release/...), GUEST_DIR (/var/cache/memtide/guest), KEEP=DIR (keep the logs,
# consoles and JSON there).
# Prints a table and one summary line per measure; exits 2 with one line when something needed
# is missing. Everything it starts (daemons, QEMUs, touchers, cgroups, zram, temp dirs) is removed
# on exit, failure or not.
set -Eeuo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
prog=bench-vms
pick() { # the first executable of its arguments, or the first argument
  local p
  for p in "$@"; do [[ -x $p ]] && { echo "$p"; return; }; done
  echo "$1"
}
memtide=${MEMTIDE:-$(pick /work/target-bench/release/memtide "$here/target/release/memtide")}
toucher=${TOUCHER:-$(pick /work/target-bench/release/memtide-toucher "$here/target/release/memtide-toucher")}
guest_dir=${GUEST_DIR:-/var/cache/memtide/guest}
vms=${VMS:-10}
vm_memory=${VM_MEMORY:-192M}
vm_max=${VM_MAX:-400M}
measure=${MEASURE:-60}
step=${STEP:-256M}
reps=${REPS:-5}
budget=${BUDGET:-8G}
parts=("$@")
(( ${#parts[@]} )) || parts=(cpu balloon run4)

die() { echo "$prog: $*" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || die "needs root (VM cgroups, a zram swap)"
command -v qemu-system-x86_64 >/dev/null || die "needs qemu-system-x86_64 (Debian: qemu-system-x86)"
for tool in python3 jq; do command -v "$tool" >/dev/null || die "needs $tool"; done
[[ -f $guest_dir/vmlinuz && -f $guest_dir/initramfs.cpio.gz ]] ||
  die "no guest image in $guest_dir (run scripts/guest-image.sh)"
for bin in "$memtide" "$toucher"; do
  [[ -x $bin ]] || die "$bin missing (CARGO_TARGET_DIR=/work/target-bench cargo build --release -p memtide-cli -p memtide-toucher)"
done
for part in "${parts[@]}"; do
  case $part in cpu | balloon | run4) ;; *) die "unknown part '$part' (cpu, balloon, run4)" ;; esac
done
own=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
mount=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ {print $2; exit}' /proc/mounts)
[[ -n $own && -n $mount ]] || die "needs the cgroup v1 memory controller (the balloon part's limit)"

hz=$(getconf CLK_TCK)
work=$(mktemp -d /tmp/bench-vms.XXXXXX)
export MEMTIDE_ZRAM_STATE=$work/zram.dev
daemon=""
qemus=()      # QEMUs: ours, and the daemon's once found
cgroups=()    # cgroups we made, deepest last
zram=0
helper=""     # the python helper running now

# Pids of the QEMUs whose command line names DIR (a daemon's state dir, or our own VM's).
qemus_of() {
  local p cmd
  for p in /proc/[0-9]*; do
    [[ $(cat "$p/comm" 2>/dev/null) == qemu-system-* ]] || continue
    cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    [[ $cmd == *"$1"* ]] && echo "${p#/proc/}"
  done
  return 0
}
alive() { [[ -d /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
# Ends PID by SIGTERM, then SIGKILL after SECONDS.
end() {
  local pid=$1 wait=${2:-10} i
  alive "$pid" || return 0
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < wait * 10; i++)); do alive "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  local status=$? p d
  trap - EXIT INT TERM HUP ERR
  [[ -n $helper ]] && end "$helper" 5
  if [[ -n $daemon ]]; then
    mapfile -t -O "${#qemus[@]}" qemus < <(qemus_of "$work")
    end "$daemon" 30
    wait "$daemon" 2>/dev/null || true
  fi
  for p in "${qemus[@]}" $(qemus_of "$work"); do end "$p" 5; done
  wait 2>/dev/null || true
  # Each cgroup we made, after what the daemon left under it (its VMs' cgroups, normally
  # removed when it stops).
  for ((i = ${#cgroups[@]} - 1; i >= 0; i--)); do
    for d in "${cgroups[i]}"/*/ "${cgroups[i]}"; do
      [[ -d $d ]] || continue
      while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$d/cgroup.procs" 2>/dev/null || true
      for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$d" 2>/dev/null && break; sleep 0.2; done
      [[ -d $d ]] && echo "$prog: could not remove cgroup $d" >&2
    done
  done
  if ((zram)); then "$here/scripts/zram-swap.sh" down || echo "$prog: zram swap left, see $MEMTIDE_ZRAM_STATE" >&2; fi
  if [[ -n ${KEEP:-} ]]; then
    mkdir -p "$KEEP"
    cp -r "$work"/. "$KEEP"/ 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "$prog: interrupted" >&2; exit 130' INT TERM HUP
trap 'echo "$prog: failed (line $LINENO: $BASH_COMMAND)" >&2' ERR

now() { date +%s.%N; }
# Runs a command in the background and waits for it, so a signal reaches our trap at once.
bg() { "$@" & helper=$!; wait "$helper"; helper=""; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
sum_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(ticks "$p"))); done; echo "$t"; }
mib() { awk -v b="$1" 'BEGIN {printf "%.0f", b / 1048576}'; }

# The guest's kernel command line: quiet, no guest zram, the toucher given.
append() { echo "console=ttyS0 quiet memtide.zram=0 memtide.run=\"memtide-toucher $1\""; }

# start_daemon NAME COUNT MEMORY: a daemon launching COUNT VMs of MEMORY; sets $daemon,
# $address, $dstart (when it was started) and $ddir (its state dir).
start_daemon() {
  local name=$1 count=$2 memory=$3 i
  ddir=$work/$name
  mkdir -p "$ddir"
  # The VMs' cgroups go under a parent of ours (under our own memory cgroup), so their names
  # cannot meet anyone else's.
  local parent=${own%/}/bench-vms-$$-$name
  mkdir "$mount$parent"
  cgroups+=("$mount$parent")
  {
    printf '[daemon]\ntick = "1s"\nlisten = "127.0.0.1:0"\nstate_file = "%s/state.json"\n' "$ddir"
    printf '[host]\nparent = "%s"\nbudget = "%s"\n[policy]\nsampling_period = "%s"\n' "$parent" "$budget" "${SAMPLING:-30s}"
    for ((i = 1; i <= count; i++)); do
      printf '[[tenant]]\nname = "vm%d"\nmin = "64M"\nmax = "%s"\nestimator = "sampling"\n' "$i" "$vm_max"
      printf '[tenant.vm]\nmemory = "%s"\nkernel = "%s"\ninitrd = "%s"\nappend = %s\n' \
        "$memory" "$guest_dir/vmlinuz" "$guest_dir/initramfs.cpio.gz" \
        "'$(append "--active 32M --pause-ms 1000 --report-every-ms 600000")'"
    done
  } >"$ddir/memtide.toml"
  : >"$ddir/daemon.log"
  dstart=$(now)
  "$memtide" daemon --config "$ddir/memtide.toml" 2>"$ddir/daemon.log" &
  daemon=$!
  address=""
  for ((i = 0; i < 300; i++)); do
    address=$(sed -n 's/.*"event":"listening".*"address":"\([0-9.:]*\)".*/\1/p; s/.*listening.*address=\([0-9.:]*\).*/\1/p' \
      "$ddir/daemon.log" | head -1 || true)
    [[ -n $address ]] && break
    alive "$daemon" || { cat "$ddir/daemon.log" >&2; echo "$prog: the daemon exited" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n $address ]] || { cat "$ddir/daemon.log" >&2; echo "$prog: the daemon did not say where it listens" >&2; exit 1; }
}
status_json() { "$memtide" status --address "$address" --json; }
# Waits until COUNT tenants have allocated > 0 (sets $t_running) and COUNT consoles say ready
# (sets $t_ready), both seconds since $dstart; at most LIMIT seconds.
wait_vms() {
  local count=$1 limit=$2 n r
  t_running="" t_ready=""
  while :; do
    if [[ -z $t_running ]]; then
      n=$(status_json 2>/dev/null | jq '[.tenants[] | select(.allocated_bytes > 0)] | length' 2>/dev/null || echo 0)
      ((n >= count)) && t_running=$(since "$dstart")
    fi
    if [[ -z $t_ready ]]; then
      r=$(cat "$ddir"/vms/*.console 2>/dev/null | grep -c 'memtide-guest: ready' || true)
      ((r >= count)) && t_ready=$(since "$dstart")
    fi
    [[ -n $t_running && -n $t_ready ]] && return 0
    if awk -v s="$(since "$dstart")" -v l="$limit" 'BEGIN {exit !(s > l)}'; then
      local c
      for c in "$ddir"/vms/*.console; do
        grep -q 'memtide-guest: ready' "$c" ||
          echo "$prog: $(basename "$c" .console) not booted; its console ends: $(tail -c 300 "$c" | tr '\n' ' ')" >&2
      done
      { grep -h 'error\|warn' "$ddir/daemon.log" || true; } | tail -5 >&2
      echo "$prog: after ${limit} s: ${n:-0} of $count VMs running, ${r:-0} booted" >&2
      exit 1
    fi
    alive "$daemon" || { tail -20 "$ddir/daemon.log" >&2; echo "$prog: the daemon exited" >&2; exit 1; }
    if grep -q '"dropped"\| dropped ' "$ddir/daemon.log"; then
      grep '"dropped"\| dropped ' "$ddir/daemon.log" | head -3 >&2
      echo "$prog: a VM died while starting (its cgroup's OOM killer? VM_MAX must hold QEMU's own memory too)" >&2
      exit 1
    fi
    sleep 0.2
  done
}
# Stops the daemon; sets $t_exit (the daemon gone) and $t_gone (its QEMUs too), seconds after SIGTERM.
stop_daemon() {
  local pids stop p
  mapfile -t pids < <(qemus_of "$ddir")
  qemus+=("${pids[@]}")
  stop=$(now)
  kill "$daemon"
  wait "$daemon" || echo "$prog: the daemon exited with status $?" >&2
  t_exit=$(since "$stop")
  while :; do
    local left=0
    for p in "${pids[@]}"; do alive "$p" && left=1; done
    ((left)) || break
    awk -v s="$(since "$stop")" 'BEGIN {exit !(s > 60)}' && { echo "$prog: QEMUs left 60 s after SIGTERM" >&2; exit 1; }
    sleep 0.05
  done
  t_gone=$(since "$stop")
  daemon=""
}

rows=()      # the table: measure | figure | target
summaries=() # one line per measure

part_cpu() {
  echo "== cpu: $vms VMs of $vm_memory at a 1 s tick, $measure s" >&2
  start_daemon cpu "$vms" "$vm_memory"
  wait_vms "$vms" 600
  echo "   $vms running after $t_running s, booted after $t_ready s" >&2
  local q before_d before_q from_s before after d_ticks q_ticks rss
  mapfile -t q < <(qemus_of "$ddir")
  ((${#q[@]} == vms)) || { echo "$prog: found ${#q[@]} QEMUs, not $vms" >&2; exit 1; }
  qemus+=("${q[@]}")
  sleep 5 # the last guest's toucher has written its pages
  before=$(status_json)
  local before_u before_s d_user d_sys
  read -r before_u before_s < <(awk '{print $14, $15}' "/proc/$daemon/stat")
  before_d=$(ticks "$daemon") before_q=$(sum_ticks "${q[@]}") from_s=$(now)
  if [[ ${PROFILE:-0} == 1 ]] && command -v perf >/dev/null; then
    bg perf record -q -F 499 -g -p "$daemon" -o "$work/perf.data" -- sleep "$measure" >/dev/null 2>&1
  else
    bg sleep "$measure"
  fi
  d_ticks=$(($(ticks "$daemon") - before_d)) q_ticks=$(($(sum_ticks "${q[@]}") - before_q))
  read -r d_user d_sys < <(awk -v u="$before_u" -v s="$before_s" '{print $14 - u, $15 - s}' "/proc/$daemon/stat")
  local secs
  secs=$(since "$from_s")
  after=$(status_json)
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$daemon/status")
  echo "$before" >"$ddir/status-before.json"
  echo "$after" >"$ddir/status-after.json"
  local states balloons
  states=$(jq -rn --argjson a "$before" --argjson b "$after" \
    '[$b.counters.state_ticks | to_entries[] | select(.value - $a.counters.state_ticks[.key] > 0)
      | "\(.key) \(.value - $a.counters.state_ticks[.key])"] | join(", ")')
  balloons=$(jq -r '[.tenants[] | .vm.balloon_bytes // 0] | add / 1048576 | floor' <<<"$after")
  local limits
  limits=$(jq -rn --argjson a "$before" --argjson b "$after" \
    '($b.counters.limit_raised - $a.counters.limit_raised) + ($b.counters.limit_lowered - $a.counters.limit_lowered)')
  local held
  held=$(jq -r '[.tenants[].allocated_bytes] | add / 1048576 | floor' <<<"$after")
  read -r dpct dms qpct upct spct < <(awk -v d="$d_ticks" -v q="$q_ticks" -v hz="$hz" -v s="$secs" \
    -v u="$d_user" -v k="$d_sys" 'BEGIN {printf "%.3f %.2f %.1f %.2f %.2f\n", d / hz / s * 100,
      d / hz * 1000 / s, q / hz / s * 100, u / hz / s * 100, k / hz / s * 100}')
  rows+=("daemon CPU, $vms VMs, 1 s tick|$dpct% of a core ($dms ms/s)|< 1%")
  rows+=("QEMUs' CPU, $vms VMs (context)|$qpct% of a core|")
  rows+=("launch / boot of $vms VMs|running $t_running s, booted $t_ready s|")
  summaries+=("cpu: the daemon used $dpct% of one core over $secs s with $vms VMs (user $upct%, system $spct%; $dms ms of CPU a tick, RSS $((rss / 1024)) MiB); the QEMUs $qpct%; host state ticks: $states; VMs held $held MiB, balloons $balloons MiB at the end, $limits limit writes")
  stop_daemon
  if [[ -f $work/perf.data ]]; then
    # The daemon's own functions that took the most of its CPU, callees included.
    local profile
    profile=$(perf report -i "$work/perf.data" --children --stdio -g none --sort sym 2>/dev/null |
      awk '$4 ~ /memtide_/ && $4 !~ /serve|main|run$|tick|lang_start/ && n++ < 6 {printf "%s%s %s", sep, $1, $4; sep = ", "}')
    summaries+=("profile (perf, callees included): $profile")
  fi
}

part_balloon() {
  echo "== balloon: 1 GiB guest, toucher 300M active, $step x $reps" >&2
  local kernel=$guest_dir/vmlinuz initrd=$guest_dir/initramfs.cpio.gz fpr vm pid
  for fpr in on off; do
    vm=$work/vm-fpr-$fpr
    mkdir -p "$vm"
    # The toucher first holds 700M for 5 s, so the memory it then frees is resident in QEMU:
    # free page reporting gives it back, or (off) it stays for the balloon to take.
    qemu-system-x86_64 -machine q35 -accel tcg,tb-size=64 -nodefaults -no-user-config -display none \
      -m 1024M -smp 1 -kernel "$kernel" -initrd "$initrd" \
      -append "$(append "--phase '5s:active=700M' --phase 1s:active=300M --report-every-ms 1000")" \
      -device "virtio-balloon-pci,id=balloon0,free-page-reporting=$fpr,deflate-on-oom=on" \
      -device virtio-rng-pci -qmp "unix:$vm/qmp,server=on,wait=off" -serial "file:$vm/console" \
      </dev/null >"$vm/qemu.log" 2>&1 &
    pid=$!
    qemus+=("$pid")
    local start
    start=$(now)
    until grep -q 'memtide-guest: ready' "$vm/console" 2>/dev/null; do
      alive "$pid" || { cat "$vm/qemu.log" >&2; echo "$prog: QEMU exited" >&2; exit 1; }
      awk -v s="$(since "$start")" 'BEGIN {exit !(s > 120)}' && { echo "$prog: the guest did not boot in 120 s" >&2; exit 1; }
      sleep 0.1
    done
    echo "   free page reporting $fpr: booted in $(since "$start") s" >&2
    bg python3 "$here/scripts/bench-vms.py" balloon --qmp "$vm/qmp" --pid "$pid" --console "$vm/console" \
      --step "$step" --reps "$reps" >"$vm/result.json"
    if grep -q 'Out of memory\|workload exited' "$vm/console"; then
      echo "$prog: the guest's workload was killed or ended:" >&2
      grep 'Out of memory\|workload exited' "$vm/console" >&2
      exit 1
    fi
    end "$pid" 10
  done

  echo "== limit: cgroup v1, toucher 300M active + 300M idle, $step x $reps, zram host swap" >&2
  "$here/scripts/zram-swap.sh" up 1G >/dev/null
  zram=1
  local cg=$mount${own%/}/bench-vms-$$
  mkdir "$cg"
  cgroups+=("$cg")
  bg python3 "$here/scripts/bench-vms.py" limit --cgroup "$cg" --toucher "$toucher" \
    --step "$step" --reps "$reps" >"$work/limit.json"
  rmdir "$cg"
  "$here/scripts/zram-swap.sh" down
  zram=0
helper=""     # the python helper running now

  local on=$work/vm-fpr-on/result.json off=$work/vm-fpr-off/result.json lim=$work/limit.json
  fmt() { jq -r --arg k "$2" '.[$k] | "\(.median * 1000 | round / 1000) s (\(.min * 1000 | round / 1000)-\(.max * 1000 | round / 1000))"' "$1"; }
  fmt_ms() { jq -r --arg k "$2" '.[$k] | "\(.median * 1e6 | round / 1000) ms (\(.min * 1e6 | round / 1000)-\(.max * 1e6 | round / 1000))"' "$1"; }
  rows+=("balloon inflate $step (median, range)|$(fmt "$on" inflate_s)|beside the limit's")
  rows+=("balloon deflate $step|$(fmt "$on" deflate_s)|beside the limit's")
  rows+=("balloon inflate / deflate, reporting off|$(fmt "$off" inflate_s) / $(fmt "$off" deflate_s)|")
  rows+=("cgroup limit $step lower (zram swap)|$(fmt "$lim" lower_s)|")
  rows+=("cgroup limit raised back|$(fmt_ms "$lim" raise_s)|")
  local rss_on rss_off fpr_fall
  rss_on=$(jq -r '"\(.rss_fall_bytes.all | map(. / 1048576 | round) | join(", ")) MiB"' "$on")
  rss_off=$(jq -r '"\(.rss_fall_bytes.all | map(. / 1048576 | round) | join(", ")) MiB (the first in \(.rss_fall_s.all[0] * 100 | round / 100) s)"' "$off")
  fpr_fall=$(jq -r '.reported | "\(.fall_bytes / 1048576 | round) MiB in \(.fall_s * 10 | round / 10) s"' "$on")
  rows+=("QEMU RSS: reporting alone, guest freed 400M|$fpr_fall|")
  rows+=("QEMU RSS fall at each inflate, reporting on|$rss_on|")
  rows+=("QEMU RSS fall at each inflate, reporting off|$rss_off|")
  summaries+=("balloon: inflating $step took $(fmt "$on" inflate_s), deflating $(fmt "$on" deflate_s) (free page reporting on; off: $(fmt "$off" inflate_s) / $(fmt "$off" deflate_s)); the cgroup limit $(fmt "$lim" lower_s) down over zram swap, $(fmt_ms "$lim" raise_s) back up")
  summaries+=("rss: with free page reporting the 400M the guest freed left QEMU by itself ($fpr_fall), and the inflates then freed $rss_on; without reporting ($(jq -r '.reported.fall_bytes / 1048576 | round' "$off") MiB left by itself) they freed $rss_off")
}

part_run4() {
  echo "== run4: 4 VMs of $vm_memory, daemon start to booted, SIGTERM to gone" >&2
  start_daemon run4 4 "$vm_memory"
  wait_vms 4 300
  sleep 2
  stop_daemon
  rows+=("4 VMs: start to running / booted|$t_running s / $t_ready s|")
  rows+=("4 VMs: SIGTERM to daemon / QEMUs gone|$t_exit s / $t_gone s|")
  summaries+=("run4: 4 VMs running $t_running s and booted $t_ready s after the daemon started; after SIGTERM the daemon exited in $t_exit s and the QEMUs were gone in $t_gone s")
}

echo "$prog: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(qemu-system-x86_64 --version | head -1)" >&2
for part in "${parts[@]}"; do "part_$part"; done

printf '\n%-46s | %-56s | %s\n' measure "this run" target
printf '%s\n' "-----------------------------------------------+----------------------------------------------------------+-------------------"
for row in "${rows[@]}"; do
  IFS='|' read -r a b c <<<"$row"
  printf '%-46s | %-56s | %s\n' "$a" "$b" "$c"
done
echo
printf '%s\n' "${summaries[@]}"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
