#!/usr/bin/env python3
"""Writes a scenario of N tenants like the sixteen of scenarios/bench-16vm-1h.toml, every size
divided by DIV (8: 128 MB VMs; 64: 16 MB VMs), on a host overcommitted 2x, with the hour's
tax-rate change at 5 min: the long-run and many-tenant measurements of docs/benchmarks.md.

Usage: scripts/many-tenants.py N DURATION OUT.toml [DIV]
e.g.   scripts/many-tenants.py 2000 10m /tmp/many-2000.toml 8
"""
import pathlib
import re
import sys

n, duration, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
div = int(sys.argv[4]) if len(sys.argv) > 4 else 8
bench = pathlib.Path(__file__).resolve().parent.parent / 'scenarios' / 'bench-16vm-1h.toml'
blocks = bench.read_text().split('[[tenants]]')[1:]
blocks[-1] = blocks[-1].split('[[events]]')[0]
max_mb, overhead_mb, kernel_mb = 1024 // div, max(1, 32 // div), max(1, 16 // div)


def scale(m):
    mb = int(m.group(1)) * (1024 if m.group(2) == 'G' else 1)
    return '"%dM"' % max(1, mb // div)


lines = [
    'name = "many-%d"' % n,
    'description = "%d VMs like bench-16vm-1h, %d MB each, 2x overcommitted"' % (n, max_mb),
    'duration = "%s"' % duration,
    '',
    '[host]',
    'memory = "%dM"' % (n * max_mb // 2 + n * overhead_mb),
    'host_swap = "%dM"' % (n * max_mb),
    '',
]
for i in range(n):
    b = blocks[i % 16]
    b = re.sub(r'name = "vm\d\d-(\w+)"', lambda m: 'name = "vm%04d-%s"' % (i, m.group(1)), b)
    b = re.sub(r'"(\d+)([MG])"', scale, b)
    b = b.replace('max = "%dM"\n' % max_mb,
                  'max = "%dM"\noverhead = "%dM"\nkernel = "%dM"\n' % (max_mb, overhead_mb, kernel_mb))
    b = b.replace('kind = "web"\n', 'kind = "web"\nanon = "%dM"\nfile = "%dM"\n' % (kernel_mb, kernel_mb))
    lines.append('[[tenants]]' + b.rstrip() + '\n')
lines.append('[[events]]\nat = "5m"\nkind = "set_tax_rate"\ntax_rate = 0.5\n')
pathlib.Path(out).write_text('\n'.join(lines))
