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
# The conditions run alternating (a b c, a b c, ... for ROUNDS rounds). Prints the busy
# database's TPS per 10-s window before T_DAEMON, from T_DAEMON + 10 to T_WAKE and from T_WAKE
# + 10 to T_END, the woken database's, each cgroup's swap at the end and what it swapped in
# (major faults) from T_DAEMON, the RAM zram holds for them (outside every cgroup's charge) at
# T_WAKE and the end, the pools at the end and after the daemon's SIGTERM, pool resizes (the
# daemon's `agent_answered` lines) and OOM kills, as a markdown table, and
# `RESULT <condition><round> key=value` lines for a test to read.
#
# Usage: scripts/alb-two-dbs.sh   (as root, from the repository, after
#                                  cargo build --release --workspace)
# Environment (defaults: issue 28's setup):
#   TABLES (9), ROWS per table (200000), POOL (512M), BUDGET (800M), STATIC (398M), THREADS of
#   the busy and the woken run (4), T_DAEMON (30), T_WAKE (270), T_END (420) seconds,
#   CONDITIONS ("a b c"), ROUNDS (1), SEED (1: the busy run's --rand-seed, the woken run's is
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
echo "== preparing $TABLES tables x $ROWS rows (uniform access), copied to a second data directory"
t=$SECONDS
mdb_install "$DIR/busy"
mdb_start "$DIR/busy" "$DIR/busy.sock" "$POOL" ""
PIDS+=("$MDB_PID")
mdb_prepare "$DIR/busy.sock" "$TABLES" "$ROWS" "$DIR/prepare.log" >"$DIR/sizes"
read -r DATA INDEX <"$DIR/sizes"
mdb_stop "$DIR/busy.sock" "$MDB_PID"
PIDS=()
cp -a "$DIR/busy" "$DIR/idle"
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

# Seconds since the condition's t = 0 (T0, from date +%s.%N), and a sleep until t = $1.
now() { awk -v a="$T0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - a }'; }
sleep_until() { sleep "$(awk -v a="$T0" -v t="$1" -v n="$(date +%s.%N)" 'BEGIN { d = a + t - n; printf "%.2f", (d > 0 ? d : 0) }')"; }

# The daemon's config for condition $1 (b: limits only, c: with adapters).
daemon_config() {
    local cond=$1 name cg
    cat <<EOF
[daemon]
tick = "$TICK"
listen = "127.0.0.1:$PORT"
state_file = "$RUN/state.json"
log_format = "json"

[host]
parent = "self"
budget = "$BUDGET"

[policy]
tax_rate = $TAX
sampling_period = "1s"
EOF
    for name in busy idle; do
        cg=CG_${name^^}
        cat <<EOF

[[tenant]]
name = "$name"
cgroup = "${!cg}"
min = "$TENANT_MIN"
max = "$TENANT_MAX"
estimator = "tws"
EOF
        [[ $cond == c ]] || continue
        cat <<EOF

[tenant.app]
kind = "mariadb"
url = "unix://$DIR/$name.sock"
user = "root"
min = "$APP_MIN"
max = "$POOL"
EOF
    done
}

# Polls the daemon's API once a second into $RUN/status.jsonl: t, the host and the tenants.
poll_status() {
    local host tenants
    while sleep 1; do
        host=$(curl -sf "http://127.0.0.1:$PORT/v1/host") || continue
        tenants=$(curl -sf "http://127.0.0.1:$PORT/v1/tenants") || continue
        printf '{"t":%s,"host":%s,"tenants":%s}\n' "$(now)" "$host" "$tenants" >>"$RUN/status.jsonl"
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
# The daemon's JSON log lines of event $1 for tenant $2 (its keys are sorted, its JSON compact).
events() { grep -F "\"event\":\"$1\"" "$RUN/daemon.log" | grep -F "\"tenant\":\"$2\"" || true; }
# Pool resizes for tenant $1: its agent's answers, and the done ones among them.
resizes() { events agent_answered "$1" | awk '{ n++ } /"status":"done"/ { d++ } END { printf "%d %d\n", n, d }'; }
limit_moves() { events limit "$1" | wc -l; }

declare -A ROW WOKEN
run_condition() { # COND ROUND
    local cond=$1 round=$2 tag=$1$2 sb_busy sb_idle busy_ok=1 idle_ok=1
    RUN=$DIR/$tag
    mkdir -p "$RUN"
    case $cond in
        a) echo "== ($tag) static limits $STATIC each from t = $T_DAEMON s, no memtide" ;;
        b) echo "== ($tag) memtide from t = $T_DAEMON s, budget $BUDGET, limits only" ;;
        c) echo "== ($tag) memtide from t = $T_DAEMON s, budget $BUDGET, [tenant.app] mariadb adapters" ;;
    esac
    new_cgroup "$tag-busy"
    CG_BUSY=$CG
    new_cgroup "$tag-idle"
    CG_IDLE=$CG
    mdb_start "$DIR/busy" "$DIR/busy.sock" "$POOL" "$CG_BUSY"
    PID_BUSY=$MDB_PID
    PIDS+=("$PID_BUSY")
    mdb_start "$DIR/idle" "$DIR/idle.sock" "$POOL" "$CG_IDLE"
    PID_IDLE=$MDB_PID
    PIDS+=("$PID_IDLE")
    mdb_warm "$DIR/busy.sock" "$TABLES" &
    local warm=$!
    mdb_warm "$DIR/idle.sock" "$TABLES"
    wait "$warm"
    local pool0
    pool0=$(mdb_sql "$DIR/busy.sock" 'SELECT @@innodb_buffer_pool_size')
    echo "   warmed: usage $(mib "$(cgfile "$CG_BUSY" "$USAGE")") + $(mib "$(cgfile "$CG_IDLE" "$USAGE")") MiB, pools $(mib "$pool0") MiB"

    T0=$(date +%s.%N)
    mdb_sysbench "$DIR/busy.sock" "$TABLES" "$ROWS" --threads="$THREADS" --time="$T_END" \
        --report-interval=10 --rand-seed="$SEED" run >"$RUN/busy.out" 2>&1 &
    sb_busy=$!
    PIDS+=("$sb_busy")
    sleep_until "$T_DAEMON"
    local mf_busy0 mf_idle0 mf_busy_w mf_idle_w
    mf_busy0=$(majfaults "$CG_BUSY") mf_idle0=$(majfaults "$CG_IDLE")
    if [[ $cond == a ]]; then
        squeeze "$CG_BUSY" "$(bytes "$STATIC")" &
        local sq=$!
        squeeze "$CG_IDLE" "$(bytes "$STATIC")"
        wait "$sq"
        echo "   t = $(now) s: limited to $(mib "$(cgfile "$CG_BUSY" "$LIMIT")") + $(mib "$(cgfile "$CG_IDLE" "$LIMIT")") MiB"
    else
        PORT=$(free_port)
        daemon_config "$cond" >"$RUN/memtide.toml"
        "$TARGET_DIR/memtide" daemon --config "$RUN/memtide.toml" 2>"$RUN/daemon.log" &
        DAEMON_PID=$!
        poll_status &
        POLLER=$!
        disown "$POLLER" # killed at the end: no job notice
        PIDS+=("$POLLER")
        echo "   t = $(now) s: memtide started"
    fi
    sleep_until "$T_WAKE"
    mf_busy_w=$(majfaults "$CG_BUSY") mf_idle_w=$(majfaults "$CG_IDLE")
    local zram_wake
    zram_wake=$(zram_ram)
    mdb_sysbench "$DIR/idle.sock" "$TABLES" "$ROWS" --threads="$THREADS" --time="$((T_END - T_WAKE))" \
        --report-interval=10 --rand-seed="$((SEED + 1))" run >"$RUN/idle.out" 2>&1 &
    sb_idle=$!
    PIDS+=("$sb_idle")
    echo "   t = $(now) s: the idle database woken"
    wait "$sb_busy" || busy_ok=0
    wait "$sb_idle" || idle_ok=0
    echo "   t = $(now) s: done (sysbench exit: busy $busy_ok, woken $idle_ok; 1 is success)"

    local swap_busy swap_idle end_busy end_idle exit_busy exit_idle ooms alive=1 rb ri lb li
    swap_busy=$(swap_of "$CG_BUSY")
    swap_idle=$(swap_of "$CG_IDLE")
    local mf_busy mf_idle zram_end
    mf_busy=$(majfaults "$CG_BUSY") mf_idle=$(majfaults "$CG_IDLE")
    zram_end=$(zram_ram)
    end_busy=$(mdb_sql "$DIR/busy.sock" 'SELECT @@innodb_buffer_pool_size' || echo 0)
    end_idle=$(mdb_sql "$DIR/idle.sock" 'SELECT @@innodb_buffer_pool_size' || echo 0)
    exit_busy=$end_busy exit_idle=$end_idle
    rb="- -" ri="- -" lb=- li=-
    if [[ $cond != a ]]; then
        stop_daemon
        kill -KILL "$POLLER" 2>/dev/null || true
        sleep 1 # an adapter's last resize, if it restores the pool at exit
        exit_busy=$(mdb_sql "$DIR/busy.sock" 'SELECT @@innodb_buffer_pool_size' || echo 0)
        exit_idle=$(mdb_sql "$DIR/idle.sock" 'SELECT @@innodb_buffer_pool_size' || echo 0)
        rb=$(resizes busy) ri=$(resizes idle) lb=$(limit_moves busy) li=$(limit_moves idle)
        echo "   daemon exit $DAEMON_STATUS; limits after it $(cgfile "$CG_BUSY" "$LIMIT") / $(cgfile "$CG_IDLE" "$LIMIT")"
        result "$tag" "daemon_exit=$DAEMON_STATUS" "taken_over=$(grep -c 'taken over' "$RUN/daemon.log" || true)"
    fi
    ooms=$(($(oom_kills "$CG_BUSY") + $(oom_kills "$CG_IDLE")))
    if ! kill -0 "$PID_BUSY" 2>/dev/null || ! kill -0 "$PID_IDLE" 2>/dev/null; then alive=0; fi
    result "$tag" "condition=$cond" "t_daemon=$T_DAEMON" "t_wake=$T_WAKE" "t_end=$T_END" \
        "busy_windows=$(windows_csv "$RUN/busy.out")" "woken_windows=$(windows_csv "$RUN/idle.out")" \
        "busy_tps=$(tps_of "$RUN/busy.out")" "woken_tps=$(tps_of "$RUN/idle.out")" \
        "busy_ok=$busy_ok" "woken_ok=$idle_ok" "servers_alive=$alive" \
        "swap_busy_bytes=$swap_busy" "swap_idle_bytes=$swap_idle" "pool_start_bytes=$pool0" \
        "swapins_busy=$((mf_busy - mf_busy0))" "swapins_idle=$((mf_idle - mf_idle0))" \
        "swapins_busy_woken=$((mf_busy - mf_busy_w))" "swapins_idle_woken=$((mf_idle - mf_idle_w))" \
        "zram_ram_wake_bytes=$zram_wake" "zram_ram_end_bytes=$zram_end" \
        "pool_busy_end_bytes=$end_busy" "pool_idle_end_bytes=$end_idle" \
        "pool_busy_exit_bytes=$exit_busy" "pool_idle_exit_bytes=$exit_idle" \
        "resizes_busy=${rb#* }" "resizes_idle=${ri#* }" "answers_busy=${rb% *}" "answers_idle=${ri% *}" \
        "limit_moves_busy=$lb" "limit_moves_idle=$li" "oom_kills=$ooms"
    ROW[$tag]="| ($tag) $(case $cond in a) echo "static limits, $STATIC each, no memtide" ;; b) echo "memtide, limits only" ;; c) echo "memtide + mariadb adapters" ;; esac)"
    ROW[$tag]+=" | $(window_stats "$RUN/busy.out" 0 "$T_DAEMON") | $(window_stats "$RUN/busy.out" $((T_DAEMON + 10)) "$T_WAKE")"
    ROW[$tag]+=" | $(window_stats "$RUN/busy.out" $((T_WAKE + 10)) "$T_END") | $(mib "$swap_busy") / $(mib "$swap_idle") MiB"
    ROW[$tag]+=" | $(mib $(((mf_busy - mf_busy0) * 4096))) / $(mib $(((mf_idle - mf_idle0) * 4096))) MiB"
    ROW[$tag]+=" | $(mib "$zram_wake") / $(mib "$zram_end") MiB"
    ROW[$tag]+=" | $(mib "$end_busy") / $(mib "$end_idle"); $(mib "$exit_busy") / $(mib "$exit_idle") after exit"
    ROW[$tag]+=" | ${rb#* } / ${ri#* } | $ooms |"
    WOKEN[$tag]="| ($tag) | $(tps_of "$RUN/idle.out") | $(window_stats "$RUN/idle.out" 0 $((T_END - T_WAKE))) | $(tps_windows "$RUN/idle.out" | awk 'NR == 1 { printf "%.0f", $2 }') |"

    mdb_stop "$DIR/busy.sock" "$PID_BUSY"
    mdb_stop "$DIR/idle.sock" "$PID_IDLE"
    kill_servers
    remove_cgroup "$ROOT$CG_BUSY"
    remove_cgroup "$ROOT$CG_IDLE"
}

TAGS=()
for round in $(seq "$ROUNDS"); do
    for cond in $CONDITIONS; do
        run_condition "$cond" "$round"
        TAGS+=("$cond$round")
    done
done

echo
echo "Two MariaDB servers, $TABLES x $ROWS rows ($(mib "$DATA") MiB clustered) each, pools $POOL, $THREADS threads, budget $BUDGET, tws, tax $TAX; busy from 0 s, memtide (or the limits) from $T_DAEMON s, the idle one woken at $T_WAKE s, end $T_END s. Busy database TPS per 10-s window, min–max (median):"
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
