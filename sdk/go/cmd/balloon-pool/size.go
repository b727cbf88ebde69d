//go:build linux

// Sizes on the command line: bytes as an integer with an optional binary unit, as memtide's
// own configuration writes them ("512M", "2GiB", "1048576").

package main

import (
	"fmt"
	"strconv"
	"strings"
)

// size is a flag.Value of bytes.
type size uint64

var units = map[string]uint64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tib": 1 << 40,
}

func (s *size) String() string { return strconv.FormatUint(uint64(*s), 10) }

func (s *size) Set(text string) error {
	digits := strings.TrimRightFunc(text, func(r rune) bool { return r < '0' || r > '9' })
	scale, ok := units[strings.ToLower(text[len(digits):])]
	if !ok {
		return fmt.Errorf("%q has an unknown unit; write bytes, or a number with K, M, G or T (KiB, MiB, GiB, TiB)", text)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > (1<<64-1)/scale {
		return fmt.Errorf("%q is not a whole number of bytes", text)
	}
	*s = size(n * scale)
	return nil
}
