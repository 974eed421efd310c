#!/usr/bin/env python3
"""Host time of each kind of group in a fusion log (LOOM_LOG=fusion on stderr): reads the log,
prints per kind (an opaque op, a matmul with its epilogue, or a fused kernel's shape class) the
groups a flush, total and median microseconds, largest first. On a GPU a group's host time is
its launch (and what precedes it: allocation, kernel lookup), not the kernel's run.

    LOOM_LOG=fusion python3 prog.py 2> log.txt; python3 scripts/group_times.py log.txt
"""
import collections
import re
import statistics
import sys


def main():
    text = open(sys.argv[1]).read().split("\n")
    flushes = sum(1 for line in text if line.startswith("[loom] flush"))
    times = collections.defaultdict(list)
    kind = None
    for line in text:
        m = re.match(r"  group \d+(?::| sig \w+ \w+ [\d.]+ ms,) ?(.*)", line)
        if m:
            rest = m.group(1)
            if rest.startswith("opaque"):
                kind = re.sub(r"\[.*?\]", "[..]", rest.split("(")[0]).strip()
            else:
                kind = "fused " + ("rows x cols" if " rows x " in rest else rest[:40])
                r = re.match(r"(\d+) rows x (\d+) cols", rest)
                if r:
                    kind = "fused, " + ("1 row" if r.group(1) == "1" else "rows")
            continue
        m = re.match(r"  epilogue sig", line)
        if m and kind and not kind.endswith("+ epilogue"):
            kind += " + epilogue"
            continue
        m = re.match(r"    ran in ([\d.]+) us", line)
        if m and kind:
            times[kind].append(float(m.group(1)))
    rows = sorted(times.items(), key=lambda kv: -sum(kv[1]))
    total = sum(sum(v) for v in times.values())
    print(f"{flushes} flushes, {sum(len(v) for v in times.values())} groups, "
          f"{total / max(flushes, 1):.0f} us a flush of host time in groups")
    print(f"{'kind':<44} {'a flush':>8} {'us a flush':>11} {'median us':>10}")
    for k, v in rows:
        print(f"{k:<44} {len(v) / max(flushes, 1):8.1f} {sum(v) / max(flushes, 1):11.0f} "
              f"{statistics.median(v):10.1f}")


if __name__ == "__main__":
    main()
