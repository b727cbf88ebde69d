#!/usr/bin/env bash
# long-functions.sh: lists the non-test Rust functions longer than LIMIT lines (default 120),
# longest first, as "LINES FILE:LINE NAME". Skips tests/ and benches/ folders, tests.rs files
# and everything from a file's top-level `#[cfg(test)]` module on. Counts from the `fn` line
# to its closing brace (braces in one-line strings, chars and // comments ignored).
#
#   usage: long-functions.sh [LIMIT] [PATH...]    (PATH: a folder or a .rs file; default crates)
#
# Exit 0 whether or not long functions are found; bad usage exits 2.
set -euo pipefail
readonly USAGE="usage: long-functions.sh [LIMIT] [PATH...]"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
limit=120
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  limit=$1
  shift
fi
for d in "$@"; do
  [ -e "$d" ] || { echo "long-functions.sh: no file or folder $d; $USAGE" >&2; exit 2; }
done
[ $# -gt 0 ] || set -- "$ROOT/crates"
exec python3 - "$limit" "$@" <<'PY'
import os, re, sys

limit, dirs = int(sys.argv[1]), sys.argv[2:]
FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"[^"]*"\s+)?fn\s+(\w+)')
TEST_MOD = re.compile(r'^(pub\s+)?mod\s+\w+')
NOISE = re.compile(r'//.*$|r#*"(?:.|\n)*?"#*|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'')

def braces(line):
    """The line's net brace depth change, ignoring strings, chars and line comments."""
    code = NOISE.sub("", line)
    return code.count("{") - code.count("}")

def rust_files(top):
    """`top` itself when a file, else the non-test .rs files under it."""
    if os.path.isfile(top):
        yield top
        return
    for root, subdirs, files in os.walk(top):
        subdirs[:] = [s for s in subdirs if s not in ("tests", "benches", "target")]
        for name in files:
            if name.endswith(".rs") and name != "tests.rs":
                yield os.path.join(root, name)

def non_test_lines(path):
    """The file's lines up to its top-level `#[cfg(test)]` module."""
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, l in enumerate(lines[:-1]):
        if l == "#[cfg(test)]" and TEST_MOD.match(lines[i + 1]):
            return lines[:i]
    return lines

def body_end(lines, start):
    """The index of the line closing the function opened at `start`, or None (no body)."""
    depth, opened = 0, False
    for j in range(start, len(lines)):
        code = NOISE.sub("", lines[j])
        depth += braces(lines[j])
        opened = opened or "{" in code
        if opened and depth <= 0:
            return j
        if not opened and code.rstrip().endswith(";"):
            return None
    return None

found = []
for top in dirs:
    for path in rust_files(top):
        lines = non_test_lines(path)
        for i, line in enumerate(lines):
            m = FN.match(line)
            end = body_end(lines, i) if m else None
            if end is not None and end - i + 1 > limit:
                found.append((end - i + 1, os.path.relpath(path), i + 1, m.group(7)))
for n, path, line, fn in sorted(found, key=lambda f: (-f[0], f[1], f[2])):
    print(f"{n:5} {path}:{line} {fn}")
PY
