#!/usr/bin/env python3
"""Summary of a comparison run: per-pair ratios of a reference tool to each peer.

Input (stdin or a file): tab-separated rows
    group  rep  tool  rate  [metric=value ...]
`group` is a placement (e.g. "forward 64 B"), `rep` the pair's number (rep 0 is the
warm-up and is left out), `rate` the figure the ratio is taken of (higher is better).
Rows with rate <= 0 (a failed run) are left out of the ratios and counted.

Output (markdown): per group, each tool's median rate and median of every metric, and
for each peer the median of the per-pair ratios reference / peer with their range.
"""
import statistics
import sys
from collections import defaultdict


def fmt(x):
    return f'{x:.3f}' if abs(x) < 100 else f'{x:.0f}'


def main():
    ref = sys.argv[1] if len(sys.argv) > 1 else 'xdpool'
    src = open(sys.argv[2]) if len(sys.argv) > 2 else sys.stdin
    rates = defaultdict(dict)      # group -> {(rep, tool): rate}
    metrics = defaultdict(lambda: defaultdict(list))  # (group, tool) -> name -> [values]
    tools = defaultdict(list)      # group -> tools in first-seen order
    failed = defaultdict(int)
    for line in src:
        if not line.strip() or line.startswith('#'):
            continue
        f = line.rstrip('\n').split('\t')
        group, rep, tool, rate = f[0], int(f[1]), f[2], float(f[3])
        if tool not in tools[group]:
            tools[group].append(tool)
        if rep == 0:
            continue
        if rate <= 0:
            failed[(group, tool)] += 1
            continue
        rates[group][(rep, tool)] = rate
        for kv in f[4:]:
            k, v = kv.split('=', 1)
            try:
                metrics[(group, tool)][k].append(float(v))
            except ValueError:
                pass
    for group in tools:
        print(f'### {group}\n')
        names = sorted({k for t in tools[group] for k in metrics[(group, t)]})
        print('| tool | runs | median rate | ' + ' | '.join(f'median {n}' for n in names) + ' |')
        print('|---|---:|---:|' + '---:|' * len(names))
        for t in tools[group]:
            rs = [r for (rep, tt), r in rates[group].items() if tt == t]
            med = fmt(statistics.median(rs)) if rs else '-'
            ms = [fmt(statistics.median(metrics[(group, t)][n])) if metrics[(group, t)][n] else '-' for n in names]
            fail = f' ({failed[(group, t)]} failed)' if failed[(group, t)] else ''
            print(f'| {t} | {len(rs)}{fail} | {med} | ' + ' | '.join(ms) + ' |')
        print()
        reps = sorted({rep for rep, _ in rates[group]})
        for peer in tools[group]:
            if peer == ref or ref not in tools[group]:
                continue
            ratios = [rates[group][(r, ref)] / rates[group][(r, peer)] for r in reps
                      if (r, ref) in rates[group] and (r, peer) in rates[group]]
            if ratios:
                print(f'- {ref} / {peer}: **{statistics.median(ratios):.2f}** '
                      f'({min(ratios):.2f}-{max(ratios):.2f}), {len(ratios)} pairs')
            else:
                print(f'- {ref} / {peer}: no complete pair')
        print()


if __name__ == '__main__':
    main()
