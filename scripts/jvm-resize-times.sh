#!/bin/sh
# jvm-resize-times.sh: measures the JVM adapter's resize times. For Shenandoah, ZGC and G1
# (OpenJDK 17), a heap grown by 0.5, 1 and 2 GiB around a 128 MiB live set is shrunk by that
# much through memtide-adapter and memtide's real balloon server and hub, then grown back; it
# prints a table (docs/jvm-adapter-figures.md). The work is the ignored test `resize_times` in
# crates/adapters/tests/jvm.rs.
#
# Usage: scripts/jvm-resize-times.sh [collectors] [sizes in GiB] [repeat]
#   scripts/jvm-resize-times.sh                       # all three, 0.5,1,2 GiB, once
#   scripts/jvm-resize-times.sh shenandoah 1 5        # Shenandoah's 1 GiB shrink, five times
# Needs root (it makes a memory cgroup beneath its own, cgroup v1), java, javac and jcmd.
# Columns: the committed heap before and after; "shrink done": target sent -> the adapter's
# done; "cgroup -50%/-90%": target sent -> the cgroup's usage down by half / 90% of what the
# heap gave up; "grow done": target sent -> done (the flag set; the heap grows on demand).
set -eu
cd "$(dirname "$0")/.."
export JVM_TIMES_COLLECTORS="${1:-shenandoah,zgc,g1}"
export JVM_TIMES_SIZES="${2:-0.5,1,2}"
export JVM_TIMES_REPEAT="${3:-1}"
export MEMTIDE_REQUIRE_LINUX=1
uptime
cargo test --release -p memtide-adapter --test jvm -- --ignored --nocapture --exact resize_times 2>/dev/null |
    sed -n '/^collector/,$p' | grep -v '^test \|^$'
