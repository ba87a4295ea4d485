#!/usr/bin/python3
"""Planner stall per iteration with pipeplan.torch.PlannedLoader.

    meson devenv -C build /usr/bin/python3 benchmarks/python/torch_loader_stall.py --train-ms 200

Plans GPT-6.7B iterations (analytic model, S stages, 8 layers per stage) of global batches drawn
from ../shared/data/lengths/superni_gpt.csv (a synthetic mixture without it) while a training
loop that takes --train-ms per iteration (a sleep: the GIL is free, as during torch kernels)
consumes them. Prints the planner's time per iteration (and the loader's whole background job: samples,
planning, tensors) and the stall (how long the loop waited
for the next plan) per iteration: median and maximum after the first --warmup iterations, for
each lookahead.
"""
import argparse
import csv
import math
import random
import statistics
import sys
import time
from pathlib import Path

import torch

import pipeplan
from pipeplan.torch import PlannedLoader, TokenBudgetBatches

LENGTHS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "lengths" / "superni_gpt.csv"


def lengths(max_seqlen: int):
    if LENGTHS.exists():
        with open(LENGTHS, newline="") as f:
            return [min(max_seqlen, int(r["input_tokens"]) + int(r["target_tokens"])) for r in csv.DictReader(f)], str(LENGTHS)
    rng = random.Random(0)
    return [min(max_seqlen, int(rng.lognormvariate(math.log(120), 0.8))) for _ in range(20000)], "synthetic mixture"


class LengthOnly:
    """A data set of token ids (zeros) of the given lengths."""

    def __init__(self, lens):
        self.lens = lens

    def __getitem__(self, i):
        return torch.zeros(self.lens[i], dtype=torch.long)


def main() -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--tokens", type=int, default=65536)
    a.add_argument("--stages", type=int, default=4)
    a.add_argument("--max-seqlen", type=int, default=2048)
    a.add_argument("--train-ms", type=float, default=200.0)
    a.add_argument("--iterations", type=int, default=12)
    a.add_argument("--warmup", type=int, default=2)
    a.add_argument("--lookaheads", default="1,2")
    args = a.parse_args()
    lens, source = lengths(args.max_seqlen)
    model = pipeplan.AnalyticModel("gpt-6.7b")
    print(f"GPT-6.7B analytic, S={args.stages}, {args.tokens} tokens per batch from {source}, training "
          f"{args.train_ms:.0f} ms per iteration")
    for k in (int(x) for x in args.lookaheads.split(",")):
        planner = pipeplan.Planner(model, stages=args.stages, layers_per_stage=32 // args.stages, memory_mb=40000,
                                   max_seqlen=args.max_seqlen)
        batches = TokenBudgetBatches(lens, args.tokens, seed=0, iterations=args.iterations)
        stalls, plans, prepares = [], [], []
        with PlannedLoader(LengthOnly(lens), batches, planner, rank=0, lookahead=k) as loader:
            for b in loader:
                stalls.append(b.stall_ms)
                plans.append(b.planning_ms)
                prepares.append(b.prepare_ms)
                time.sleep(args.train_ms / 1e3)
        s, p, q = stalls[args.warmup:], plans[args.warmup:], prepares[args.warmup:]
        print(f"lookahead {k}: planning {statistics.median(p):6.1f} ms median ({max(p):6.1f} max), with the "
              f"tensors {statistics.median(q):6.1f} ms; stall "
              f"{statistics.median(s):6.2f} ms median, {max(s):6.2f} ms max over {len(s)} iterations "
              f"(first iteration: {stalls[0]:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
