//go:build linux

// The process's resident memory, read from VmRSS in /proc/self/status.

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// residentBytes returns the process's resident set size.
func residentBytes() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "VmRSS:" && fields[2] == "kB" {
			kib, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/self/status: VmRSS = %q: %w", fields[1], err)
			}
			return kib << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/self/status has no VmRSS line")
}
