#!/usr/bin/env bash
# deb.sh: builds memtide's Debian package from this repository with dpkg-deb, without network.
#
#   deb.sh [--no-build] [OUT]
#
# OUT is the .deb to write: the argument, else target/memtide_VERSION_amd64.deb (under
# $CARGO_TARGET_DIR when set); VERSION is the workspace's (Cargo.toml). It holds
#   /usr/bin/memtide, /usr/bin/memtide-adapter       stripped release builds
#   /lib/systemd/system/memtide.service              packaging/memtide.service
#   /etc/memtide/memtide.toml                        packaging/memtide.toml, a conffile
#   /usr/share/doc/memtide/                          README.md, linux.md, configuration.md,
#                                                    apps.md, security.md, copyright
# and maintainer scripts doing what debhelper's dh_installsystemd writes: postinst enables the
# unit through deb-systemd-helper and (re)starts it with deb-systemd-invoke when systemd runs
# (as shipped the config manages nothing, so a start changes no limit), prerm stops it on
# removal, postrm masks it on remove, purges its state on purge, and reloads systemd.
# Depends comes from dpkg-shlibdeps (dpkg-dev) when installed, else from the binaries' NEEDED
# libraries' packages (dpkg -S) with libc6 at least the newest GLIBC_ symbol version they use.
#
# The binaries are built with `cargo build --release --locked --offline` (run
# `cargo fetch --locked` once with network first); --no-build packages the ones already in
# target/release. Needs cargo, dpkg-deb, dpkg, strip, readelf, objdump, gzip.
#
# Errors: one line on stderr and a non-zero exit (2 for bad usage). Progress goes to stderr;
# stdout has only the .deb's path.
set -euo pipefail

readonly PROG=deb.sh
readonly USAGE="usage: $PROG [--no-build] [OUT]"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
readonly REPO=${HERE%/scripts}

die() { # status message
    echo "$PROG: $2" >&2
    exit "$1"
}
note() { echo "$PROG: $*" >&2; }

build=1
out=""
while [[ $# -gt 0 ]]; do
    case $1 in
    --no-build) build=0 ;;
    -h | --help)
        echo "$USAGE"
        exit 0
        ;;
    -*) die 2 "unknown option $1; $USAGE" ;;
    *)
        [[ -z $out ]] || die 2 "one OUT only; $USAGE"
        out=$1
        ;;
    esac
    shift
done

for tool in cargo dpkg-deb dpkg strip readelf objdump gzip; do
    command -v "$tool" >/dev/null 2>&1 || die 1 "$tool is missing"
done

version=$(awk '/^\[workspace.package\]/ { w = 1; next } /^\[/ { w = 0 }
    w && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$REPO/Cargo.toml")
[[ -n $version ]] || die 1 "no [workspace.package] version in $REPO/Cargo.toml"
[[ $(dpkg --print-architecture) == amd64 ]] || die 1 "this builds amd64 packages on amd64 only"
target=${CARGO_TARGET_DIR:-$REPO/target}
out=${out:-$target/memtide_${version}_amd64.deb}

if [[ $build == 1 ]]; then
    note "building memtide and memtide-adapter (release, offline)"
    (cd "$REPO" && cargo build --release --locked --offline -p memtide-cli -p memtide-adapter >&2) ||
        die 1 "cargo build failed (offline: run 'cargo fetch --locked' first)"
fi
for bin in memtide memtide-adapter; do
    [[ -x $target/release/$bin ]] || die 1 "$target/release/$bin is missing (build it first)"
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/memtide-deb.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
root=$scratch/root
umask 022
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/memtide" \
    "$root/usr/share/doc/memtide"
for bin in memtide memtide-adapter; do
    strip -o "$root/usr/bin/$bin" "$target/release/$bin" || die 1 "cannot strip $bin"
    chmod 0755 "$root/usr/bin/$bin"
done
install -m 0644 "$REPO/packaging/memtide.service" "$root/lib/systemd/system/memtide.service"
install -m 0644 "$REPO/packaging/memtide.toml" "$root/etc/memtide/memtide.toml"
install -m 0644 "$REPO/README.md" "$root/usr/share/doc/memtide/README.md"
for doc in linux configuration apps security; do
    install -m 0644 "$REPO/docs/$doc.md" "$root/usr/share/doc/memtide/$doc.md"
done
cat >"$root/usr/share/doc/memtide/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: memtide

Files: *
License: Apache-2.0
 On Debian systems the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF

# Depends: what the binaries link against.
depends=""
if command -v dpkg-shlibdeps >/dev/null 2>&1; then
    mkdir -p "$scratch/src/debian"
    printf 'Source: memtide\n\nPackage: memtide\nArchitecture: amd64\n' \
        >"$scratch/src/debian/control"
    depends=$(cd "$scratch/src" && dpkg-shlibdeps -O "$root/usr/bin/memtide" \
        "$root/usr/bin/memtide-adapter" 2>/dev/null | sed -n 's/^shlibs:Depends=//p') ||
        depends=""
fi
if [[ -z $depends ]]; then
    glibc=$(objdump -T "$root/usr/bin/memtide" "$root/usr/bin/memtide-adapter" |
        grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
    pkgs=""
    for lib in $(readelf -dW "$root/usr/bin/memtide" "$root/usr/bin/memtide-adapter" |
        sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u); do
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ { print $NF; exit }') || true
        [[ -n $path ]] || die 1 "the binaries need $lib, which this machine lacks"
        # dpkg knows the file by the path it installed, /lib or /usr/lib (merged /usr).
        pkg=""
        for p in "$path" "$(readlink -f "$path")" "${path/#\/usr\/lib\//\/lib/}"; do
            pkg=$(dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1) || pkg=""
            [[ -z $pkg ]] || break
        done
        [[ -n $pkg ]] || die 1 "no installed package holds $path (needed by the binaries)"
        [[ " $pkgs " == *" $pkg "* ]] || pkgs="$pkgs $pkg"
    done
    for p in $pkgs; do
        if [[ $p == libc6 && -n $glibc ]]; then p="libc6 (>= $glibc)"; fi
        depends="$depends${depends:+, }$p"
    done
fi
[[ -n $depends ]] || die 1 "cannot tell which libraries the binaries need"

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: memtide
Version: $version
Architecture: amd64
Maintainer: memtide developers <memtide@localhost>
Installed-Size: $size
Depends: $depends
Recommends: systemd
Section: admin
Priority: optional
Homepage: https://github.com/memtide/memtide
Description: memory manager for consolidated servers
 memtide moves memory between the services, containers and VMs of one host
 through their memory cgroups, with ESX's min-funding revocation and idle
 memory tax, within safety rails; every limit it changes is given back at a
 clean stop. This package runs it as memtide.service.
EOF
echo /etc/memtide/memtide.toml >"$root/DEBIAN/conffiles"

cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# postinst of memtide: enable memtide.service, (re)start it where systemd runs.
set -e
case "$1" in
configure | abort-upgrade | abort-deconfigure | abort-remove)
    if command -v deb-systemd-helper >/dev/null 2>&1; then
        # Removes only a mask deb-systemd-helper made at removal.
        deb-systemd-helper unmask memtide.service >/dev/null || true
        # was-enabled is true on a first install, so a new installation is enabled.
        if deb-systemd-helper --quiet was-enabled memtide.service; then
            deb-systemd-helper enable memtide.service >/dev/null || true
        else
            deb-systemd-helper update-state memtide.service >/dev/null || true
        fi
    fi
    if [ -d /run/systemd/system ]; then
        systemctl --system daemon-reload >/dev/null || true
        if ! command -v deb-systemd-helper >/dev/null 2>&1; then
            systemctl enable memtide.service >/dev/null || true
        fi
        if [ -n "$2" ]; then action=restart; else action=start; fi
        if command -v deb-systemd-invoke >/dev/null 2>&1; then
            deb-systemd-invoke "$action" memtide.service >/dev/null || true
        else
            systemctl "$action" memtide.service >/dev/null || true
        fi
    fi
    ;;
esac
exit 0
EOF
cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# prerm of memtide: stop memtide.service before removal (it gives every tenant back its limits).
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    if command -v deb-systemd-invoke >/dev/null 2>&1; then
        deb-systemd-invoke stop memtide.service >/dev/null || true
    else
        systemctl stop memtide.service >/dev/null || true
    fi
fi
exit 0
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# postrm of memtide: mask the unit on remove (a conffile may keep it configured), forget it on
# purge, and let systemd read its units again.
set -e
if [ "$1" = remove ] && [ -x /usr/bin/deb-systemd-helper ]; then
    deb-systemd-helper mask memtide.service >/dev/null || true
fi
if [ "$1" = purge ]; then
    if [ -x /usr/bin/deb-systemd-helper ]; then
        deb-systemd-helper purge memtide.service >/dev/null || true
        deb-systemd-helper unmask memtide.service >/dev/null || true
    fi
    rm -rf /run/memtide
fi
if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

mkdir -p "$(dirname "$out")"
dpkg-deb --root-owner-group -Zxz --build "$root" "$scratch/memtide.deb" >/dev/null ||
    die 1 "dpkg-deb could not build the package"
mv -f "$scratch/memtide.deb" "$out"
note "built memtide $version ($(stat -c %s "$out") bytes), Depends: $depends"
echo "$out"
