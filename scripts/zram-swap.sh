#!/usr/bin/env bash
# zram-swap.sh: gives a test or demo host a compressed-RAM swap device (zram) for memtide's
# tenants to swap to, and takes it away again.
#
#   zram-swap.sh up [SIZE]   create a zram swap device of SIZE (default 2G; bytes or K/M/G) at
#                            priority 100 and print it; if the one recorded is already swapping,
#                            just print it
#   zram-swap.sh down        swapoff the recorded device, reset it, hot-remove it, forget it
#   zram-swap.sh status      print /proc/swaps
#
# The device is recorded in /run/memtide-zram.dev (override with MEMTIDE_ZRAM_STATE), so `down`
# only ever touches the device `up` made. up and down must run as root. Bad usage exits 2.
set -euo pipefail

readonly PROG=zram-swap.sh
readonly STATE=${MEMTIDE_ZRAM_STATE:-/run/memtide-zram.dev}
readonly CONTROL=/sys/class/zram-control
readonly USAGE="usage: $PROG up [SIZE] | down | status"

die() { # status message
    echo "$PROG: $2" >&2
    exit "$1"
}

need_root() {
    [[ $EUID -eq 0 ]] || die 2 "$1 must run as root (uid is $EUID)"
}

# True if /dev/NAME is an active swap device.
is_swapping() {
    awk -v dev="/dev/$1" 'NR > 1 && $1 == dev { found = 1 } END { exit !found }' /proc/swaps
}

# The zram device name (zramN) recorded in the state file, or nothing.
recorded_name() {
    [[ -f $STATE ]] || return 0
    local dev
    dev=$(<"$STATE")
    dev=${dev##*/}
    [[ $dev =~ ^zram[0-9]+$ ]] || die 1 "state file $STATE holds '$dev', not a zram device"
    echo "$dev"
}

# Prints a free zram device name: a new one from hot_add, else zram0 if it is unused.
free_device() {
    local n
    if [[ -r $CONTROL/hot_add ]] && n=$(cat "$CONTROL/hot_add" 2>/dev/null) && [[ $n =~ ^[0-9]+$ ]]; then
        echo "zram$n"
        return
    fi
    if [[ -r /sys/block/zram0/disksize && $(</sys/block/zram0/disksize) == 0 ]]; then
        echo zram0
        return
    fi
    die 1 "no free zram device: $CONTROL/hot_add failed and zram0 is missing or in use"
}

# Gives back NAME: reset it (drops its contents) and hot-remove it. zram0 may not be removable.
release_device() {
    local name=$1
    if [[ -w /sys/block/$name/reset ]]; then
        echo 1 >"/sys/block/$name/reset"
    fi
    if ! echo "${name#zram}" >"$CONTROL/hot_remove" 2>/dev/null && [[ $name != zram0 ]]; then
        return 1
    fi
}

up() {
    local size=${1:-2G}
    [[ $size =~ ^[0-9]+[KMGkmg]?$ && ! $size =~ ^0+[KMGkmg]?$ ]] \
        || die 2 "up: bad SIZE '$size' (use bytes or a whole number with K, M or G, e.g. 2G)"
    need_root up

    local name
    name=$(recorded_name)
    if [[ -n $name ]]; then
        if is_swapping "$name"; then
            echo "/dev/$name"
            return
        fi
        echo "$PROG: state file $STATE names /dev/$name, which is not swapping; making a new device" >&2
    fi

    if [[ ! -d $CONTROL ]]; then
        modprobe zram 2>/dev/null || true # fails harmlessly when zram is built in
    fi
    name=$(free_device)
    # Until swapon succeeds, any exit gives the device back.
    pending=$name
    trap 'if [[ -n ${pending:-} ]]; then release_device "$pending" || true; fi' EXIT
    local sys=/sys/block/$name dev=/dev/$name
    local tries=0
    until [[ -b $dev ]]; do # udev/devtmpfs may take a moment after hot_add
        ((++tries <= 50)) || die 1 "up: $dev did not appear after hot_add"
        sleep 0.1
    done

    local algorithms algo
    algorithms=$(<"$sys/comp_algorithm")
    for algo in lz4 zstd; do
        if [[ " ${algorithms//[\[\]]/} " == *" $algo "* ]]; then
            echo "$algo" >"$sys/comp_algorithm"
            break
        fi
    done
    echo "$size" >"$sys/disksize"
    mkswap "$dev" >/dev/null
    swapon -p 100 "$dev"
    pending=

    mkdir -p "$(dirname "$STATE")"
    echo "$dev" >"$STATE.tmp"
    mv -f "$STATE.tmp" "$STATE"
    echo "$dev"
}

down() {
    need_root down
    local name
    name=$(recorded_name)
    if [[ -z $name ]]; then
        echo "$PROG: no device recorded in $STATE; nothing to do" >&2
        return
    fi
    if [[ ! -d /sys/block/$name ]]; then
        echo "$PROG: $name no longer exists; forgetting it" >&2
        rm -f "$STATE"
        return
    fi
    if is_swapping "$name"; then
        swapoff "/dev/$name"
    fi
    release_device "$name" || die 1 "down: cannot hot-remove $name (reset it; state kept in $STATE to retry)"
    rm -f "$STATE"
}

main() {
    case ${1:-} in
        up)
            (($# <= 2)) || die 2 "$USAGE"
            up "${2:-}"
            ;;
        down)
            (($# == 1)) || die 2 "$USAGE"
            down
            ;;
        status)
            (($# == 1)) || die 2 "$USAGE"
            cat /proc/swaps
            ;;
        '') die 2 "$USAGE" ;;
        *) die 2 "unknown subcommand '$1' ($USAGE)" ;;
    esac
}

main "$@"
