# alb-common.sh: what scripts/alb-mariadb.sh, scripts/alb-redis.sh and scripts/alb-two-dbs.sh
# share, sourced by each: the checks (root, memtide's binaries, no swap yet), the temporary
# directory, the cleanup at exit (the script's servers through its kill_servers, the daemon,
# the cgroups, the zram device), the memory hierarchy (v1 or v2) with cgroups under this
# shell's own, the squeeze of a cgroup's limit onto swap, figures in MiB, MariaDB servers and
# sysbench runs, and the daemon's port and stop.
#
# The sourcing script sets ALB (its name, for messages) and defines kill_servers before sourcing;
# DAEMONS (what start_daemon started and stop_daemon has not stopped), CGROUPS and ZRAM_STATE
# are the cleanup's to read.
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
DAEMONS=()
CGROUPS=()
ZRAM_STATE=$DIR/zram.dev
SWAPFILE=
cleanup() {
    set +e
    local pid
    for pid in "${DAEMONS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${DAEMONS[@]}"; do
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    kill_servers
    local cg
    for cg in "${CGROUPS[@]}"; do remove_cgroup "$cg"; done
    [[ -f $ZRAM_STATE ]] && MEMTIDE_ZRAM_STATE=$ZRAM_STATE bash "$REPO/scripts/zram-swap.sh" down
    [[ -n $SWAPFILE ]] && swapoff "$SWAPFILE" && rm -f "$SWAPFILE"
    if [[ ${KEEP:-0} == 1 ]]; then echo "$ALB: kept $DIR" >&2; else rm -rf "$DIR"; fi
}
# Kills what is left in cgroup $1 (a full path) and removes it, if it is there.
remove_cgroup() {
    local cg=$1 pids pid
    [[ -d $cg ]] || return 0
    for _ in $(seq 50); do
        pids=$(cat "$cg/cgroup.procs" 2>/dev/null)
        [[ -z $pids ]] && break
        for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
        sleep 0.1
    done
    rmdir "$cg" 2>/dev/null || echo "$ALB: could not remove $cg" >&2
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
# Major faults of cgroup $1 so far: its swap-ins (and file-backed faults, few for O_DIRECT
# InnoDB), pages.
majfaults() { awk '$1 == "pgmajfault" { print $2 }' "$ROOT$1/memory.stat"; }
oom_kills() {
    if [[ $V == 1 ]]; then awk '$1 == "oom_kill" { print $2 }' "$ROOT$1/memory.oom_control"; else awk '$1 == "oom_kill" { print $2 }' "$ROOT$1/memory.events"; fi
}
# Lowers cgroup $1's limit to $2 bytes from its usage in 16 MiB steps (one write when the
# usage is below it already), each write retried while the kernel answers EBUSY (it has not
# reclaimed, to swap, enough yet).
squeeze() {
    local cg=$1 to=$2 at tries
    at=$(cgfile "$cg" "$USAGE")
    while :; do
        at=$((at - 16 * MIB > to ? at - 16 * MIB : to))
        tries=0
        until echo "$at" >"$ROOT$cg/$LIMIT" 2>/dev/null; do
            ((++tries < 50)) || die "could not limit $cg to $at bytes"
            sleep 0.1
        done
        ((at > to)) || break
    done
}
# RAM the zram device really holds (its compressed pages and their overhead): memory outside
# every cgroup's charge; 0 when the swap is not a zram device.
zram_ram() {
    local stat
    stat="/sys/block/$(awk 'NR == 2 { sub(/.*\//, "", $1); print $1 }' /proc/swaps)/mm_stat"
    if [[ -f $stat ]]; then awk '{ print $3 }' "$stat"; else echo 0; fi
}
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }

# MariaDB, for the scripts that run it (alb-mariadb.sh, alb-two-dbs.sh): each server on a data
# directory and a Unix socket of its own, no networking; sysbench oltp_read_only against it.
mdb_tools() {
    local tool
    for tool in /usr/sbin/mariadbd mariadb-install-db mariadb mariadb-admin sysbench; do
        command -v "$tool" >/dev/null || die "$tool is missing (apt-get install mariadb-server sysbench)"
    done
}
mdb_sql() { mariadb -S "$1" -uroot -N -B -e "$2"; } # SOCK QUERY
# Makes a data directory DATA with root on the socket without a password (its bootstrap in a
# temporary directory of its own: bootstraps at once in a shared /tmp collide).
mdb_install() { # DATA
    mkdir -p "$1.tmp"
    mariadb-install-db --datadir="$1" --tmpdir="$1.tmp" --user=root \
        --auth-root-authentication-method=normal --skip-test-db >"$1.install.log" 2>&1 ||
        { cat "$1.install.log" >&2; die "mariadb-install-db $1 failed"; }
}
# Starts mariadbd on data directory DATA with socket SOCK and pool POOL, in cgroup CG (a path
# inside the hierarchy, or "" for none), and waits until it answers; MDB_PID is its pid (a
# child of this shell). Its error log is DATA.err.
mdb_start() { # DATA SOCK POOL CG
    local data=$1 sock=$2 pool=$3 cg=$4
    sh -c '[ -z "$1" ] || echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "${cg:+$ROOT$cg}" \
        /usr/sbin/mariadbd --no-defaults --datadir="$data" --socket="$sock" --skip-networking \
        --user=root --log-error="$data.err" --pid-file="$data.pid" \
        --innodb-buffer-pool-size="$pool" --innodb-flush-log-at-trx-commit=0 \
        --innodb-log-file-size=256M --innodb-flush-method=O_DIRECT \
        --innodb-buffer-pool-load-at-startup=0 --innodb-buffer-pool-dump-at-shutdown=0 \
        --max-connections=64 2>/dev/null &
    MDB_PID=$!
    for _ in $(seq 1200); do mdb_sql "$sock" 'SELECT 1' >/dev/null 2>&1 && return; sleep 0.1; done
    cat "$data.err" >&2
    die "mariadbd on $data did not answer within 120 s"
}
mdb_stop() { # SOCK PID
    mariadb-admin -S "$1" -uroot shutdown >/dev/null 2>&1 || kill -TERM "$2" 2>/dev/null
    wait "$2" 2>/dev/null || true
}
# Reads every table's clustered index into the pool (the working set of oltp_read_only).
mdb_warm() { # SOCK TABLES
    local t
    for t in $(seq "$2"); do
        mdb_sql "$1" "SELECT SUM(LENGTH(c) + LENGTH(pad)) FROM sbtest.sbtest$t FORCE INDEX (PRIMARY)" >/dev/null
    done
}
# sysbench oltp_read_only against SOCK on TABLES x ROWS, uniform access, the rest of the
# arguments after these.
mdb_sysbench() { # SOCK TABLES ROWS ARGS...
    local sock=$1 tables=$2 rows=$3
    shift 3
    sysbench oltp_read_only --db-driver=mysql --mysql-socket="$sock" --mysql-user=root \
        --mysql-db=sbtest --tables="$tables" --table-size="$rows" --rand-type=uniform "$@"
}
# Fills a fresh server's sbtest database with TABLES x ROWS and analyzes them; prints the
# clustered and secondary indexes' bytes.
mdb_prepare() { # SOCK TABLES ROWS LOG
    mdb_sql "$1" 'CREATE DATABASE sbtest'
    mdb_sysbench "$1" "$2" "$3" --threads=2 prepare >"$4"
    mdb_sql "$1" "ANALYZE TABLE $(seq -s, -f 'sbtest.sbtest%g' "$2")" >/dev/null
    mdb_sql "$1" "SELECT SUM(data_length), SUM(index_length) FROM information_schema.tables WHERE table_schema = 'sbtest'"
}
tps_of() { awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$1"; }
p95_of() { awk '/95th percentile:/ { print $3 }' "$1"; }
# sysbench's --report-interval lines as "END_S TPS", one a window.
tps_windows() { awk '/^\[ *[0-9]+s \]/ { t = $2; sub(/s/, "", t); for (i = 1; i <= NF; i++) if ($i == "tps:") print t, $(i + 1) }' "$1"; }

# A free TCP port on the loopback, for the daemon's API.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Starts `memtide daemon` on config CONFIG, its stderr to LOG; DAEMON_PID is its pid.
start_daemon() { # CONFIG LOG
    "$TARGET_DIR/memtide" daemon --config "$1" 2>"$2" &
    DAEMON_PID=$!
    DAEMONS+=("$DAEMON_PID")
}
# Stops daemon PID (the last started by default) with SIGTERM (it restores what it changed)
# and waits for it; its exit status is DAEMON_STATUS.
stop_daemon() { # [PID]
    local pid=${1:-$DAEMON_PID} d left=()
    DAEMON_STATUS=0
    kill -TERM "$pid"
    wait "$pid" || DAEMON_STATUS=$?
    for d in "${DAEMONS[@]}"; do [[ $d == "$pid" ]] || left+=("$d"); done
    DAEMONS=("${left[@]}")
}
