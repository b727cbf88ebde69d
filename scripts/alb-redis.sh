#!/usr/bin/env bash
# alb-redis.sh: ALB Fig. 1's three setups on Redis under redis-benchmark GETs over a keyspace
# larger than the small maxmemory, each with the same machine memory:
#   (a) configured: maxmemory SMALL, allkeys-lru, no limit (its peak cgroup usage is the memory
#       B the other two get);
#   (b) squeezed:   maxmemory BIG, loaded, then the cgroup limited to B with zram swap;
#   (c) ballooned:  maxmemory BIG, loaded, then `memtide daemon` with budget B and
#       [tenant.app] kind = "redis", which lowers maxmemory through memtide-adapter (Redis
#       evicts by LRU) before the limit follows.
# The three servers then run side by side, measured in ROUNDS interleaved windows each; prints
# the median GETs/s and p99 latency and the hit ratio (keyspace_hits / (hits + misses)).
# (a) and (c) drop keys: their misses are cheap nil replies here, where a real cache would
# send them to its backend; the hit ratio column says how many there were.
#
# Usage: scripts/alb-redis.sh       (as root, from the repository, after
#                                    cargo build --release -p memtide-cli -p memtide-adapter)
# Environment: KEYS (200000 values of 1 KiB of random text, ~220 MiB in Redis), SMALL (64M),
#   BIG (256M), REQUESTS per setup (1000000, in ROUNDS=3 windows), CLIENTS (16), ZRAM (2G), TARGET_DIR
#   (target/release), KEEP=1 keeps the temporary directory.
# redis-server is pinned to CPU 0 and redis-benchmark to CPU 1 (taskset). Loopback only; the
# servers, the daemon, the cgroups made under this shell's own and the zram device are removed
# at exit.
set -euo pipefail

KEYS=${KEYS:-200000}
SMALL=${SMALL:-64M}
BIG=${BIG:-256M}
REQUESTS=${REQUESTS:-1000000}
CLIENTS=${CLIENTS:-16}
ALB=alb-redis
REDIS_PIDS=()
kill_servers() { for pid in "${REDIS_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done; }
# shellcheck source=scripts/alb-common.sh
source "$(dirname "$0")/alb-common.sh"
for tool in redis-server redis-cli redis-benchmark taskset python3; do
    command -v "$tool" >/dev/null || die "$tool is missing"
done
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=
cli() { redis-cli -p "$PORT" "$@"; }
info() { cli INFO "$1" | tr -d '\r' | awk -F: -v k="$2" '$1 == k { print $2 }'; }

# Starts redis-server in cgroup CG with maxmemory MAXMEM (allkeys-lru) and loads KEYS keys
# key:000000000000.. (redis-benchmark's -r keyspace), 1 KiB of random letters and digits each.
start_redis() { # MAXMEM CG
    PORT=$(free_port)
    sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$ROOT$2" \
        taskset -c 0 redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$DIR" --maxmemory "$(bytes "$1")" --maxmemory-policy allkeys-lru >"$DIR/redis.log" 2>&1 &
    REDIS_PIDS+=($!)
    for _ in $(seq 100); do cli PING 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    cli PING | grep -q PONG || { cat "$DIR/redis.log" >&2; die "redis-server did not answer"; }
    python3 - "$KEYS" <<'EOF' | cli --pipe >/dev/null
import random, string, sys
keys = int(sys.argv[1])
rnd = random.Random(1)
alphabet = (string.ascii_letters + string.digits).encode()
out = sys.stdout.buffer
for i in range(keys):
    key = b"key:%012d" % i
    value = bytes(rnd.choices(alphabet, k=1024))
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1024\r\n%s\r\n" % (len(key), key, value))
EOF
}
# GETs over the keyspace: $1 requests; CSV to $2.
bench() { taskset -c 1 redis-benchmark -p "$PORT" -t get -r "$KEYS" -c "$CLIENTS" -n "$1" --csv >"$2"; }
csv() { # column $2 of the GET line of CSV $1
    awk -F, -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); c[$i] = i } }
        /^"GET"/ { v = $c[col]; gsub(/"/, "", v); print v }' "$1"
}

echo "== redis $(redis-server --version | awk '{ print $3 }'); $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); kernel $(uname -r); cgroup v$V"
MEMTIDE_ZRAM_STATE=$ZRAM_STATE bash "$REPO/scripts/zram-swap.sh" up "$ZRAM" >/dev/null
echo "== zram swap $ZRAM: $(awk 'NR > 1 { print $1 }' /proc/swaps | tr '\n' ' ')"

declare -A PORTS CGS
# setup NAME: its server's port and cgroup become current.
use() { PORT=${PORTS[$1]} CG=${CGS[$1]}; }

echo "== (a) configured: maxmemory $SMALL, no limit"
new_cgroup configured
start_redis "$SMALL" "$CG"
PORTS[configured]=$PORT CGS[configured]=$CG
bench $((REQUESTS / 4)) "$DIR/configured-warm.csv"
B=$(cgfile "$CG" "$PEAK")
B=$(( (B + MIB - 1) / MIB * MIB ))
echo "   peak usage $(mib "$B") MiB: the memory (b) and (c) get"

echo "== (b) squeezed: maxmemory $BIG, loaded, then the cgroup limited to $(mib "$B") MiB (zram swap)"
new_cgroup squeezed
start_redis "$BIG" "$CG"
PORTS[squeezed]=$PORT CGS[squeezed]=$CG
echo "   loaded: usage $(mib "$(cgfile "$CG" "$USAGE")") MiB, used_memory $(mib "$(info memory used_memory)") MiB, keys $(cli DBSIZE)"
squeeze "$CG" "$B"
bench $((REQUESTS / 4)) "$DIR/squeezed-warm.csv"

echo "== (c) ballooned: maxmemory $BIG, loaded, then memtide with budget $(mib "$B") + $(mib "$ADAPTER") MiB (the adapter) through memtide-adapter"
new_cgroup ballooned
start_redis "$BIG" "$CG"
echo "   loaded: usage $(mib "$(cgfile "$CG" "$USAGE")") MiB"
cat >"$DIR/memtide.toml" <<EOF
[daemon]
tick = "250ms"
listen = "127.0.0.1:$(free_port)"
state_file = "$DIR/state.json"

[host]
parent = "self"
budget = $((B + ADAPTER))

[policy]
sampling_period = "1s"

[rails]
floor_margin = "16M"

[[tenant]]
name = "cache"
cgroup = "$CG"
min = "16M"
max = "4G"

[tenant.app]
kind = "redis"
url = "redis://127.0.0.1:$PORT"
min = "$SMALL"
max = "$BIG"
EOF
start_daemon "$DIR/memtide.toml" "$DIR/daemon.log"
t0=$SECONDS
until [[ $(cgfile "$CG" "$USAGE") -le $((B + ADAPTER)) ]] && grep -q 'agent_answered.*status=done' "$DIR/daemon.log"; do
    ((SECONDS - t0 < 180)) || { cat "$DIR/daemon.log" >&2; die "memtide did not bring Redis under $(mib "$B") MiB within 180 s"; }
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$DIR/daemon.log" >&2; die "the daemon exited"; }
    sleep 0.5
done
echo "   shrunk in $((SECONDS - t0)) s: maxmemory $(mib "$(cli CONFIG GET maxmemory | tail -1)") MiB, usage $(mib "$(cgfile "$CG" "$USAGE")") MiB, limit $(mib "$(cgfile "$CG" "$LIMIT")") MiB"
grep -E 'agent_answered' "$DIR/daemon.log" | head -5 | sed 's/^/   /'
PORTS[ballooned]=$PORT CGS[ballooned]=$CG
bench $((REQUESTS / 4)) "$DIR/ballooned-warm.csv"

# The three servers live side by side and are measured in interleaved windows, so that what
# else the machine runs weighs on each alike; each figure is the median of its windows.
ROUNDS=${ROUNDS:-3}
declare -A RPS P99 HIT NOTE HITS MISSES
echo "== $ROUNDS rounds of $((REQUESTS / ROUNDS)) GETs on each"
for r in $(seq "$ROUNDS"); do
    for s in configured squeezed ballooned; do
        use "$s"
        h0=$(info stats keyspace_hits) m0=$(info stats keyspace_misses)
        bench $((REQUESTS / ROUNDS)) "$DIR/$s-$r.csv"
        h1=$(info stats keyspace_hits) m1=$(info stats keyspace_misses)
        HITS[$s]=$((${HITS[$s]:-0} + h1 - h0)) MISSES[$s]=$((${MISSES[$s]:-0} + m1 - m0))
        echo "   round $r $s: $(csv "$DIR/$s-$r.csv" rps) GETs/s, p99 $(csv "$DIR/$s-$r.csv" p99_latency_ms) ms"
    done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for s in configured squeezed ballooned; do
    use "$s"
    RPS[$s]=$(for r in $(seq "$ROUNDS"); do csv "$DIR/$s-$r.csv" rps; done | median)
    P99[$s]=$(for r in $(seq "$ROUNDS"); do csv "$DIR/$s-$r.csv" p99_latency_ms; done | median)
    HIT[$s]=$(awk -v h="${HITS[$s]}" -v m="${MISSES[$s]}" 'BEGIN { printf "%.2f", h / (h + m) }')
    NOTE[$s]="maxmemory $(mib "$(cli CONFIG GET maxmemory | tail -1)") MiB, keys $(cli DBSIZE), usage $(mib "$(cgfile "$CG" "$USAGE")") MiB, swap $(mib "$(swap_of "$CG")") MiB, OOM kills $(oom_kills "$CG")"
done
NOTE[squeezed]+="; zram holds $(mib "$(zram_ram)") MiB of RAM for (b) and (c)"
if grep -q 'taken over' "$DIR/daemon.log"; then NOTE[ballooned]+="; TAKEN OVER: $(grep -m1 'taken over' "$DIR/daemon.log")"; fi
stop_daemon
echo
echo "ALB Fig. 1 on Redis: $KEYS keys of 1 KiB, $ROUNDS windows of $((REQUESTS / ROUNDS)) GETs from $CLIENTS clients on each (medians), memory $(mib "$B") MiB"
printf '%-12s %-10s %-8s %-6s %-8s %s\n' setup GETs/s p99_ms hits vs_a notes
for s in configured squeezed ballooned; do
    printf '%-12s %-10s %-8s %-6s %-8s %s\n' "$s" "${RPS[$s]}" "${P99[$s]}" "${HIT[$s]}" \
        "$(awk -v x="${RPS[$s]}" -v a="${RPS[configured]}" 'BEGIN { printf "%.2f", x / a }')" "${NOTE[$s]}"
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
