#!/usr/bin/env bash
# zram-swap.sh: gives a test or demo host a compressed-RAM swap device (zram) for memtide's
# tenants to swap to, and takes it away again. `zram-swap.sh --help` prints the usage below.
#
# Each device `up` makes is recorded in a file of its own, so `down` only ever touches a
# device `up` made, and two users or two runs never share one: one run's `down` cannot pull
# swap from under another's. A caller that keeps its own record names the file (--state or
# MEMTIDE_ZRAM_STATE): the tests and scripts/alb-*.sh do. up and down must run as root; bad
# usage exits 2.
set -euo pipefail

readonly PROG=zram-swap.sh
readonly CONTROL=/sys/class/zram-control
# The records' directory (one file per device, named after it), unless a state file is named.
readonly DIR=${MEMTIDE_ZRAM_DIR:-/run/memtide-zram}
STATE=${MEMTIDE_ZRAM_STATE:-}
readonly USAGE="usage: $PROG [--state FILE] up [SIZE] | down [DEVICE] | status | --help"

help() {
    cat <<EOF
$USAGE

  up [SIZE]      make a new zram swap device of SIZE (default 2G; bytes or K/M/G) at
                 priority 100, record it and print it (/dev/zramN)
  down [DEVICE]  swapoff a device up recorded, reset it, hot-remove it and forget it:
                 DEVICE (zramN or /dev/zramN), or the only one recorded
  status         print /proc/swaps and the devices recorded

Records: one file per device in $DIR (set MEMTIDE_ZRAM_DIR to move it), so
two runs never share a device and down never touches one up did not make.
--state FILE (or MEMTIDE_ZRAM_STATE=FILE) keeps the one record in FILE instead: up prints
the device FILE names while it swaps rather than making another, and down takes that one.
up and down must run as root.
EOF
}

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

# The zram device name (zramN) recorded in FILE, or nothing when FILE does not exist.
recorded_in() {
    [[ -f $1 ]] || return 0
    local dev
    dev=$(<"$1")
    dev=${dev##*/}
    [[ $dev =~ ^zram[0-9]+$ ]] || die 1 "record $1 holds '$dev', not a zram device"
    echo "$dev"
}

# The record of NAME: the state file when one is named, else NAME's file in DIR.
record_of() {
    if [[ -n $STATE ]]; then echo "$STATE"; else echo "$DIR/$1"; fi
}

# The devices recorded in DIR, one name a line.
recorded_devices() {
    [[ -d $DIR ]] || return 0
    local f
    for f in "$DIR"/zram*; do
        [[ -f $f ]] && recorded_in "$f"
    done
    return 0
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
    if [[ -n $STATE ]]; then
        name=$(recorded_in "$STATE")
        if [[ -n $name ]]; then
            if is_swapping "$name"; then
                echo "/dev/$name"
                return
            fi
            echo "$PROG: state file $STATE names /dev/$name, which is not swapping; making a new device" >&2
        fi
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

    local record
    record=$(record_of "$name")
    mkdir -p "$(dirname "$record")"
    echo "$dev" >"$record.tmp"
    mv -f "$record.tmp" "$record"
    echo "$dev"
}

# The device `down` is to take: DEVICE, the state file's, or the one recorded in DIR.
device_to_take() {
    local given=${1##*/}
    if [[ -n $STATE ]]; then
        local name
        name=$(recorded_in "$STATE")
        [[ -z $given || $given == "$name" ]] \
            || die 2 "down: $given is not the device $STATE records (${name:-none})"
        echo "$name"
        return
    fi
    if [[ -n $given ]]; then
        [[ $given =~ ^zram[0-9]+$ ]] || die 2 "down: bad DEVICE '$1' (use zramN or /dev/zramN)"
        [[ -f $DIR/$given ]] || die 2 "down: $given is not recorded in $DIR (up did not make it)"
        echo "$given"
        return
    fi
    local names
    names=$(recorded_devices)
    if (($(grep -c . <<<"$names") > 1)); then
        die 2 "down: several devices are recorded in $DIR ($(echo $names)); name one"
    fi
    echo "$names"
}

down() {
    need_root down
    local name
    name=$(device_to_take "${1:-}")
    if [[ -z $name ]]; then
        echo "$PROG: no device recorded in ${STATE:-$DIR}; nothing to do" >&2
        return
    fi
    local record
    record=$(record_of "$name")
    if [[ ! -d /sys/block/$name ]]; then
        echo "$PROG: $name no longer exists; forgetting it" >&2
        rm -f "$record"
        return
    fi
    if is_swapping "$name"; then
        swapoff "/dev/$name"
    fi
    release_device "$name" || die 1 "down: cannot hot-remove $name (reset it; record kept in $record to retry)"
    rm -f "$record"
}

status() {
    cat /proc/swaps
    local names
    if [[ -n $STATE ]]; then
        names=$(recorded_in "$STATE")
        echo "recorded in $STATE: ${names:-none}"
    else
        names=$(recorded_devices)
        echo "recorded in $DIR: $(echo ${names:-none})"
    fi
}

main() {
    if [[ ${1:-} == --state ]]; then
        (($# >= 2)) && [[ -n $2 ]] || die 2 "--state needs a FILE ($USAGE)"
        STATE=$2
        shift 2
    elif [[ ${1:-} == --state=* ]]; then
        STATE=${1#--state=}
        [[ -n $STATE ]] || die 2 "--state needs a FILE ($USAGE)"
        shift
    fi
    case ${1:-} in
        up)
            (($# <= 2)) || die 2 "$USAGE"
            up "${2:-}"
            ;;
        down)
            (($# <= 2)) || die 2 "$USAGE"
            down "${2:-}"
            ;;
        status)
            (($# == 1)) || die 2 "$USAGE"
            status
            ;;
        -h | --help | help)
            help
            ;;
        '') die 2 "$USAGE" ;;
        *) die 2 "unknown subcommand '$1' ($USAGE)" ;;
    esac
}

main "$@"
