# guest-overlay.sh: sourced by the benchmarks that boot scripts/guest-image.sh's guest with a
# second initramfs archive of their own (bench-senpai.sh, density-guest.sh): the functions that
# fill that archive's tree with host programs and what they need, and pack it.
#
#   overlay_python ROOT          this host's /usr/bin/python3.11 (Debian 12's, as the guest's
#                                libraries are this host's) as ROOT/usr/bin/python3, with every
#                                top-level module of its standard library and the packages
#                                encodings, collections, re and importlib (8 MB; Senpai's
#                                argparse alone reaches gettext and locale), so sys.prefix (/usr,
#                                from the binary's place) holds lib/python3.11/os.py
#   overlay_libs ROOT BINARY...  every shared library ldd names for the BINARYs, at its own path
#   overlay_users ROOT           /etc/passwd and /etc/group naming root (servers that look
#                                their user up, such as memcached -u root)
#   overlay_pack ROOT BASE OUT   OUT = BASE (the guest image's initramfs) then ROOT's archive:
#                                the kernel unpacks both, the second over the first
# Needs cpio, gzip and ldd.

overlay_python() {
  local root=$1 p
  mkdir -p "$root/usr/bin" "$root/usr/lib/python3.11/lib-dynload"
  install -m 0755 /usr/bin/python3.11 "$root/usr/bin/python3"
  cp /usr/lib/python3.11/*.py "$root/usr/lib/python3.11/"
  for p in encodings collections re importlib; do
    cp -r "/usr/lib/python3.11/$p" "$root/usr/lib/python3.11/"
  done
  find "$root/usr/lib/python3.11" -name __pycache__ -prune -exec rm -rf {} +
  overlay_libs "$root" /usr/bin/python3.11
}

overlay_libs() {
  local root=$1 lib
  shift
  for lib in $(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }
      $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}

overlay_users() {
  local root=$1
  mkdir -p "$root/etc"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
}

overlay_pack() {
  local root=$1 base=$2 out=$3
  (cd "$root" && find . -mindepth 1 | cpio --quiet -o -H newc -R 0:0) | gzip -1 >"$out.overlay"
  cat "$base" "$out.overlay" >"$out"
  rm -f "$out.overlay"
}
