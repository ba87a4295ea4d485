#!/usr/bin/python3
"""Trains a small GPT with pipeplan's plans on S x dp CPU processes (gloo).

    meson devenv -C build /usr/bin/python3 examples/torch/train_gpt.py --spawn --stages 2 --iterations 5 --check

Each global batch is drawn from a real length mixture (--lengths: a CSV with input_tokens and
target_tokens columns; default ../shared/data/lengths/superni_gpt.csv when present, else a
built-in synthetic mixture) until --tokens tokens, with synthetic token ids; samples longer than
--max-seqlen are truncated. pipeplan plans each iteration (the analytic cost model of this
model's shape) in a background thread two iterations ahead (PlannedLoader) and every rank runs
its program with pipeplan.torch.PipelineExecutor. The loss is the mean over the global batch's
target tokens. --check also runs the single-process reference on the same batches and parameters
and exits 1 when the loss or a gradient differs by more than --tolerance (relative).
--batching packing|padding runs the baselines of examples/torch/batching.py instead.

Launch with --spawn (S x dp local processes on 127.0.0.1), or under torchrun (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT from the environment).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import random
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import pipeplan  # noqa: E402
from pipeplan.torch import PipelineExecutor, PlannedLoader, Sample, TokenBudgetBatches, owned_stages  # noqa: E402

from batching import PackingPlanner, PaddingPlanner  # noqa: E402
from gpt import (GPTConfig, build_model, max_relative_error, reference_step, stage_modules,  # noqa: E402
                 stage_parameter_names, synthetic_samples)

SHARED_LENGTHS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "lengths" / "superni_gpt.csv"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=Path, help="CSV with input_tokens,target_tokens columns (default: shared mixture)")
    p.add_argument("--tokens", type=int, default=4096, help="token budget of a global batch")
    p.add_argument("--stages", type=int, default=2, help="pipeline devices S")
    p.add_argument("--dp", type=int, default=1, help="data-parallel replicas")
    p.add_argument("--chunks", type=int, default=0, help="virtual stages per device (0: 2 for interleaved, else 1)")
    p.add_argument("--schedule", default="auto", help="auto | 1f1b | gpipe | interleaved | adaptive | zb-h1 | merak-*")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--max-seqlen", type=int, default=512, help="truncate samples to this many tokens")
    p.add_argument("--batching", choices=("pipeplan", "packing", "padding"), default="pipeplan")
    p.add_argument("--mbs", type=int, default=0, help="baselines: rows (packing) or samples (padding) per micro-batch "
                                                      "(0: the micro-batch count of 2 x S)")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=96)
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lookahead", type=int, default=2, help="iterations planned ahead")
    p.add_argument("--memory-mb", type=float, default=16000.0, help="device memory the planner assumes")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a rank waits for a message")
    p.add_argument("--spawn", action="store_true", help="start S x dp local processes")
    p.add_argument("--check", action="store_true", help="compare with the single-process reference")
    p.add_argument("--tolerance", type=float, default=1e-10)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    p.add_argument("--json", type=Path, help="write per-iteration records (rank 0) to this file")
    p.add_argument("--profile", action="store_true", help="print rank 0's time per instruction kind")
    a = p.parse_args(argv)
    if a.chunks == 0:
        a.chunks = 2 if a.schedule == "interleaved" else 1
    if a.layers % (a.stages * a.chunks):
        p.error(f"--layers {a.layers} must be a multiple of stages x chunks = {a.stages * a.chunks}")
    return a


def read_lengths(path: Optional[Path], seed: int) -> Tuple[List[Tuple[int, int]], str]:
    """(input, target) token counts of every sample, and where they came from."""
    if path is None and SHARED_LENGTHS.exists():
        path = SHARED_LENGTHS
    if path is None:
        rng = random.Random(seed)  # a built-in mixture shaped like instruction tuning data
        pairs = [(max(8, min(1024, int(rng.lognormvariate(math.log(110), 0.8)))),
                  max(1, min(256, int(rng.lognormvariate(math.log(10), 1.0))))) for _ in range(4000)]
        return pairs, "built-in synthetic mixture (4000 samples)"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for k in ("input_tokens", "target_tokens"):
        if not rows or k not in rows[0]:
            raise SystemExit(f"{path}: no column '{k}'")
    pairs = []
    for line, r in enumerate(rows, start=2):
        try:
            pairs.append((int(r["input_tokens"]), int(r["target_tokens"])))
        except ValueError:
            raise SystemExit(f"{path}:{line}: input_tokens/target_tokens must be integers")
    return pairs, f"{path} ({len(pairs)} samples)"


class SyntheticDataset:
    """Samples of the given (input, target) lengths with seeded synthetic token ids."""

    def __init__(self, pairs, vocab: int, seed: int):
        self.pairs, self.vocab, self.seed = pairs, vocab, seed

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> Sample:
        return synthetic_samples([self.pairs[i]], self.vocab, self.seed * 7919 + i)[0]


def make_planner(a, c: GPTConfig, lengths_of_batch_hint: int):
    model = c.analytic_model()
    schedule = "1f1b" if a.batching != "pipeplan" else a.schedule
    planner = pipeplan.Planner(model, stages=a.stages, layers_per_stage=a.layers // (a.stages * a.chunks),
                               chunks=a.chunks, dp=a.dp, schedule=schedule, dtype="fp64", memory_mb=a.memory_mb,
                               max_seqlen=a.max_seqlen)
    mbs = a.mbs or max(1, lengths_of_batch_hint)
    if a.batching == "packing":
        return PackingPlanner(planner, mbs, a.max_seqlen)
    if a.batching == "padding":
        return PaddingPlanner(planner, mbs)
    return planner


def baseline_mbs(a, pairs) -> int:
    """Baselines' default micro-batch size: 2 x S x dp micro-batches of an average global batch."""
    mean = statistics.fmean(min(i + t, a.max_seqlen) for i, t in pairs[:2000])
    samples = a.tokens / mean
    rows = a.tokens / a.max_seqlen if a.batching == "packing" else samples
    return max(1, round(rows / (2 * a.stages * a.dp)))


def worker(rank: int, world: int, a) -> int:
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=a.timeout))
    try:
        return train(rank, world, a)
    finally:
        dist.destroy_process_group()


def train(rank: int, world: int, a) -> int:
    c = GPTConfig(vocab=a.vocab, hidden=a.hidden, heads=a.heads, layers=a.layers, ffn=4 * a.hidden,
                  max_positions=a.max_seqlen)
    pairs, source = read_lengths(a.lengths, a.seed)
    dataset = SyntheticDataset(pairs, c.vocab, a.seed)
    lengths = [min(i + t, a.max_seqlen) for i, t in pairs]
    planner = make_planner(a, c, baseline_mbs(a, pairs))
    batches = TokenBudgetBatches(lengths, a.tokens, seed=a.seed, iterations=a.iterations)
    model = build_model(c, a.seed)
    reference = build_model(c, a.seed) if a.check else None
    ref_opt = torch.optim.Adam(reference.parameters(), lr=a.lr) if reference is not None else None
    if rank == 0:
        print(f"pipeplan torch example: {a.stages} stages x {a.dp} replicas, batching {a.batching}, lengths from "
              f"{source}, {a.tokens} tokens per batch, model {c.layers} layers h {c.hidden}", flush=True)
    ex = None
    records, failed = [], False
    with PlannedLoader(dataset, batches, planner, rank=rank, lookahead=a.lookahead, max_seqlen=a.max_seqlen) as loader:
        for batch in loader:
            if ex is None:
                modules = stage_modules(model, batch.plan.header.virtual_stages, owned_stages(batch.plan.header, rank))
                params = [p for m in modules.values() for p in m.parameters()]
                ex = PipelineExecutor(batch.rank_plan, modules, optimizer=torch.optim.Adam(params, lr=a.lr),
                                      timeout_s=a.timeout)
            dist.barrier()
            t0, c0 = time.perf_counter(), time.thread_time()
            local_loss = ex.run(batch.rank_plan, batch.microbatches, profile=a.profile)
            cpu = time.thread_time() - c0
            dist.barrier()
            seconds = time.perf_counter() - t0
            sums = torch.tensor([local_loss, cpu], dtype=torch.float64)
            dist.all_reduce(sums)
            loss = sums[0]
            rec = {"iteration": batch.iteration, "loss": float(loss), "iteration_s": seconds, "cpu_s": float(sums[1]),
                   "stall_ms": batch.stall_ms,
                   "planning_ms": batch.planning_ms, "microbatches": len(batch.plan.header.microbatches),
                   "schedule": batch.schedule, "samples": len(batch.lengths), "predicted_ms": batch.predicted_makespan_ms}
            if reference is not None:
                rec.update(check(rank, ex, modules, reference, ref_opt, dataset, batch, a.max_seqlen, float(loss)))
                failed |= not (rec["loss_error"] <= a.tolerance and rec["grad_error"] <= a.tolerance
                               and rec["param_error"] <= a.tolerance)
            records.append(rec)
            if rank == 0:
                extra = (f"  loss err {rec['loss_error']:.1e} grad err {rec['grad_error']:.1e} param err "
                         f"{rec['param_error']:.1e}" if reference is not None else "")
                print(f"iter {rec['iteration']:3d}  loss {rec['loss']:.6f}  {seconds * 1e3:8.1f} ms (CPU "
                      f"{rec['cpu_s'] * 1e3:8.1f} ms over ranks)  stall "
                      f"{batch.stall_ms:6.1f} ms  plan {batch.planning_ms:6.1f} ms  {rec['microbatches']:3d} "
                      f"micro-batches  {batch.schedule}{extra}", flush=True)
                if a.profile:
                    print("  rank 0 ms per kind: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in
                                                             sorted(ex.kind_seconds.items(), key=lambda kv: -kv[1])))
    if rank == 0 and a.json is not None:
        a.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "iterations": records}, indent=1))
    if rank == 0 and a.check:
        print("check: " + ("FAILED" if failed else f"passed (tolerance {a.tolerance:g})"), flush=True)
    return 1 if failed else 0


def check(rank, ex, modules, reference, ref_opt, dataset, batch, max_seqlen, loss) -> dict:
    """Compares this rank's gradients (and, before this step, parameters) with the reference on
    the same global batch; returns the largest relative errors over every rank."""
    ref_params = dict(reference.named_parameters())
    mine = {name: p for m in modules.values() for name, p in stage_parameter_names(m)}
    samples = {k: dataset[i].truncated(max_seqlen) for k, i in enumerate(batch.dataset_ids)}
    # The pipeline's optimizer already stepped: compare the gradients, then step the reference.
    ref_loss = reference_step(reference, samples, 1.0 / batch.loss_tokens)
    grad_err, _ = max_relative_error({k: p.grad for k, p in mine.items()}, {k: ref_params[k].grad for k in mine})
    ref_opt.step()
    param_err, _ = max_relative_error({k: p.detach() for k, p in mine.items()},
                                      {k: ref_params[k].detach() for k in mine})
    errs = torch.tensor([grad_err, param_err], dtype=torch.float64)
    dist.all_reduce(errs, op=dist.ReduceOp.MAX)
    return {"loss_error": abs(loss - ref_loss) / abs(ref_loss), "grad_error": float(errs[0]), "param_error": float(errs[1])}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawned(rank: int, world: int, a) -> None:
    code = worker(rank, world, a)
    if code:
        sys.exit(code)


def main(argv=None) -> int:
    a = parse_args(argv)
    world = a.stages * a.dp
    read_lengths(a.lengths, a.seed)  # a bad file fails here, before any process starts
    if a.spawn:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(free_port())
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one machine: gloo's pairs on the loopback too
        try:
            torch.multiprocessing.spawn(_spawned, args=(world, a), nprocs=world, join=True)
        except torch.multiprocessing.ProcessExitedException as e:
            print(f"train_gpt: {e}", file=sys.stderr)
            return 1
        return 0
    env_world = int(os.environ.get("WORLD_SIZE", "0"))
    if env_world != world:
        raise SystemExit(f"WORLD_SIZE={env_world}, but --stages x --dp = {world}: launch {world} processes "
                         f"(torchrun --nproc_per_node {world}) or pass --spawn")
    return worker(int(os.environ["RANK"]), world, a)


if __name__ == "__main__":
    sys.exit(main())
