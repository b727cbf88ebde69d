#!/usr/bin/env bash
# innodb-resize-times.sh: how long MariaDB takes to resize a warm InnoDB buffer pool, timed the way memtide-adapter's MariaDB pool does it (SET GLOBAL innodb_buffer_pool_size, the resize status polled until finished, the size read back), how soon the server's resident memory follows a 1 GiB shrink, and the longest query stall under sysbench during one.
#
# Usage: scripts/innodb-resize-times.sh            (as root; needs mariadbd, mariadb-install-db,
#                                                   the mariadb client and sysbench 1.0)
# Environment: ROWS (rows of 1 KiB in the filler table, default 2800000: about 3.1 GiB, so a
# 3 GiB pool is full), SB_ROWS (rows in each of sysbench's 4 tables, default 600000: about
# 560 MiB in all, which fits the 1 GiB pool left after the shrink), SB_TIME (seconds per
# sysbench run, default 20).
#
# Everything runs on loopback-free Unix sockets in a temporary directory, removed at exit with
# the server (killed) and the memory cgroup made for it under this shell's own.
set -euo pipefail

ROWS=${ROWS:-2800000}
SB_ROWS=${SB_ROWS:-600000}
SB_TIME=${SB_TIME:-20}
MIB=$((1 << 20))
GIB=$((1 << 30))

for tool in /usr/sbin/mariadbd mariadb-install-db mariadb sysbench; do
    command -v "$tool" >/dev/null || { echo "innodb-resize-times: $tool is missing" >&2; exit 1; }
done

DIR=$(mktemp -d /tmp/innodb-times.XXXXXX)
SOCK=$DIR/sock
PID=
CG=
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    [ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

sql() { mariadb -S "$SOCK" -uroot -N -B -e "$1"; }
now() { echo "$EPOCHREALTIME"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
# Read with builtins only, so that the watchers below fork nothing while they poll.
RSS=0
read_rss() {
    local k v _
    while read -r k v _; do [ "$k" = VmRSS: ] && { RSS=$((v * 1024)); return; }; done <"/proc/$PID/status"
}
rss() { read_rss; echo "$RSS"; }

# A memory cgroup for the server, under this shell's own (cgroup v1 or v2).
own_v1=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
own_v2=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
if [ -n "$own_v1" ] && [ -d "/sys/fs/cgroup/memory$own_v1" ]; then
    CG=/sys/fs/cgroup/memory${own_v1%/}/innodb-times-$$
    USAGE=memory.usage_in_bytes
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CG=/sys/fs/cgroup${own_v2%/}/innodb-times-$$
    USAGE=memory.current
fi
if [ -n "$CG" ] && ! mkdir "$CG" 2>/dev/null; then CG=; fi
USE=0
read_usage() { if [ -n "$CG" ]; then read -r USE <"$CG/$USAGE"; else USE=0; fi; }
usage() { read_usage; echo "$USE"; }

echo "== $(/usr/sbin/mariadbd --version)"
mariadb-install-db --datadir="$DIR/data" --user=root --auth-root-authentication-method=normal \
    --skip-test-db >"$DIR/install.log" 2>&1 || { cat "$DIR/install.log" >&2; exit 1; }
sh -c '[ -z "$1" ] || echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$CG" \
    /usr/sbin/mariadbd --no-defaults --datadir="$DIR/data" --socket="$SOCK" --skip-networking \
    --user=root --log-error="$DIR/err.log" --pid-file="$DIR/pid" \
    --innodb-buffer-pool-size=1G --innodb-flush-log-at-trx-commit=0 --innodb-log-file-size=1G \
    --innodb-buffer-pool-load-at-startup=0 --innodb-buffer-pool-dump-at-shutdown=0 \
    --max-connections=64 2>/dev/null &
PID=$!
for _ in $(seq 600); do sql 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
sql 'SELECT 1' >/dev/null
PAGE=$(sql 'SELECT @@innodb_page_size')

status() { sql "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'" | cut -f2-; }
data_bytes() { echo $(($(sql "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_data'" | cut -f2) * PAGE)); }

# The adapter's path: SET, the status polled until the resize is over, the size read back.
# Prints the seconds from before the SET to the size read back.
resize() {
    local want=$1 t0 st
    t0=$(now)
    sql "SET GLOBAL innodb_buffer_pool_size = $want"
    while :; do
        st=$(status)
        case "$st" in "" | Completed* | *"Nothing to do"*) break ;; esac
        sleep 0.02
    done
    [ "$(sql 'SELECT @@innodb_buffer_pool_size')" = "$want" ] ||
        { echo "resize to $want: the server reports $(sql 'SELECT @@innodb_buffer_pool_size')" >&2; exit 1; }
    secs "$t0" "$(now)"
}

# Waits, polling every 5 ms, until the figure $1 (rss or usage) is at or under $2 bytes;
# prints when (as $EPOCHREALTIME), or "never" after 30 s.
when_under() {
    local t0=${EPOCHREALTIME/./} v nap
    exec {nap}<> <(:) # read -t on it: a 5 ms sleep without a fork
    while :; do
        if [ "$1" = rss ]; then read_rss; v=$RSS; else read_usage; v=$USE; fi
        if [ "$v" -le "$2" ]; then echo "$EPOCHREALTIME"; return; fi
        if [ $((${EPOCHREALTIME/./} - t0)) -ge 30000000 ]; then echo never; return; fi
        read -r -t 0.005 -u "$nap" _ || true
    done
}

echo "== filling d.t with $ROWS rows of 1 KiB"
t0=$(now)
sql 'CREATE DATABASE d'
sql 'CREATE TABLE d.t (id INT PRIMARY KEY, pad VARBINARY(1024)) ENGINE=InnoDB'
sql "INSERT INTO d.t SELECT seq, RANDOM_BYTES(1024) FROM d.seq_1_to_$ROWS"
echo "   $(secs "$t0" "$(now)") s, $(mib "$(stat -c %s "$DIR/data/d/t.ibd")") MiB on disk"
warm() { sql 'SELECT SUM(LENGTH(pad)) FROM d.t' >/dev/null; }

echo "== resize times (pool full of d.t's pages before each shrink)"
printf '%-8s %-10s %-10s %-16s %-22s %-22s\n' moved grow_s shrink_s data_in_pool_MiB \
    rss_MiB_before_after cgroup_MiB_before_after
RSS_LINE=
for moved in $((GIB / 2)) $GIB $((2 * GIB)); do
    sql "SET GLOBAL innodb_buffer_pool_size = $GIB"
    warm
    grow=$(resize $((GIB + moved)))
    warm
    data=$(data_bytes)
    r0=$(rss)
    u0=$(usage)
    t0=$(now)
    # Watchers: when resident memory and the cgroup have fallen by half of the data released
    # (memtide's honesty rule) and by 90 % of it.
    released=$((data > GIB ? data - GIB : 0))
    (when_under rss $((r0 - released / 2)) >"$DIR/rss_half") &
    w1=$!
    (when_under rss $((r0 - released * 9 / 10)) >"$DIR/rss_90") &
    w2=$!
    (when_under usage $((u0 - released / 2)) >"$DIR/cg_half") &
    w3=$!
    shrink=$(resize $GIB)
    wait $w1 $w2 $w3
    r1=$(rss)
    u1=$(usage)
    printf '%-8s %-10s %-10s %-16s %-22s %-22s\n' "$(mib $moved)M" "$grow" "$shrink" "$(mib "$data")" \
        "$(mib "$r0") -> $(mib "$r1")" "$(mib "$u0") -> $(mib "$u1")"
    if [ "$moved" = "$GIB" ]; then
        since() { local t; t=$(cat "$1"); if [ "$t" = never ]; then echo "never (30 s)"; else echo "$(secs "$t0" "$t") s"; fi; }
        RSS_LINE="1 GiB shrink ($(mib "$released") MiB of data released): RSS fell by half of it $(since "$DIR/rss_half") after the SET, by 90 % of it $(since "$DIR/rss_90") after; the cgroup's usage fell by half of it $(since "$DIR/cg_half") after (shrink answered in $shrink s)"
    fi
done
echo "$RSS_LINE"

echo "== sysbench: $SB_TIME s of oltp_read_only on 2 threads, a 2 GiB -> 1 GiB shrink at $((SB_TIME / 2)) s"
sql 'DROP TABLE d.t'
sql 'CREATE DATABASE sbtest'
SB=(sysbench --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest
    --tables=4 --table_size="$SB_ROWS" --threads=2 --rand-type=uniform)
"${SB[@]}" oltp_read_only prepare >/dev/null
sql "SET GLOBAL innodb_buffer_pool_size = $((2 * GIB))"
"${SB[@]}" --time=10 oltp_read_only run >/dev/null
max_of() { awk '/^ +max:/ { print $2 }' "$1"; }
run() { # $1 label, $2 "shrink" or "", the rest: sysbench options
    local label=$1 shrink=$2
    shift 2
    sql "SET GLOBAL innodb_buffer_pool_size = $((2 * GIB))"
    "${SB[@]}" --time=5 "$@" oltp_read_only run >/dev/null
    "${SB[@]}" --time="$SB_TIME" --report-interval=1 --histogram=off "$@" oltp_read_only run \
        >"$DIR/sb.out" &
    local sb=$! took=-
    if [ -n "$shrink" ]; then
        sleep $((SB_TIME / 2))
        took=$(resize $GIB)
    fi
    wait $sb
    local worst
    worst=$(awk '/^\[ [0-9]+s \]/ { for (i = 1; i <= NF; i++) if ($i == "lat") print $(i + 2) }' \
        "$DIR/sb.out" | sort -n | tail -1)
    printf '%-44s %-10s %-12s %-14s\n' "$label" "$took" "$(max_of "$DIR/sb.out")" "$worst"
}
printf '%-44s %-10s %-12s %-14s\n' run shrink_s max_ms worst_p95_ms
run "transactions (14 queries), no resize" ""
run "transactions (14 queries), 2G -> 1G shrink" shrink
run "one point select per event, no resize" "" --point_selects=1 --range_selects=off --skip_trx=on
run "one point select per event, 2G -> 1G shrink" shrink --point_selects=1 --range_selects=off --skip_trx=on
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
