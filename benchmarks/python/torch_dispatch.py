#!/usr/bin/python3
"""Python overhead of pipeplan.torch.PipelineExecutor per instruction.

    meson devenv -C build /usr/bin/python3 benchmarks/python/torch_dispatch.py

Plans one iteration of a GPT-shaped batch with pipeplan (a hidden-8 model priced on one CPU core,
fp64 messages)
and runs rank 0's program with every compute, data and end-of-step handler replaced by a no-op:
what remains is the executor's own work per instruction (dispatch, and for messages the arena
views, isend/irecv and waits over gloo on 127.0.0.1 with a peer running the same program).
Prints the median over --repeats runs of the CPU time (time.thread_time: robust to other load on
the machine) per instruction of compiling the plan (checks, Op records) and of the step, and the
step's wall time per instruction (which includes waiting for the peer).
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import pipeplan
from pipeplan.torch import PipelineExecutor

NOOP_KINDS = ("load_microbatch", "forward", "recompute", "backward", "backward_weight", "free", "reduce_gradients",
              "optimizer_step")


def plan(stages: int, samples: int):
    cpu = dict(peak_tensor_flops=2e9, memory_bandwidth_bytes_per_s=5e9, link_bandwidth_bytes_per_s=1e9)
    model = pipeplan.AnalyticModel(hardware=cpu, layers=8, hidden=8, heads=2, vocab=32, dropout=False,
                                   tied_embeddings=False)
    planner = pipeplan.Planner(model, stages=stages, layers_per_stage=8 // stages, schedule="1f1b", dtype="fp64",
                               memory_mb=40000.0)
    g = torch.Generator().manual_seed(0)
    return planner.plan(torch.randint(16, 512, (samples,), generator=g).tolist()).plan


class Nothing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))


def executor(p, rank: int) -> PipelineExecutor:
    h = p.header
    mods = {s: Nothing() for s in range(h.virtual_stages) if h.device_of_stage(s) == h.device_of_rank(rank)}
    ex = PipelineExecutor(p.share_of(rank), mods, timeout_s=60)
    for k in NOOP_KINDS:
        ex.register_handler(k, lambda op, e: None)
    return ex


def measure(rank: int, world: int, port: int, samples: int, repeats: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    p = plan(world, samples)
    ex = executor(p, rank)
    rp = p.share_of(rank)
    n = len(rp.program.instructions)
    messages = sum(1 for i in rp.program.instructions if i.kind.endswith(("_start", "_wait")))
    compile_s, step_s, step_cpu_s, dispatch_s = [], [], [], []
    for _ in range(repeats):
        t0 = time.thread_time()
        ex.compile(rp)
        compile_s.append(time.thread_time() - t0)
        dist.barrier()
        t0, c0 = time.perf_counter(), time.thread_time()
        ex.run(rp, {})
        step_s.append(time.perf_counter() - t0)
        step_cpu_s.append(time.thread_time() - c0)
        dist.barrier()
        ex.run(rp, {}, profile=True)
        dispatch_s.append(sum(v for k, v in ex.kind_seconds.items() if k in NOOP_KINDS))
    if rank == 0:
        out.put((n, messages, len(p.header.microbatches), statistics.median(compile_s), statistics.median(step_s),
                 statistics.median(step_cpu_s), statistics.median(dispatch_s)))
    dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--samples", type=int, default=256, help="samples of the planned batch")
    a.add_argument("--repeats", type=int, default=20)
    args = a.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=measure, args=(r, 2, port, args.samples, args.repeats, q)) for r in range(2)]
    for p in procs:
        p.start()
    n, messages, mbs, compile_s, step_s, step_cpu_s, dispatch_s = q.get(timeout=600)
    for p in procs:
        p.join()
    print(f"rank 0 of S=2 1F1B: {n} instructions ({messages} message starts/waits), {mbs} micro-batches, "
          f"median of {args.repeats}")
    print(f"  compile (checks + Op records), CPU time: {compile_s * 1e6 / n:7.2f} us per instruction")
    print(f"  step with no-op compute, CPU time of the rank's thread: {step_cpu_s * 1e6 / n:7.2f} us per instruction")
    print(f"  dispatch of one non-message instruction (profile=True, no-op handler): "
          f"{dispatch_s * 1e6 / (n - messages):7.2f} us")
    print(f"  step with no-op compute, wall time (waits for the peer included): {step_s * 1e6 / n:7.2f} us per instruction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
