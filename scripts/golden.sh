#!/usr/bin/env bash
# golden.sh: proves a refactor changed no behaviour on the simulated host. It runs every
# shipped scenario (every variant of those that define variants) with one memtide binary and
# keeps their summary.json and timeline.csv, then compares two such sets byte for byte.
#
#   golden.sh run DIR [BINARY]   run every scenarios/*.toml into DIR/<scenario>[/<variant>]
#                                (BINARY: default target/release/memtide, built first)
#   golden.sh diff A B           compare two runs' summary.json and timeline.csv files;
#                                exit 1 and name each file that differs
#   golden.sh base REV DIR       build REV in a temporary worktree and run it into DIR
#
# A typical check: `golden.sh base main /tmp/before && golden.sh run /tmp/after &&
# golden.sh diff /tmp/before /tmp/after`. report.html is kept for a look but not compared.
# Bad usage exits 2.
set -euo pipefail

readonly PROG=golden.sh
readonly USAGE="usage: $PROG run DIR [BINARY] | diff A B | base REV DIR"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
readonly ROOT

die() { # status message
  echo "$PROG: $2" >&2
  exit "$1"
}

run() { # dir [binary]
  local dir=$1 bin=${2:-}
  if [ -z "$bin" ]; then
    (cd "$ROOT" && cargo build --release -q -p memtide-cli)
    bin=$ROOT/target/release/memtide
  fi
  [ -x "$bin" ] || die 2 "no memtide binary at $bin"
  mkdir -p "$dir"
  local s name failed=0
  for s in "$ROOT"/scenarios/*.toml; do
    name=$(basename "$s" .toml)
    rm -rf "${dir:?}/$name"
    if ! "$bin" sim "$s" --out "$dir/$name" >/dev/null 2>"$dir/$name.err"; then
      echo "$PROG: $name failed: $(tail -1 "$dir/$name.err")" >&2
      failed=1
    else
      rm -f "$dir/$name.err"
    fi
  done
  [ "$failed" = 0 ] || die 1 "some scenarios failed"
  echo "$PROG: $(find "$dir" -name summary.json | wc -l) runs in $dir"
}

compare() { # a b
  local a=$1 b=$2 f differ=0 count=0
  [ -d "$a" ] || die 2 "no run at $a"
  [ -d "$b" ] || die 2 "no run at $b"
  while IFS= read -r f; do
    count=$((count + 1))
    if [ ! -f "$b/$f" ]; then
      echo "missing in $b: $f"
      differ=1
    elif ! cmp -s "$a/$f" "$b/$f"; then
      echo "differs: $f"
      differ=1
    fi
  done < <(cd "$a" && find . \( -name summary.json -o -name timeline.csv \) | sort)
  while IFS= read -r f; do
    [ -f "$a/$f" ] || { echo "missing in $a: $f"; differ=1; }
  done < <(cd "$b" && find . \( -name summary.json -o -name timeline.csv \) | sort)
  [ "$count" -gt 0 ] || die 2 "no summary.json or timeline.csv under $a"
  [ "$differ" = 0 ] || die 1 "outputs differ"
  echo "$PROG: $count files identical"
}

base() { # rev dir
  local rev=$1 dir=$2 tree
  tree=$(mktemp -d)
  trap 'git -C "$ROOT" worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
  git -C "$ROOT" worktree add --detach "$tree" "$rev" >/dev/null
  (cd "$tree" && cargo build --release -q -p memtide-cli)
  # The scenarios are this tree's: a scenario added since REV is run by both.
  run "$dir" "$tree/target/release/memtide"
}

[ $# -ge 1 ] || die 2 "$USAGE"
case $1 in
  run) [ $# -ge 2 ] && [ $# -le 3 ] || die 2 "$USAGE"; run "$2" "${3:-}" ;;
  diff) [ $# -eq 3 ] || die 2 "$USAGE"; compare "$2" "$3" ;;
  base) [ $# -eq 3 ] || die 2 "$USAGE"; base "$2" "$3" ;;
  *) die 2 "$USAGE" ;;
esac
