#!/usr/bin/env bash
# alb-mariadb.sh: ALB Fig. 1 (Salomie et al., EuroSys 2013) on a real MariaDB: sysbench
# oltp_read_only against one database, three ways, each with the same machine memory:
#   (a) configured: innodb_buffer_pool_size = SMALL_POOL, no limit (its peak cgroup usage is
#       the memory B the other two get);
#   (b) squeezed:   pool BIG_POOL, warmed, then the cgroup limited to B with zram swap (what
#       a cgroup limit or an OS balloon does);
#   (c) ballooned:  pool BIG_POOL, warmed, then `memtide daemon` with budget B and
#       [tenant.app] kind = "mariadb", which shrinks the pool through memtide-adapter before
#       the limit follows.
# Prints TPS and p95 latency of each (one run each, after a warm-up run) and a table.
#
# Usage: scripts/alb-mariadb.sh     (as root, from the repository, after
#                                    cargo build --release -p memtide-cli -p memtide-adapter)
# Environment (defaults: the full run of docs/reproducing.md):
#   TABLES (8), ROWS per table (460000: 789 MiB of clustered index, measured,
#   which is what oltp_read_only touches), SMALL_POOL (256M), BIG_POOL (1G), RUN seconds
#   measured (120), WARM seconds of sysbench before each measured run (60), THREADS (4),
#   ZRAM size (2G), TARGET_DIR (target/release: memtide and memtide-adapter), KEEP=1 keeps
#   the temporary directory (logs).
# Needs mariadbd, mariadb-install-db, the mariadb client, sysbench 1.0, zram, cgroup v1 or v2.
# Everything listens on a Unix socket in a temporary directory; the servers, the daemon,
# the cgroups made under this shell's own and the zram device are removed at exit.
set -euo pipefail

TABLES=${TABLES:-8}
ROWS=${ROWS:-460000}
SMALL_POOL=${SMALL_POOL:-256M}
BIG_POOL=${BIG_POOL:-1G}
RUN=${RUN:-120}
WARM=${WARM:-60}
THREADS=${THREADS:-4}
ALB=alb-mariadb
DB_PID=
kill_servers() { if [[ -n $DB_PID ]]; then kill -KILL "$DB_PID" 2>/dev/null; wait "$DB_PID" 2>/dev/null; fi; }
# shellcheck source=scripts/alb-common.sh
source "$(dirname "$0")/alb-common.sh"
mdb_tools
SOCK=$DIR/sock
sql() { mdb_sql "$SOCK" "$1"; }

# Starts mariadbd with POOL on the data directory, in cgroup CG (a path, or "" for none).
start_db() { # POOL CG
    mdb_start "$DIR/data" "$SOCK" "$1" "$2"
    DB_PID=$MDB_PID
}
stop_db() {
    mdb_stop "$SOCK" "$DB_PID"
    DB_PID=
}
# Reads every table's clustered index into the pool (the working set).
warm_scan() { mdb_warm "$SOCK" "$TABLES"; }
# Runs sysbench for $1 seconds; the output goes to $2.
bench() { mdb_sysbench "$SOCK" "$TABLES" "$ROWS" --threads="$THREADS" --time="$1" --report-interval=10 run >"$2"; }

echo "== $(/usr/sbin/mariadbd --version | cut -d' ' -f1-4); $(sysbench --version); $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); kernel $(uname -r); cgroup v$V"
echo "== preparing $TABLES tables x $ROWS rows (uniform access)"
mdb_install "$DIR/data"
start_db "$BIG_POOL" ""
mdb_prepare "$SOCK" "$TABLES" "$ROWS" "$DIR/prepare.log" >"$DIR/sizes"
read -r DATA INDEX <"$DIR/sizes"
echo "   clustered index (what oltp_read_only reads) $(mib "$DATA") MiB, secondary index $(mib "$INDEX") MiB; flush method $(sql 'SELECT @@innodb_flush_method')"
stop_db

MEMTIDE_ZRAM_STATE=$ZRAM_STATE bash "$REPO/scripts/zram-swap.sh" up "$ZRAM" >/dev/null
echo "== zram swap $ZRAM: $(awk 'NR > 1 { print $1 }' /proc/swaps | tr '\n' ' ')"

declare -A TPS P95 NOTE
# The measured run of setup $1 in cgroup $2: warm-up, then RUN seconds.
measure() {
    local name=$1 cg=$2 swap0
    bench "$WARM" "$DIR/$name-warm.out"
    swap0=$(swap_of "$cg")
    bench "$RUN" "$DIR/$name.out"
    TPS[$name]=$(tps_of "$DIR/$name.out")
    P95[$name]=$(p95_of "$DIR/$name.out")
    local pool
    pool=$(sql 'SELECT @@innodb_buffer_pool_size')
    NOTE[$name]="pool $(mib "$pool") MiB, usage $(mib "$(cgfile "$cg" "$USAGE")") MiB, swap $(mib "$swap0") -> $(mib "$(swap_of "$cg")") MiB (zram holds $(mib "$(zram_ram)") MiB of RAM), OOM kills $(oom_kills "$cg")"
    echo "   $name: ${TPS[$name]} tps, p95 ${P95[$name]} ms; ${NOTE[$name]}"
}

echo "== (a) configured: pool $SMALL_POOL, no limit"
new_cgroup configured
start_db "$SMALL_POOL" "$CG"
warm_scan
measure configured "$CG"
B=$(cgfile "$CG" "$PEAK")
B=$(( (B + MIB - 1) / MIB * MIB ))
stop_db
echo "   peak usage $(mib "$B") MiB: the memory (b) and (c) get"

echo "== (b) squeezed: pool $BIG_POOL, warmed, then the cgroup limited to $(mib "$B") MiB (zram swap)"
new_cgroup squeezed
start_db "$BIG_POOL" "$CG"
warm_scan
echo "   warmed: usage $(mib "$(cgfile "$CG" "$USAGE")") MiB"
squeeze "$CG" "$B"
measure squeezed "$CG"
stop_db

echo "== (c) ballooned: pool $BIG_POOL, warmed, then memtide with budget $(mib "$B") + $(mib "$ADAPTER") MiB (the adapter) through memtide-adapter"
new_cgroup ballooned
start_db "$BIG_POOL" "$CG"
warm_scan
echo "   warmed: usage $(mib "$(cgfile "$CG" "$USAGE")") MiB"
PORT=$(free_port)
cat >"$DIR/memtide.toml" <<EOF
[daemon]
tick = "250ms"
listen = "127.0.0.1:$PORT"
state_file = "$DIR/state.json"

[host]
parent = "self"
budget = $((B + ADAPTER))

[policy]
sampling_period = "1s"

[rails]
floor_margin = "16M"

[[tenant]]
name = "db"
cgroup = "$CG"
min = "16M"
max = "4G"

[tenant.app]
kind = "mariadb"
url = "unix://$SOCK"
user = "root"
min = "$SMALL_POOL"
max = "$BIG_POOL"
EOF
start_daemon "$DIR/memtide.toml" "$DIR/daemon.log"
t0=$SECONDS
until [[ $(cgfile "$CG" "$USAGE") -le $((B + ADAPTER)) ]] && grep -q 'agent_answered.*status=done' "$DIR/daemon.log"; do
    ((SECONDS - t0 < 180)) || { cat "$DIR/daemon.log" >&2; die "memtide did not bring the database under $(mib "$B") MiB within 180 s"; }
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$DIR/daemon.log" >&2; die "the daemon exited"; }
    sleep 0.5
done
echo "   shrunk in $((SECONDS - t0)) s: pool $(mib "$(sql 'SELECT @@innodb_buffer_pool_size')") MiB, usage $(mib "$(cgfile "$CG" "$USAGE")") MiB, limit $(mib "$(cgfile "$CG" "$LIMIT")") MiB"
grep -E 'agent_answered' "$DIR/daemon.log" | head -5 | sed 's/^/   /'
measure ballooned "$CG"
if grep -q 'taken over' "$DIR/daemon.log"; then NOTE[ballooned]+="; TAKEN OVER: $(grep -m1 'taken over' "$DIR/daemon.log")"; fi
stop_daemon
stop_db

echo
echo "ALB Fig. 1 on MariaDB: $TABLES x $ROWS rows ($(mib "$DATA") MiB clustered), $THREADS threads, ${RUN} s after ${WARM} s warm-up, memory $(mib "$B") MiB"
printf '%-12s %-10s %-10s %-8s %s\n' setup tps p95_ms vs_a notes
for s in configured squeezed ballooned; do
    printf '%-12s %-10s %-10s %-8s %s\n' "$s" "${TPS[$s]}" "${P95[$s]}" \
        "$(awk -v x="${TPS[$s]}" -v a="${TPS[configured]}" 'BEGIN { printf "%.2f", x / a }')" "${NOTE[$s]}"
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
