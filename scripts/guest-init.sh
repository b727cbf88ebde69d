#!/bin/sh
# guest-init.sh: /init of memtide's QEMU test guest. scripts/guest-image.sh copies it into the
# initramfs; it runs as PID 1 under busybox sh and must never exit (with memtide.root it ends by
# exec'ing the root disk's init instead).
#
# It mounts proc, sys and devtmpfs, loads the virtio modules (virtio_ring, virtio,
# virtio_pci_modern_dev, virtio_pci_legacy_dev, virtio_pci, then virtio_balloon), sets up a zram
# swap, prints `memtide-guest: ready ...` on the console, runs the workload named on the kernel
# command line from /root, prints `memtide-guest: workload exited N`, then idles (or powers off).
#
# Kernel command line parameters (the last one of a name wins):
#   memtide.run="CMD"       the workload: a shell command line run by `sh -c` in /root (PATH
#                           has busybox's applets and /bin/memtide-toucher), for example
#                           memtide.run="memtide-toucher --active 300M --pause-ms 100" or
#                           memtide.run="sleep 5; rmmod virtio_balloon; memtide-toucher --active 300M"
#                           The kernel has no escapes: the value ends at the next double quote, so
#                           it cannot hold one; use single quotes inside it for shell quoting
#                           (memtide.run="memtide-toucher --phase '30s:active=400M,idle=100M'").
#                           The whole command line is at most 2047 bytes on x86.
#   memtide.run64=BASE64    the workload as a base64-encoded shell script (any characters, several
#                           lines); used instead of memtide.run when both are given
#   memtide.balloon=off     do not load virtio_balloon (default on; off, 0 and no are the same)
#   memtide.zram=SIZE       zram swap size, as the kernel reads it (bytes or K/M/G suffix);
#                           0 for none; default half of MemTotal
#   memtide.zram_comp=ALG   zram's compressor (lzo-rle, lzo, lz4, zstd); default the kernel's
#   memtide.disk=DEV[:mkfs] mount /dev/DEV (a virtio disk is vda) on /mnt, first making an ext2
#                           file system on it with :mkfs; for page-cache workloads (the root
#                           file system is RAM)
#   memtide.root=DEV        boot a real system instead of a workload: after the modules and zram
#                           (both stay: the swap is kept), mount /dev/DEV (ext4, e.g. vda, the
#                           image scripts/debian-guest.sh builds) read-write on /newroot, move
#                           /proc, /sys and /dev there and switch_root to its /sbin/init (systemd);
#                           memtide.disk, the shell, the workload and `ready` are then not done.
#                           If the disk cannot be mounted, the boot goes on as without it
#   memtide.init=PATH       the root disk's init for memtide.root (default /sbin/init)
#   memtide.shell=ttyS1     a command shell on that serial port (raw tty: no prompt, no echo):
#                           each line written to it is run as it arrives by one shell's `eval`
#                           (cd and variables persist; stdin is /dev/null) and its output and
#                           errors come back on the port; end a line with `; echo SOME-MARKER` to
#                           know when it is done. Default ttyS1 when QEMU gives the guest a second
#                           serial port (e.g. -serial unix:PATH,server=on,wait=off), off to disable
#   memtide.then=idle       after the workload: idle (default), poweroff, reboot or shell (an
#                           interactive shell on the console)
#
# Console markers (ttyS0), each on a line of its own:
#   memtide-guest: init kernel=REL
#   memtide-guest: error: WHAT                 (something failed; the boot goes on)
#   memtide-guest: zram /dev/zram0 size=SIZE comp=ALG
#   memtide-guest: switch_root /dev/DEV init=PATH uptime_s=S   (memtide.root: the last line)
#   memtide-guest: ready kernel=REL uptime_s=S mem_total_kb=N swap_total_kb=N
#                  balloon=on|off|failed zram=SIZE|off modules=a,b,... shell=DEV|off disk=/mnt|none
#                                              (one line; modules: those this init loaded, in order)
#   memtide-guest: workload start
#   memtide-guest: workload exited N          (N: exit status, 128+signal if killed)
#   memtide-guest: no workload
#   memtide-guest: idle | poweroff | reboot | shell
# The kernel may print its own lines to the same console (pass `quiet` to keep them few).

export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=linux

say() { echo "memtide-guest: $*"; }
first() { echo "$1" | head -n 1; } # a command's first line of errors, for one marker line

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /tmp /run /root /mnt
mount -t devpts devpts /dev/pts 2>/dev/null
exec </dev/console >/dev/console 2>&1
hostname memtide-guest

REL=$(uname -r)
say "init kernel=$REL"

# The value of the last NAME=VALUE on the kernel command line, split and unquoted as the kernel
# does (spaces inside double quotes do not split; a value's surrounding quotes go). Exit status
# 1 when NAME is absent.
param() {
    awk -v want="$1" '
    {
        s = $0; n = length(s); i = 1
        while (i <= n) {
            while (i <= n && substr(s, i, 1) ~ /[ \t\n]/) i++
            if (i > n) break
            q = 0; tok = ""
            while (i <= n) {
                c = substr(s, i, 1)
                if (c == "\"") q = !q
                else if (!q && c ~ /[ \t\n]/) break
                tok = tok c; i++
            }
            eq = index(tok, "=")
            if (eq == 0) continue
            key = substr(tok, 1, eq - 1); val = substr(tok, eq + 1)
            gsub(/"/, "", key)
            if (substr(val, 1, 1) == "\"") val = substr(val, 2)
            if (substr(val, length(val), 1) == "\"") val = substr(val, 1, length(val) - 1)
            if (key == want) { found = 1; got = val }
        }
    }
    END { if (found) print got; else exit 1 }' /proc/cmdline
}

# Modules: /lib/modules/REL/memtide.deps has one line per module the image carries, "NAME DEP..."
# (each DEP itself a line), or "NAME builtin" for one built into the kernel.
DEPS=/lib/modules/$REL/memtide.deps
LOADED=""
load() { # NAME: load NAME and what it depends on; 1 if it (or a dependency) failed
    # shellcheck disable=SC3043 # busybox sh has local
    local name line dep
    name=$1
    [ -d "/sys/module/$name" ] && return 0
    line=$(grep "^$name " "$DEPS" 2>/dev/null)
    if [ -z "$line" ]; then
        say "error: module $name is not in the image"
        return 1
    fi
    # shellcheck disable=SC2086 # split into words on purpose
    set -- $line
    shift
    [ "$1" = builtin ] && return 0
    for dep in "$@"; do
        load "$dep" || return 1
    done
    if ! out=$(insmod "/lib/modules/$REL/$name.ko" 2>&1); then
        say "error: insmod $name: $(first "$out")"
        return 1
    fi
    LOADED="$LOADED${LOADED:+,}$name"
}
has_module() { grep -q "^$1 " "$DEPS" 2>/dev/null; }

for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci; do
    load "$m"
done
BALLOON=on
case $(param memtide.balloon) in off | 0 | no) BALLOON=off ;; esac
if [ "$BALLOON" = on ]; then
    load virtio_balloon || BALLOON=failed
fi
# A virtio RNG, when QEMU gives one (-device virtio-rng-pci), seeds the kernel's random numbers
# at once; without it the first read of /dev/urandom (mkswap's UUID) waits about a second.
has_module virtio_rng && load virtio_rng

# zram swap.
ZRAM=off
zram_comp() { sed 's/.*\[\([^]]*\)\].*/\1/' /sys/block/zram0/comp_algorithm; } # the one chosen
zram_size=$(param memtide.zram) ||
    zram_size=$(awk '/^MemTotal:/ { print int($2 / 2) "K" }' /proc/meminfo)
if [ "$zram_size" != 0 ]; then
    if load zram && [ -e /sys/block/zram0 ]; then
        comp=$(param memtide.zram_comp) || comp=$(zram_comp)
        m=$(echo "$comp" | tr - _)
        has_module "$m" && load "$m"
        if ! echo "$comp" >/sys/block/zram0/comp_algorithm 2>/dev/null; then
            say "error: zram has no compressor $comp: $(cat /sys/block/zram0/comp_algorithm)"
            comp=$(zram_comp)
            m=$(echo "$comp" | tr - _)
            has_module "$m" && load "$m"
        fi
        if ! echo "$zram_size" >/sys/block/zram0/disksize; then
            say "error: zram disksize $zram_size refused"
        elif ! out=$(mkswap /dev/zram0 2>&1); then
            say "error: mkswap /dev/zram0: $(first "$out")"
        elif ! out=$(swapon /dev/zram0 2>&1); then
            say "error: swapon /dev/zram0: $(first "$out")"
        else
            ZRAM=$zram_size
            say "zram /dev/zram0 size=$zram_size comp=$comp"
        fi
    else
        say "error: no zram device"
    fi
fi

# Waits up to 5 s for the block device /dev/$1 (virtio_blk loaded first); 1 if it never came.
wait_disk() {
    has_module virtio_blk && load virtio_blk
    n=0
    while [ ! -b "/dev/$1" ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
    [ -b "/dev/$1" ]
}

# A real root file system: systemd's, from a disk.
if root=$(param memtide.root); then
    init=$(param memtide.init) || init=/sbin/init
    mkdir -p /newroot
    if ! wait_disk "$root"; then
        say "error: no block device /dev/$root for the root"
    elif ! out=$(mount -t ext4 -o rw "/dev/$root" /newroot 2>&1); then
        say "error: mount /dev/$root /newroot: $(first "$out")"
    elif [ ! -e "/newroot$init" ] && [ ! -L "/newroot$init" ]; then
        say "error: /dev/$root has no $init"
        umount /newroot
    else
        say "switch_root /dev/$root init=$init uptime_s=$(cut -d' ' -f1 /proc/uptime)"
        for m in /dev/pts /dev /proc /sys; do
            mkdir -p "/newroot$m"
        done
        umount /dev/pts 2>/dev/null
        for m in /dev /proc /sys; do
            mount --move "$m" "/newroot$m" || say "error: cannot move $m to the new root"
        done
        exec switch_root /newroot "$init"
    fi
fi

# A disk for page-cache workloads.
DISK=none
if disk=$(param memtide.disk); then
    dev=${disk%%:*}
    if ! wait_disk "$dev"; then
        say "error: no block device /dev/$dev"
    else
        if [ "${disk#*:}" = mkfs ] && ! out=$(mke2fs -q -F "/dev/$dev" 2>&1); then
            say "error: mke2fs /dev/$dev: $(first "$out")"
        fi
        if out=$(mount "/dev/$dev" /mnt 2>&1); then
            DISK=/mnt
        else
            say "error: mount /dev/$dev /mnt: $(first "$out")"
        fi
    fi
fi

# The command shell on a second serial port.
SHELL_DEV=off
# Runs each line read from /dev/$1 in this shell (variables and cd stay) with stdin /dev/null,
# its output and errors back to /dev/$1; starts again after `exit` or a syntax error.
shell_loop() {
    cd /root || return
    while :; do
        (while IFS= read -r line; do eval "$line" </dev/null; done) <"/dev/$1" >"/dev/$1" 2>&1
        sleep 1
    done
}
shell=$(param memtide.shell) || shell=auto
if [ "$shell" = auto ]; then
    shell=off
    # A port QEMU does not provide reads "uart:unknown".
    grep -q '^1: uart:[0-9A-Z]' /proc/tty/driver/serial 2>/dev/null && shell=ttyS1
fi
if [ "$shell" != off ]; then
    if [ -c "/dev/$shell" ] && stty -F "/dev/$shell" raw -echo 2>/dev/null; then
        SHELL_DEV=$shell
        shell_loop "$shell" </dev/null >/dev/null 2>&1 &
    else
        say "error: no serial port /dev/$shell for the shell"
    fi
fi

mem_total=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
swap_total=$(awk '/^SwapTotal:/ { print $2 }' /proc/meminfo)
uptime_s=$(cut -d' ' -f1 /proc/uptime)
say "ready kernel=$REL uptime_s=$uptime_s mem_total_kb=$mem_total swap_total_kb=$swap_total" \
    "balloon=$BALLOON zram=$ZRAM modules=${LOADED:-none} shell=$SHELL_DEV disk=$DISK"

# The workload.
cmd=""
if b64=$(param memtide.run64); then
    if ! echo "$b64" | base64 -d >/run/workload.sh 2>/dev/null; then
        say "error: memtide.run64 is not base64"
        : >/run/workload.sh
    fi
    cmd=". /run/workload.sh"
elif run=$(param memtide.run); then
    cmd=$run
fi
if [ -n "$cmd" ]; then
    say "workload start"
    (cd /root && exec sh -c "$cmd") </dev/null
    say "workload exited $?"
else
    say "no workload"
fi

then=$(param memtide.then) || then=idle
case $then in
poweroff | reboot)
    say "$then"
    sync
    "$then" -f
    ;;
shell)
    say shell
    while :; do setsid cttyhack sh -l; done
    ;;
esac
say idle
while :; do sleep 3600; done
