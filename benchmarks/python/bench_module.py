#!/usr/bin/python3
"""What planning through the Python module costs over the C++ planner itself.

    meson devenv -C build /usr/bin/python3 benchmarks/python/bench_module.py [--samples 64 256 1024]

For GPT-6.7B (analytic model, S = 4, 8 layers per stage, 40 GB) and global batches of N samples
(lengths drawn from ../shared/data/lengths/superni_gpt.csv, a seeded uniform mixture without it),
times Planner.plan() in Python (wall time of the call: converting the lengths, planning without
the GIL, wrapping the result) against the C++ planner's own total (PlanResult.planning_ms,
measured inside plan/planner.hpp), and the `pipeplan plan` CLI's total on the same batch when
PIPEPLAN_CLI names it. Prints the medians over --repeat runs of a reused Planner and the
overhead per call (Python wall − C++ total), plus the cost of reading every rank's instructions
as objects and as a NumPy array.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import pipeplan

LENGTHS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "lengths" / "superni_gpt.csv"


def mixture():
    if LENGTHS.exists():
        with LENGTHS.open() as f:
            return np.array([[int(r["input_tokens"]), int(r["target_tokens"])] for r in csv.DictReader(f)])
    print(f"({LENGTHS} not found: a seeded uniform mixture)", file=sys.stderr)
    rng = np.random.default_rng(1)
    return np.stack([rng.integers(8, 1500, 4096), rng.integers(1, 300, 4096)], axis=1)


def cli_total_ms(pairs, options):
    cli = os.environ.get("PIPEPLAN_CLI")
    if not cli:
        return None
    with tempfile.TemporaryDirectory() as d:
        batch = Path(d) / "batch.csv"
        batch.write_text("input_tokens,target_tokens\n" + "".join(f"{a},{b}\n" for a, b in pairs))
        flags = [x for k, v in options.items() for x in ("--" + k.replace("_", "-"), str(v))]
        out = subprocess.run([cli, "plan", "--model", "analytic:gpt-6.7b", "--batch", str(batch), "--json", *flags],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out)["planning_ms"]["total"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    options = dict(stages=4, layers_per_stage=8, memory_mb=40000)
    planner = pipeplan.Planner(pipeplan.AnalyticModel("gpt-6.7b"), **options)
    pool = mixture()
    rng = np.random.default_rng(7)
    print(f"{'samples':>8} {'python_ms':>10} {'cpp_total_ms':>13} {'overhead_ms':>12} {'cli_total_ms':>13} "
          f"{'instr':>7} {'objects_ms':>11} {'array_ms':>9}")
    for n in args.samples:
        pairs = pool[rng.integers(0, len(pool), n)]
        planner.plan(pairs)  # warm-up: the planner's caches
        wall, inner = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            r = planner.plan(pairs)
            wall.append((time.perf_counter() - t0) * 1e3)
            inner.append(r.planning_ms["total"])
        t0 = time.perf_counter()
        count = sum(len(p.instructions) for p in r.programs)
        objects_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        sum(len(p.instructions_array()) for p in r.programs)
        array_ms = (time.perf_counter() - t0) * 1e3
        cli = cli_total_ms(pairs, options)
        w, c = statistics.median(wall), statistics.median(inner)
        print(f"{n:>8} {w:>10.2f} {c:>13.2f} {w - c:>12.3f} {cli if cli is None else round(cli, 2)!s:>13} "
              f"{count:>7} {objects_ms:>11.2f} {array_ms:>9.2f}")


if __name__ == "__main__":
    main()
