#!/usr/bin/env python3
"""Two qexact binaries' `bench` ratios side by side, as the README's speed tables show them.

    scripts/bench-compare.py BEFORE AFTER [--runs 3] [-- BENCH ARGS...]

Runs `BEFORE bench --json ARGS` and `AFTER bench --json ARGS` alternately, RUNS times each (so
that a change in the machine's load falls on both), and prints one Markdown row per measurement
(preset, op, regime, threads): the median ratio to the copy bandwidth of the same run and its
range over the runs, for each binary, and the median ns/element. Default bench arguments:
--threads 2 --reference-elements 0 --rounds 5. On a shared machine report the load average
with the table (`uptime`); the ratios are normalised by the copy, not immune to the load.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(binary, bench_args):
    out = subprocess.run([binary, "bench", "--json", *bench_args], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = json.loads(line)
        if m["engine"] != "fast":
            continue
        label = m["preset"] + (" " + m["params"] if m.get("params") else "")  # a variant: "key=value"
        rows[(label, m["op"], m["input_dtype"], m["regime"], m["threads"])] = (m["ratio"], m["ns_per_element"])
    return rows


def summary(values):
    ratios = [r for r, _ in values]
    ns = [n for _, n in values]
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})", f"{statistics.median(ns):.3f}"


def main():
    argv = sys.argv[1:]
    bench_args = ["--threads", "2", "--reference-elements", "0", "--rounds", "5"]
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--runs", type=int, default=3)
    a = parser.parse_args(argv)
    if a.runs < 1:
        parser.error("--runs must be at least 1")
    for b in (a.before, a.after):
        if not os.access(b, os.X_OK):
            parser.error(f"{b} is not an executable")
    results = {a.before: [], a.after: []}
    for i in range(a.runs):
        for b in (a.before, a.after):
            results[b].append(run(b, bench_args))
            print(f"# run {i + 1}/{a.runs} of {b} done", file=sys.stderr)
    # Every row the after binary measured in every run; a kernel the before binary does not list
    # shows "-" there.
    keys = [k for k in results[a.after][0] if all(k in r for r in results[a.after])]
    print(f"# load average before the table: {os.getloadavg()[0]:.2f}; bench {' '.join(bench_args)}; {a.runs} runs each")
    print("| kernel | op | in | regime | threads | ratio before | ratio after | ns/elem before | ns/elem after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in keys:
        before = [r[k] for r in results[a.before] if k in r]
        rb, nb = summary(before) if len(before) == a.runs else ("-", "-")
        ra, na = summary([r[k] for r in results[a.after]])
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {rb} | {ra} | {nb} | {na} |")


if __name__ == "__main__":
    main()
