/*
 * sizes.h: byte counts as people write them ("512M", "2G", "1048576") for the sample pool's
 * and the benchmark's flags, and back ("2.00 GiB") for what they print.
 */
#ifndef SIZES_H
#define SIZES_H

#include <stdint.h>

/* Reads a count of bytes: digits, then optionally K, M, G or T (powers of 1024, an optional
 * "iB" or "B" after it). Returns 0, or -1 when text is not one or it is past 2^53 - 1. */
int parse_size(const char *text, uint64_t *bytes);

/* Writes bytes as "N B", "N.NN KiB", ... into out; returns out. */
const char *format_size(uint64_t bytes, char *out, int out_size);

#endif
