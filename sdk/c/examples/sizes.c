/*
 * sizes.c: reading and writing byte counts for the sample pool and its benchmark (see
 * sizes.h).
 */
#include "sizes.h"

#include <stdio.h>
#include <string.h>

int parse_size(const char *text, uint64_t *bytes)
{
    static const char units[] = "KMGT";
    uint64_t value = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        value = value * 10 + (uint64_t)(*p - '0');
        if (value > (UINT64_C(1) << 53) - 1)
            return -1;
    }
    if (*p != '\0') {
        const char *unit = strchr(units, *p);
        if (unit == NULL)
            return -1;
        p++;
        if (strcmp(p, "") != 0 && strcmp(p, "B") != 0 && strcmp(p, "iB") != 0)
            return -1;
        for (int i = 0; i <= unit - units; i++) {
            if (value > ((UINT64_C(1) << 53) - 1) / 1024)
                return -1;
            value *= 1024;
        }
    }
    *bytes = value;
    return 0;
}

const char *format_size(uint64_t bytes, char *out, int out_size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    double value = (double)bytes;
    int unit = -1;
    while (value >= 1024 && unit < 3) {
        value /= 1024;
        unit++;
    }
    if (unit < 0)
        snprintf(out, (size_t)out_size, "%llu B", (unsigned long long)bytes);
    else
        snprintf(out, (size_t)out_size, "%.2f %s", value, units[unit]);
    return out;
}
