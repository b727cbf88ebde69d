# alb-common.sh: what scripts/alb-mariadb.sh and scripts/alb-redis.sh share, sourced by both:
# the checks (root, memtide's binaries, no swap yet), the temporary directory, the cleanup at
# exit (the script's servers through its kill_servers, the daemon, the cgroups, the zram device),
# the memory hierarchy (v1 or v2) with cgroups under this shell's own, the squeeze of a cgroup's
# limit onto swap, and figures in MiB.
#
# The sourcing script sets ALB (its name, for messages) and defines kill_servers before sourcing;
# DAEMON_PID, CGROUPS and ZRAM_STATE are the cleanup's to read.
ZRAM=${ZRAM:-2G}
REPO=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${TARGET_DIR:-$REPO/target/release}
MIB=$((1 << 20))
# memtide-adapter runs in the tenant's cgroup in (c): its budget is B plus this much for it.
ADAPTER=$((16 * MIB))

die() { echo "$ALB: $*" >&2; exit 1; }
[[ $EUID -eq 0 ]] || die "must run as root (cgroups, zram)"
for bin in memtide memtide-adapter; do
    [[ -x $TARGET_DIR/$bin ]] || die "$TARGET_DIR/$bin is missing: cargo build --release -p memtide-cli -p memtide-adapter"
done
if awk 'NR > 1 { found = 1 } END { exit !found }' /proc/swaps; then
    die "this host already has swap; the squeezed setup needs its own zram only"
fi
bytes() { # 64M -> bytes
    local n=${1%[KMGkmg]} u=${1##*[0-9]}
    case $u in K | k) echo $((n << 10)) ;; M | m) echo $((n << 20)) ;; G | g) echo $((n << 30)) ;; *) echo "$n" ;; esac
}

DIR=$(mktemp -d "/tmp/$ALB.XXXXXX")
DAEMON_PID=
CGROUPS=()
ZRAM_STATE=$DIR/zram.dev
cleanup() {
    set +e
    if [[ -n $DAEMON_PID ]]; then
        kill -TERM "$DAEMON_PID" 2>/dev/null
        for _ in $(seq 150); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$DAEMON_PID" 2>/dev/null
        wait "$DAEMON_PID" 2>/dev/null
    fi
    kill_servers
    local cg pid
    for cg in "${CGROUPS[@]}"; do
        [[ -d $cg ]] || continue
        for _ in $(seq 50); do
            pids=$(cat "$cg/cgroup.procs" 2>/dev/null)
            [[ -z $pids ]] && break
            for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
            sleep 0.1
        done
        rmdir "$cg" 2>/dev/null || echo "$ALB: could not remove $cg" >&2
    done
    [[ -f $ZRAM_STATE ]] && MEMTIDE_ZRAM_STATE=$ZRAM_STATE bash "$REPO/scripts/zram-swap.sh" down
    if [[ ${KEEP:-0} == 1 ]]; then echo "$ALB: kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

own_v1=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
own_v2=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
if [[ -n $own_v1 && -d /sys/fs/cgroup/memory$own_v1 ]]; then
    V=1 ROOT=/sys/fs/cgroup/memory OWN=${own_v1%/}
    LIMIT=memory.limit_in_bytes PEAK=memory.max_usage_in_bytes USAGE=memory.usage_in_bytes
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    V=2 ROOT=/sys/fs/cgroup OWN=${own_v2%/}
    LIMIT=memory.max PEAK=memory.peak USAGE=memory.current
else
    die "no memory cgroup controller"
fi
new_cgroup() { # NAME: makes it under ours and sets CG to its path inside the hierarchy (not in
    # a subshell, so that the cleanup sees it in CGROUPS)
    CG=$OWN/alb-$$-$1
    mkdir "$ROOT$CG"
    CGROUPS+=("$ROOT$CG")
}
cgfile() { cat "$ROOT$1/$2"; }
swap_of() {
    if [[ $V == 1 ]]; then awk '$1 == "swap" { print $2 }' "$ROOT$1/memory.stat"; else cat "$ROOT$1/memory.swap.current"; fi
}
oom_kills() {
    if [[ $V == 1 ]]; then awk '$1 == "oom_kill" { print $2 }' "$ROOT$1/memory.oom_control"; else awk '$1 == "oom_kill" { print $2 }' "$ROOT$1/memory.events"; fi
}
# Lowers cgroup $1's limit to $2 bytes from its usage in 16 MiB steps, each write retried
# while the kernel answers EBUSY (it has not reclaimed, to swap, enough yet).
squeeze() {
    local cg=$1 to=$2 at tries
    at=$(cgfile "$cg" "$USAGE")
    while ((at > to)); do
        at=$((at - 16 * MIB > to ? at - 16 * MIB : to))
        tries=0
        until echo "$at" >"$ROOT$cg/$LIMIT" 2>/dev/null; do
            ((++tries < 50)) || die "could not limit $cg to $at bytes"
            sleep 0.1
        done
    done
}
# RAM the zram device really holds (its compressed pages and their overhead): memory outside
# every cgroup's charge.
zram_ram() { awk '{ print $3 }' "/sys/block/$(awk 'NR == 2 { sub(/.*\//, "", $1); print $1 }' /proc/swaps)/mm_stat"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
