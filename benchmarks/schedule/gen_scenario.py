#!/usr/bin/env python3
"""Writes a scenario JSON (docs/formats.md) of S stages and M variable micro-batches to stdout,
for timing `pipeplan simulate` at scale (order discovery in O(ops · log)). Deterministic for a seed; the
same shape as bench_schedule.cpp's variable(): per-stage base times, per-micro-batch multipliers,
backward = 2 x forward, model state 4000 MB, stored 800 MB and peak 1600 MB per unit.

  python3 benchmarks/schedule/gen_scenario.py 4 200000 > /tmp/s4x200k.json
  /usr/bin/time -f "%e s %U user %M KB" build/examples/cli/pipeplan simulate \\
      --scenario /tmp/s4x200k.json --schedule adaptive --memory-limit-mb 13600 --json > /tmp/out.json
"""
import random
import sys


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: gen_scenario.py STAGES MICROBATCHES [SEED]")
    stages, microbatches = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) == 4 else 1)
    if stages < 1 or microbatches < 1:
        sys.exit("gen_scenario.py: STAGES and MICROBATCHES must be >= 1")
    base = [1.0 + rng.randrange(1000) / 500.0 for _ in range(stages)]
    out = sys.stdout
    out.write('{"stages": %d, "microbatches": [\n' % stages)
    for j in range(microbatches):
        m = 0.3 + rng.randrange(1000) / 600.0
        row = lambda values: ", ".join("%.6g" % v for v in values)
        out.write('{"forward_ms": [%s], "backward_ms": [%s], "stored_mb": [%s], "peak_mb": [%s]}%s\n' % (
            row(b * m for b in base), row(2.0 * b * m for b in base), row([800.0 * m] * stages),
            row([1600.0 * m] * stages), "," if j + 1 < microbatches else ""))
    out.write('], "model_state_mb": [%s]}\n' % ", ".join(["4000"] * stages))


if __name__ == "__main__":
    main()
