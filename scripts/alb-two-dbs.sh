#!/usr/bin/env bash
# alb-two-dbs.sh: issue 28's benchmark, two MariaDB servers under one memory budget. Each
# server has a 512 MiB buffer pool, its own data directory (the same sysbench tables), its own
# cgroup under this shell's and a Unix socket; both are warmed (every clustered index read), then
# the busy one runs sysbench oltp_read_only from t = 0 to T_END, and the idle one is woken by a
# run of its own from T_WAKE to T_END. Three conditions, each with the same seeds:
#   (a) static limits: at T_DAEMON each cgroup is limited to STATIC, zram swap, no memtide;
#   (b) limits only:   at T_DAEMON `memtide daemon` with budget BUDGET, `tws`, tax 0.75;
#   (c) adapters:      as (b), each tenant with [tenant.app] kind = "mariadb", so memtide
#                      shrinks the pools through memtide-adapter.
# The conditions run alternating (a b c, a b c, ... for ROUNDS rounds), or with PARALLEL=1 side
# by side on one timeline (each round's a, b and c at once, four or six servers, one daemon per
# condition), so that what else the machine runs weighs on each alike: the shape test's way on a
# shared CI machine, where (c)'s median over (b)'s, run one after the other, went from 0.78 to
# 1.09 from run to run. Each server runs on its own copy of the prepared data. Prints the busy
# database's TPS per 10-s window before T_DAEMON, from T_DAEMON + 10 to T_WAKE and from T_WAKE +
# 10 to T_END, the woken database's, each cgroup's swap at the end and what it swapped in (major
# faults) from T_DAEMON, the RAM zram holds for them (outside every cgroup's charge) at T_WAKE
# and the end, the pools at the end and after the daemon's SIGTERM, pool resizes (the daemon's
# `agent_answered` lines) and OOM kills, as a markdown table, and `RESULT <condition><round>
# key=value` lines for a test to read.
#
# Usage: scripts/alb-two-dbs.sh   (as root, from the repository, after
#                                  cargo build --release --workspace)
# Environment (defaults: issue 28's setup):
#   TABLES (9), ROWS per table (200000), POOL (512M), BUDGET (800M), STATIC (398M), THREADS of
#   the busy and the woken run (4), T_DAEMON (30), T_WAKE (270), T_END (420) seconds,
#   CONDITIONS ("a b c"), ROUNDS (1), PARALLEL (0, or 1: a round's conditions at once), SEED (1: the busy run's --rand-seed, the woken run's is
#   SEED + 1), TICK (the daemon's, 1s), TAX (0.75), TENANT_MIN (160M), TENANT_MAX (1G),
#   APP_MIN (the pool's, 128M), ZRAM (2G: the swap's size), SWAP (zram, or file: a swap
#   file of that size on the disk under the temporary directory, the paper's premise),
#   TARGET_DIR (target/release), OUT (a file the RESULT lines are written to as well), KEEP=1
#   keeps the temporary directory: per condition the sysbench outputs, the daemon's JSON log
#   (daemon.log), its config and status.jsonl (the daemon's /v1/host and /v1/tenants each
#   second: every tenant's allocation, target, reason).
# Needs mariadbd, mariadb-install-db, the mariadb client, sysbench 1.0, curl, zram, cgroup
# v1 or v2. The servers, sysbench, the daemon, the cgroups made under this shell's own and the
# zram device (or swap file) are removed at exit.
set -euo pipefail

TABLES=${TABLES:-9}
ROWS=${ROWS:-200000}
POOL=${POOL:-512M}
BUDGET=${BUDGET:-800M}
STATIC=${STATIC:-398M}
THREADS=${THREADS:-4}
T_DAEMON=${T_DAEMON:-30}
T_WAKE=${T_WAKE:-270}
T_END=${T_END:-420}
CONDITIONS=${CONDITIONS:-a b c}
SWAP=${SWAP:-zram}
ROUNDS=${ROUNDS:-1}
PARALLEL=${PARALLEL:-0}
SEED=${SEED:-1}
TICK=${TICK:-1s}
TAX=${TAX:-0.75}
TENANT_MIN=${TENANT_MIN:-160M}
TENANT_MAX=${TENANT_MAX:-1G}
APP_MIN=${APP_MIN:-128M}
OUT=${OUT:-}
ALB=alb-two-dbs
# What kill_servers stops: the servers, the sysbench runs and the API poller.
PIDS=()
kill_servers() {
    local pid
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}
# shellcheck source=scripts/alb-common.sh
source "$(dirname "$0")/alb-common.sh"
mdb_tools
for tool in curl python3; do command -v "$tool" >/dev/null || die "$tool is missing"; done
case " $CONDITIONS " in *" a "* | *" b "* | *" c "*) ;; *) die "CONDITIONS must name a, b or c" ;; esac
for c in $CONDITIONS; do [[ $c == [abc] ]] || die "unknown condition $c (a, b or c)"; done
[[ $PARALLEL == [01] ]] || die "PARALLEL must be 0 or 1, not $PARALLEL"
((0 < T_DAEMON && T_DAEMON + 10 < T_WAKE && T_WAKE + 10 < T_END)) || die "need 0 < T_DAEMON < T_WAKE < T_END, 10 s apart"
[[ -z $OUT ]] || : >"$OUT"
result() { # TAG KEY=VALUE...
    local tag=$1 kv
    shift
    for kv in "$@"; do
        echo "RESULT $tag $kv"
        [[ -z $OUT ]] || echo "RESULT $tag $kv" >>"$OUT"
    done
}

echo "== $(/usr/sbin/mariadbd --version | cut -d' ' -f1-4); $(sysbench --version); $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); kernel $(uname -r); cgroup v$V"
echo "== preparing $TABLES tables x $ROWS rows (uniform access), copied for each server"
t=$SECONDS
mdb_install "$DIR/data"
mdb_start "$DIR/data" "$DIR/data.sock" "$POOL" ""
PIDS+=("$MDB_PID")
mdb_prepare "$DIR/data.sock" "$TABLES" "$ROWS" "$DIR/prepare.log" >"$DIR/sizes"
read -r DATA INDEX <"$DIR/sizes"
mdb_stop "$DIR/data.sock" "$MDB_PID"
PIDS=()
echo "   clustered index (what oltp_read_only reads) $(mib "$DATA") MiB, secondary $(mib "$INDEX") MiB, in $((SECONDS - t)) s"

if [[ $SWAP == file ]]; then
    # The paper's premise: swap on the disk the databases read from.
    SWAPFILE=$DIR/swapfile
    fallocate -l "$ZRAM" "$SWAPFILE"
    chmod 600 "$SWAPFILE"
    mkswap -q "$SWAPFILE"
    swapon -p 100 "$SWAPFILE"
    echo "== swap file $ZRAM on the disk: $SWAPFILE"
else
    MEMTIDE_ZRAM_STATE=$ZRAM_STATE bash "$REPO/scripts/zram-swap.sh" up "$ZRAM" >/dev/null
    echo "== zram swap $ZRAM: $(awk 'NR > 1 { print $1 }' /proc/swaps | tr '\n' ' ')"
fi

# Seconds since the timeline's t = 0 (T0, from date +%s.%N), and a sleep until t = $1.
now() { awk -v a="$T0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - a }'; }
sleep_until() { sleep "$(awk -v a="$T0" -v t="$1" -v n="$(date +%s.%N)" 'BEGIN { d = a + t - n; printf "%.2f", (d > 0 ? d : 0) }')"; }

# Each condition's state by its tag (b1, c1, ...): its table rows, daemon, API port, poller and
# starting pool; and each server's by TAG/SIDE (b1/busy, b1/idle): its cgroup, mariadbd,
# sysbench run and whether it succeeded, its major faults at T_DAEMON, at T_WAKE and at the end,
# its swap and its pool at the end.
SIDES=(busy idle)
declare -A ROW WOKEN DAEMON POLLER PORT POOL0 CGROUP PID SB OK MF0 MFW MF SWAPPED END

# The daemon's config for condition tag $1 (b: limits only, c: with adapters).
daemon_config() {
    local tag=$1 name
    cat <<EOF
[daemon]
tick = "$TICK"
listen = "127.0.0.1:${PORT[$tag]}"
state_file = "$DIR/$tag/state.json"
log_format = "json"

[host]
parent = "self"
budget = "$BUDGET"

[policy]
tax_rate = $TAX
sampling_period = "1s"
EOF
    for name in "${SIDES[@]}"; do
        cat <<EOF

[[tenant]]
name = "$name"
cgroup = "${CGROUP[$tag/$name]}"
min = "$TENANT_MIN"
max = "$TENANT_MAX"
estimator = "tws"
EOF
        [[ ${tag:0:1} == c ]] || continue
        cat <<EOF

[tenant.app]
kind = "mariadb"
url = "unix://$DIR/$tag/$name.sock"
user = "root"
min = "$APP_MIN"
max = "$POOL"
EOF
    done
}

# Polls the API of condition tag $1's daemon once a second into its status.jsonl: t, the host
# and the tenants.
poll_status() {
    local tag=$1 port=${PORT[$1]} host tenants
    while sleep 1; do
        host=$(curl -sf "http://127.0.0.1:$port/v1/host") || continue
        tenants=$(curl -sf "http://127.0.0.1:$port/v1/tenants") || continue
        printf '{"t":%s,"host":%s,"tenants":%s}\n' "$(now)" "$host" "$tenants" >>"$DIR/$tag/status.jsonl"
    done
}

# "MIN–MAX (median MED)" of the TPS windows of sysbench output $1 ending in (FROM, TO] s.
window_stats() {
    tps_windows "$1" | awk -v from="$2" -v to="$3" '$1 > from && $1 <= to { v[n++] = $2 }
        END {
            if (!n) { print "-"; exit }
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
            med = n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
            printf "%.0f–%.0f (median %.0f)\n", v[0], v[n - 1], med
        }'
}
windows_csv() { tps_windows "$1" | awk '{ printf "%s%s:%s", n++ ? "," : "", $1, $2 } END { print "" }'; }
# The JSON log lines of condition tag $1's daemon of event $2 for tenant $3 (its keys are
# sorted, its JSON compact).
events() { grep -F "\"event\":\"$2\"" "$DIR/$1/daemon.log" | grep -F "\"tenant\":\"$3\"" || true; }
# Pool resizes for tenant $2 of tag $1: its agent's answers, and the done ones among them.
resizes() { events "$1" agent_answered "$2" | awk '{ n++ } /"status":"done"/ { d++ } END { printf "%d %d\n", n, d }'; }
limit_moves() { events "$1" limit "$2" | wc -l; }
pool_of() { mdb_sql "$DIR/$1/$2.sock" 'SELECT @@innodb_buffer_pool_size' || echo 0; } # TAG busy|idle

# Condition tag $1's cgroups, and its two servers on copies of the prepared data directory.
cond_start() {
    local tag=$1 run=$DIR/$1 side
    case ${tag:0:1} in
        a) echo "== ($tag) static limits $STATIC each from t = $T_DAEMON s, no memtide" ;;
        b) echo "== ($tag) memtide from t = $T_DAEMON s, budget $BUDGET, limits only" ;;
        c) echo "== ($tag) memtide from t = $T_DAEMON s, budget $BUDGET, [tenant.app] mariadb adapters" ;;
    esac
    mkdir -p "$run"
    for side in "${SIDES[@]}"; do
        new_cgroup "$tag-$side"
        CGROUP[$tag/$side]=$CG
        cp -a "$DIR/data" "$run/$side"
        mdb_start "$run/$side" "$run/$side.sock" "$POOL" "$CG"
        PID[$tag/$side]=$MDB_PID
        PIDS+=("$MDB_PID")
    done
}

# At T_DAEMON: the static limits (a, in the background: the caller waits) or the daemon.
cond_manage() {
    local tag=$1 side
    for side in "${SIDES[@]}"; do
        MF0[$tag/$side]=$(majfaults "${CGROUP[$tag/$side]}")
        [[ ${tag:0:1} == a ]] || continue
        squeeze "${CGROUP[$tag/$side]}" "$(bytes "$STATIC")" &
        SQUEEZES+=($!)
    done
    [[ ${tag:0:1} != a ]] || return 0
    PORT[$tag]=$(free_port)
    daemon_config "$tag" >"$DIR/$tag/memtide.toml"
    start_daemon "$DIR/$tag/memtide.toml" "$DIR/$tag/daemon.log"
    DAEMON[$tag]=$DAEMON_PID
    poll_status "$tag" &
    POLLER[$tag]=$!
    disown "${POLLER[$tag]}" # killed at the end: no job notice
    PIDS+=("${POLLER[$tag]}")
    echo "   ($tag) t = $(now) s: memtide started"
}

# At the end, before any daemon stops: what server TAG/SIDE ($1) holds and swapped in.
server_measure() {
    SWAPPED[$1]=$(swap_of "${CGROUP[$1]}")
    MF[$1]=$(majfaults "${CGROUP[$1]}")
    END[$1]=$(pool_of "${1%/*}" "${1#*/}")
}

# Stops condition tag $1's daemon (its adapters give the pools back), then reports it and stops
# its servers. ZRAM_WAKE and ZRAM_END: what zram held at the wake-up and the end.
cond_finish() {
    local tag=$1 cond=${1:0:1} run=$DIR/$1 b=$1/busy i=$1/idle exit_busy exit_idle ooms alive=1 \
        rb="- -" ri="- -" lb=- li=-
    exit_busy=${END[$b]} exit_idle=${END[$i]}
    if [[ $cond != a ]]; then
        stop_daemon "${DAEMON[$tag]}"
        kill -KILL "${POLLER[$tag]}" 2>/dev/null || true
        sleep 1 # an adapter's last resize, if it restores the pool at exit
        exit_busy=$(pool_of "$tag" busy) exit_idle=$(pool_of "$tag" idle)
        rb=$(resizes "$tag" busy) ri=$(resizes "$tag" idle) lb=$(limit_moves "$tag" busy) li=$(limit_moves "$tag" idle)
        echo "   ($tag) daemon exit $DAEMON_STATUS; limits after it $(cgfile "${CGROUP[$b]}" "$LIMIT") / $(cgfile "${CGROUP[$i]}" "$LIMIT")"
        result "$tag" "daemon_exit=$DAEMON_STATUS" "taken_over=$(grep -c 'taken over' "$run/daemon.log" || true)"
    fi
    ooms=$(($(oom_kills "${CGROUP[$b]}") + $(oom_kills "${CGROUP[$i]}")))
    if ! kill -0 "${PID[$b]}" 2>/dev/null || ! kill -0 "${PID[$i]}" 2>/dev/null; then alive=0; fi
    local sb=${MF[$b]} si=${MF[$i]} sb0=${MF0[$b]} si0=${MF0[$i]} sbw=${MFW[$b]} siw=${MFW[$i]}
    result "$tag" "condition=$cond" "parallel=$PARALLEL" "t_daemon=$T_DAEMON" "t_wake=$T_WAKE" "t_end=$T_END" \
        "busy_windows=$(windows_csv "$run/busy.out")" "woken_windows=$(windows_csv "$run/idle.out")" \
        "busy_tps=$(tps_of "$run/busy.out")" "woken_tps=$(tps_of "$run/idle.out")" \
        "busy_ok=${OK[$b]}" "woken_ok=${OK[$i]}" "servers_alive=$alive" \
        "swap_busy_bytes=${SWAPPED[$b]}" "swap_idle_bytes=${SWAPPED[$i]}" "pool_start_bytes=${POOL0[$tag]}" \
        "swapins_busy=$((sb - sb0))" "swapins_idle=$((si - si0))" \
        "swapins_busy_woken=$((sb - sbw))" "swapins_idle_woken=$((si - siw))" \
        "zram_ram_wake_bytes=$ZRAM_WAKE" "zram_ram_end_bytes=$ZRAM_END" \
        "pool_busy_end_bytes=${END[$b]}" "pool_idle_end_bytes=${END[$i]}" \
        "pool_busy_exit_bytes=$exit_busy" "pool_idle_exit_bytes=$exit_idle" \
        "resizes_busy=${rb#* }" "resizes_idle=${ri#* }" "answers_busy=${rb% *}" "answers_idle=${ri% *}" \
        "limit_moves_busy=$lb" "limit_moves_idle=$li" "oom_kills=$ooms"
    ROW[$tag]="| ($tag) $(case $cond in a) echo "static limits, $STATIC each, no memtide" ;; b) echo "memtide, limits only" ;; c) echo "memtide + mariadb adapters" ;; esac)"
    ROW[$tag]+=" | $(window_stats "$run/busy.out" 0 "$T_DAEMON") | $(window_stats "$run/busy.out" $((T_DAEMON + 10)) "$T_WAKE")"
    ROW[$tag]+=" | $(window_stats "$run/busy.out" $((T_WAKE + 10)) "$T_END") | $(mib "${SWAPPED[$b]}") / $(mib "${SWAPPED[$i]}") MiB"
    ROW[$tag]+=" | $(mib $(((sb - sb0) * 4096))) / $(mib $(((si - si0) * 4096))) MiB"
    ROW[$tag]+=" | $(mib "$ZRAM_WAKE") / $(mib "$ZRAM_END") MiB"
    ROW[$tag]+=" | $(mib "${END[$b]}") / $(mib "${END[$i]}"); $(mib "$exit_busy") / $(mib "$exit_idle") after exit"
    ROW[$tag]+=" | ${rb#* } / ${ri#* } | $ooms |"
    WOKEN[$tag]="| ($tag) | $(tps_of "$run/idle.out") | $(window_stats "$run/idle.out" 0 $((T_END - T_WAKE))) | $(tps_windows "$run/idle.out" | awk 'NR == 1 { printf "%.0f", $2 }') |"
    mdb_stop "$run/busy.sock" "${PID[$b]}"
    mdb_stop "$run/idle.sock" "${PID[$i]}"
}

# Starts sysbench on server TAG/SIDE ($1) for $2 seconds with seed $3, its report in
# $DIR/TAG/SIDE.out.
load() {
    mdb_sysbench "$DIR/$1.sock" "$TABLES" "$ROWS" --threads="$THREADS" --time="$2" \
        --report-interval=10 --rand-seed="$3" run >"$DIR/$1.out" 2>&1 &
    SB[$1]=$!
    PIDS+=("$!")
}

# Runs the conditions tagged $@ on one timeline: one at a time, or side by side (PARALLEL=1),
# so that what else the machine runs weighs on each alike.
run_group() {
    local tag side pid warms=()
    for tag; do cond_start "$tag"; done
    for tag; do
        for side in "${SIDES[@]}"; do
            mdb_warm "$DIR/$tag/$side.sock" "$TABLES" &
            warms+=($!)
        done
    done
    for pid in "${warms[@]}"; do wait "$pid"; done
    for tag; do
        POOL0[$tag]=$(pool_of "$tag" busy)
        echo "   ($tag) warmed: usage $(mib "$(cgfile "${CGROUP[$tag/busy]}" "$USAGE")") + $(mib "$(cgfile "${CGROUP[$tag/idle]}" "$USAGE")") MiB, pools $(mib "${POOL0[$tag]}") MiB"
    done

    T0=$(date +%s.%N)
    for tag; do load "$tag/busy" "$T_END" "$SEED"; done
    sleep_until "$T_DAEMON"
    SQUEEZES=()
    for tag; do cond_manage "$tag"; done
    for pid in "${SQUEEZES[@]}"; do wait "$pid"; done
    for tag; do
        [[ ${tag:0:1} != a ]] || echo "   ($tag) t = $(now) s: limited to $(mib "$(cgfile "${CGROUP[$tag/busy]}" "$LIMIT")") + $(mib "$(cgfile "${CGROUP[$tag/idle]}" "$LIMIT")") MiB"
    done
    sleep_until "$T_WAKE"
    ZRAM_WAKE=$(zram_ram)
    for tag; do
        for side in "${SIDES[@]}"; do MFW[$tag/$side]=$(majfaults "${CGROUP[$tag/$side]}"); done
        load "$tag/idle" $((T_END - T_WAKE)) $((SEED + 1))
    done
    echo "   t = $(now) s: the idle database$( (($# == 1)) || echo s) woken"
    for tag; do
        for side in "${SIDES[@]}"; do
            OK[$tag/$side]=1
            wait "${SB[$tag/$side]}" || OK[$tag/$side]=0
        done
        echo "   ($tag) t = $(now) s: done (sysbench exit: busy ${OK[$tag/busy]}, woken ${OK[$tag/idle]}; 1 is success)"
    done

    ZRAM_END=$(zram_ram)
    for tag; do for side in "${SIDES[@]}"; do server_measure "$tag/$side"; done; done
    for tag; do cond_finish "$tag"; done
    kill_servers
    for tag; do
        for side in "${SIDES[@]}"; do
            remove_cgroup "$ROOT${CGROUP[$tag/$side]}"
            rm -rf "${DIR:?}/$tag/$side" # the data copy (KEEP=1 keeps the logs)
        done
    done
}

TAGS=()
for round in $(seq "$ROUNDS"); do
    group=()
    for cond in $CONDITIONS; do
        TAGS+=("$cond$round")
        if [[ $PARALLEL == 1 ]]; then group+=("$cond$round"); else run_group "$cond$round"; fi
    done
    [[ $PARALLEL != 1 ]] || run_group "${group[@]}"
done

echo
echo "Two MariaDB servers, $TABLES x $ROWS rows ($(mib "$DATA") MiB clustered) each, pools $POOL, $THREADS threads, budget $BUDGET, tws, tax $TAX; busy from 0 s, memtide (or the limits) from $T_DAEMON s, the idle one woken at $T_WAKE s, end $T_END s; $(if [[ $PARALLEL == 1 ]]; then echo "each round's conditions side by side"; else echo "one condition at a time"; fi). Busy database TPS per 10-s window, min–max (median):"
echo
echo "| condition | before memtide (0–$T_DAEMON s) | $((T_DAEMON + 10))–$T_WAKE s | after the wake-up ($((T_WAKE + 10))–$T_END s) | swap at the end (busy / idle) | swapped in from t = $T_DAEMON s (busy / idle) | zram's RAM at the wake-up / end | pools at the end (MiB, busy / idle) | resizes (busy / idle) | OOM kills |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for tag in "${TAGS[@]}"; do echo "${ROW[$tag]}"; done
echo
echo "The woken database:"
echo
echo "| condition | TPS ($T_WAKE–$T_END s) | per 10-s window | first window |"
echo "|---|---|---|---|"
for tag in "${TAGS[@]}"; do echo "${WOKEN[$tag]}"; done
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
