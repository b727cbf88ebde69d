#!/usr/bin/env bash
# Remakes docs/screenshots/: runs every shipped scenario (each variant of those that have
# variants, and their comparison, index.html; not the benchmarks bench-16vm-1h and density-*,
# which `memtide bench` runs (density's static and kernel policies run only there); the cache
# scenarios of scenarios/cache/ through `memtide cache partition`) and photographs its
# report.html in headless Chromium, 1200 px wide and the page's full height, colours reduced so
# a PNG stays small.
#
# Then the daemon's dashboard (as root; see the end).
#
# Needs: a release build's memtide (built here if missing), Debian's chromium and ImageMagick
# (apt-get install chromium imagemagick). Usage: scripts/screenshots.sh [SCENARIO ...]
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in chromium convert; do
  command -v "$tool" >/dev/null || { echo "screenshots: $tool not found (apt-get install chromium imagemagick)" >&2; exit 2; }
done
memtide=target/release/memtide
[ -x "$memtide" ] || cargo build --release --quiet
dest=docs/screenshots
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  scenarios=()
  for f in scenarios/*.toml scenarios/cache/*.toml; do
    case "$(basename "$f")" in
      bench-16vm-1h.toml | density-*.toml) ;;
      *) scenarios+=("$f") ;;
    esac
  done
fi

# A window taller than any of these pages; the blank below the page is cut off.
width=1200
tall=12000

shoot() { # report.html -> png
  local html=$1 png=$2
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size="$width,$tall" \
    --screenshot="$work/full.png" "file://$html" >/dev/null 2>&1
  # The bottom of what is drawn (the page's white background trimmed away), plus a margin.
  local box bottom
  box=$(convert "$work/full.png" -trim -format '%h %Y' info:)
  bottom=$(( ${box% *} + ${box#* } + 24 ))
  convert "$work/full.png" -crop "${width}x${bottom}+0+0" +repage -colors 64 -strip "$png"
  echo "$png: $(identify -format '%wx%h' "$png"), $(( $(stat -c %s "$png") / 1024 )) KiB"
}

for f in "${scenarios[@]}"; do
  name=$(basename "$f" .toml)
  case "$f" in
    */cache/*) "$memtide" cache partition "$f" --out "$work/$name" >/dev/null ;;
    *) "$memtide" sim "$f" --out "$work/$name" >/dev/null ;;
  esac
  if [ -f "$work/$name/report.html" ]; then
    shoot "$work/$name/report.html" "$dest/$name.png"
  else
    for dir in "$work/$name"/*/; do
      variant=$(basename "$dir")
      shoot "$dir/report.html" "$dest/$name-$variant.png"
    done
    # The variants compared on the headline's figure.
    shoot "$work/$name/index.html" "$dest/$name-index.png"
  fi
done

# The daemon's live dashboard: its linux test runs a daemon beside two real tenants for 90 s
# and keeps its screenshot (1400 px). Needs root and a memory cgroup; without them, said.
if [ $# -eq 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    MEMTIDE_SCREENSHOTS="$PWD/$dest" cargo test --release --quiet -p memtide-cli --test linux \
      -- dashboard:: >/dev/null
    convert "$dest/dashboard.png" -colors 64 -strip "$dest/dashboard.png"
    echo "$dest/dashboard.png: $(identify -format '%wx%h' "$dest/dashboard.png")"
  else
    echo "screenshots: the dashboard needs root (a daemon on real cgroups); not remade" >&2
  fi
fi
