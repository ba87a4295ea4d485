#!/usr/bin/python3
"""Measured iteration time of examples/torch/train_gpt.py on CPU with gloo: pipeplan's plan vs
Megatron-style packing into fixed-length rows + 1F1B vs padding to the longest sample + 1F1B.

    meson devenv -C build /usr/bin/python3 benchmarks/python/torch_batching.py --stages 2 --iterations 8

Runs the example once per batching method (same model, data, seed and global batches), drops
the first --warmup iterations and prints the medians of the iteration's wall time and of the CPU
time its ranks spent in the step (summed; robust to other load on the machine), their ratios to
the first method's, and the planner stall. Extra arguments after -- go to train_gpt.py unchanged.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch" / "train_gpt.py"


def main() -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--stages", type=int, default=2)
    a.add_argument("--dp", type=int, default=1)
    a.add_argument("--iterations", type=int, default=8)
    a.add_argument("--warmup", type=int, default=2)
    a.add_argument("--methods", default="pipeplan,packing,padding")
    a.add_argument("rest", nargs=argparse.REMAINDER, help="-- then train_gpt.py arguments")
    args = a.parse_args()
    rest = [x for x in args.rest if x != "--"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            out = Path(tmp) / f"{method}.json"
            cmd = [sys.executable, str(EXAMPLE), "--spawn", "--stages", str(args.stages), "--dp", str(args.dp),
                   "--iterations", str(args.iterations), "--batching", method, "--json", str(out)] + rest
            print("$ " + " ".join(cmd[1:]), flush=True)
            subprocess.run(cmd, check=True)
            its = json.loads(out.read_text())["iterations"][args.warmup:]
            rows.append((method, statistics.median(r["iteration_s"] for r in its) * 1e3,
                         statistics.median(r["cpu_s"] for r in its) * 1e3,
                         statistics.median(r["stall_ms"] for r in its), statistics.mean(r["microbatches"] for r in its),
                         its[0]["schedule"], len(its)))
    base, base_cpu = rows[0][1], rows[0][2]
    print(f"\nS={args.stages} dp={args.dp}: median over {rows[0][6]} iterations after {args.warmup} warm-up "
          f"(ratio: to {rows[0][0]}'s)")
    print(f"{'batching':10s} {'iteration ms':>12s} {'ratio':>7s} {'CPU ms (all ranks)':>19s} {'ratio':>7s} "
          f"{'stall ms':>9s} {'micro-batches':>14s}  schedule")
    for method, ms, cpu, stall, mbs, sched, _ in rows:
        print(f"{method:10s} {ms:12.1f} {ms / base:6.2f}x {cpu:19.1f} {cpu / base_cpu:6.2f}x {stall:9.2f} {mbs:14.1f}  {sched}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
