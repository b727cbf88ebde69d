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
# A scenario with variants is run one variant at a time (`--variant`): a variant `memtide
# sim` refuses because it runs without memtide's controller (density-*.toml's `static` and
# `kernel`, run only by `memtide bench density --sim`) is skipped with a note; any other
# failure fails the run. Bad usage exits 2.
set -euo pipefail

readonly PROG=golden.sh
readonly USAGE="usage: $PROG run DIR [BINARY] | diff A B | base REV DIR"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
readonly ROOT

die() { # status message
  echo "$PROG: $2" >&2
  exit "$1"
}

variants() { # scenario: the names of its [[variants]], one a line
  awk '/^\[/ { in_v = ($0 ~ /^\[\[variants\]\]/) }
       in_v && /^name *=/ { gsub(/^name *= *"|".*$/, ""); print }' "$1"
}

one() { # binary scenario dir name [variant]: runs it into dir/name[/variant]
  local bin=$1 s=$2 dir=$3 name=$4 v=${5:-} err
  err=$dir/$name${v:+-$v}.err
  if "$bin" sim "$s" --out "$dir/$name" ${v:+--variant "$v"} >/dev/null 2>"$err"; then
    rm -f "$err"
  elif [ -n "$v" ] && grep -q "runs without memtide's controller" "$err"; then
    echo "$PROG: note: $name variant $v skipped: memtide sim refuses it (memtide bench density --sim runs it)" >&2
    rm -f "$err"
  else
    echo "$PROG: $name${v:+ [$v]} failed: $(tail -1 "$err")" >&2
    return 1
  fi
}

run() { # dir [binary]
  local dir=$1 bin=${2:-}
  if [ -z "$bin" ]; then
    (cd "$ROOT" && cargo build --release -q -p memtide-cli)
    bin=$ROOT/target/release/memtide
  fi
  [ -x "$bin" ] || die 2 "no memtide binary at $bin"
  mkdir -p "$dir"
  local s name v variants failed=0
  for s in "$ROOT"/scenarios/*.toml; do
    name=$(basename "$s" .toml)
    rm -rf "${dir:?}/$name"
    variants=$(variants "$s")
    if [ -z "$variants" ]; then
      one "$bin" "$s" "$dir" "$name" || failed=1
      continue
    fi
    for v in $variants; do
      one "$bin" "$s" "$dir" "$name" "$v" || failed=1
    done
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
