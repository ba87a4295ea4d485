"""Helpers of the pipeplan.torch tests: a bounded local gloo cluster and the pipeline cases it runs.

run_cluster(world, fn, args, deadline_s) starts ``world`` processes (spawn) bound to 127.0.0.1,
runs ``fn(rank, world, *args)`` in each after init_process_group("gloo"), and returns each
rank's outcome; a process still running at the deadline is killed (the test then fails instead
of hanging). A rank that raises reports the error and exits at once, so that its peers see the
closed connections.
"""
from __future__ import annotations

import datetime
import hashlib
import os
import queue
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "torch"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

TINY = dict(vocab=32, hidden=8, heads=2, layers=8, ffn=16, max_positions=64)


@dataclass
class Outcome:
    rank: int
    ok: bool
    value: Any = None
    error_type: str = ""
    error: str = ""
    fields: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(rank: int, world: int, port: int, fn, args, results, pg_timeout_s: float) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    t0 = time.monotonic()
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=pg_timeout_s))
        value = fn(rank, world, *args)
        results.put(Outcome(rank, True, value, seconds=time.monotonic() - t0))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        f = {k: getattr(e, k, None) for k in ("rank", "index", "kind", "microbatch", "stage", "peer")}
        results.put(Outcome(rank, False, None, type(e).__name__, f"{e}\n{traceback.format_exc()}", f,
                            time.monotonic() - t0))
        time.sleep(0.2)  # let the queue's feeder thread flush
        os._exit(1)
    time.sleep(0.2)
    os._exit(0)


def run_cluster(world: int, fn, args: Sequence[Any] = (), deadline_s: float = 120.0,
                pg_timeout_s: float = 60.0) -> List[Optional[Outcome]]:
    """Runs fn on ``world`` local gloo ranks; [outcome per rank] (None: the rank reported
    nothing, e.g. it was killed)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_child, args=(r, world, port, fn, tuple(args), results, pg_timeout_s), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    out: List[Optional[Outcome]] = [None] * world
    end = time.monotonic() + deadline_s
    while any(o is None for o in out) and time.monotonic() < end:
        try:
            o = results.get(timeout=0.5)
            out[o.rank] = o
        except queue.Empty:
            if all(not p.is_alive() for p in procs) and results.empty():
                break
    for p in procs:
        p.join(timeout=max(0.1, end - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    return out


# ------------------------------------------------------------------------------- the cases
@dataclass(frozen=True)
class Case:
    schedule: str
    stages: int
    dp: int = 1
    chunks: int = 1
    packing: bool = False
    recompute: str = "auto"

    @property
    def name(self) -> str:
        s = f"{self.schedule}-S{self.stages}-dp{self.dp}"
        return s + ("-packed" if self.packing else "")


def tiny_config():
    from gpt import GPTConfig
    return GPTConfig(dtype=torch.float64, **TINY)


def batch_pairs(seed: int = 3, samples: int = 48) -> List[Tuple[int, int]]:
    """(input, target) token counts of the tests' data set (3..40 tokens)."""
    g = torch.Generator().manual_seed(seed)
    inp = torch.randint(2, 30, (samples,), generator=g)
    tgt = torch.randint(1, 11, (samples,), generator=g)
    return [(int(a), int(b)) for a, b in zip(inp, tgt)]


def make_planner(case: Case, hidden_size: Optional[int] = None):
    import pipeplan
    c = tiny_config()
    model = c.analytic_model()
    kw = dict(stages=case.stages, layers_per_stage=c.layers // (case.stages * case.chunks), chunks=case.chunks,
              dp=case.dp, schedule=case.schedule, dtype="fp64", memory_mb=16000.0, packing=case.packing,
              recompute=case.recompute, max_seqlen=TINY["max_positions"])
    if hidden_size is not None:
        kw["hidden_size"] = hidden_size
    return pipeplan.Planner(model, **kw)


def make_loader(case: Case, rank: int, iterations: int, tokens: int = 220):
    from gpt import synthetic_samples
    from pipeplan.torch import PlannedLoader, TokenBudgetBatches
    pairs = batch_pairs()
    dataset = synthetic_samples(pairs, TINY["vocab"], seed=5)
    lengths = [a + b for a, b in pairs]
    return PlannedLoader(dataset, TokenBudgetBatches(lengths, tokens, seed=1, iterations=iterations),
                         make_planner(case), rank=rank, lookahead=2), dataset


def pipeline_cases(rank: int, world: int, cases: Sequence[Case], iterations: int, timeout_s: float) -> Dict[str, dict]:
    """Runs every case on this rank (ranks beyond a case's S x dp sit it out): trains
    ``iterations`` iterations with Adam and compares with the reference each iteration."""
    groups = {}
    for dp in sorted({c.dp for c in cases if c.dp > 1}):
        for s in sorted({c.stages for c in cases if c.dp == dp}):
            groups[(s, dp)] = {d: dist.new_group([r * s + d for r in range(dp)]) for d in range(s)}
    out = {}
    for case in cases:
        dist.barrier()
        if rank < case.stages * case.dp:
            out[case.name] = _run_case(rank, case, iterations, timeout_s, groups.get((case.stages, case.dp)))
        dist.barrier()
    return out


def _run_case(rank: int, case: Case, iterations: int, timeout_s: float, dp_groups) -> dict:
    from gpt import build_model, max_relative_error, reference_step, stage_modules, stage_parameter_names
    from pipeplan.torch import PipelineExecutor, owned_stages
    c = tiny_config()
    model, reference = build_model(c, seed=11), build_model(c, seed=11)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=1e-2)
    ref_params = dict(reference.named_parameters())
    loader, dataset = make_loader(case, rank, iterations)
    rec = {"loss": [], "ref_loss": [], "grad_error": [], "param_error": 0.0, "plan_digest": [], "kinds": set(),
           "schedule": "", "microbatches": [], "packed": False}
    ex = None
    with loader:
        for batch in loader:
            h = batch.plan.header
            if ex is None:
                modules = stage_modules(model, h.virtual_stages, owned_stages(h, rank))
                params = [p for m in modules.values() for p in m.parameters()]
                ex = PipelineExecutor(batch.rank_plan, modules, optimizer=torch.optim.Adam(params, lr=1e-2),
                                      timeout_s=timeout_s, dp_groups=dp_groups)
                mine = {n: p for m in modules.values() for n, p in stage_parameter_names(m)}
            rec["loss"].append(ex.run(batch.rank_plan, batch.microbatches))
            samples = {k: dataset[i] for k, i in enumerate(batch.dataset_ids)}
            rec["ref_loss"].append(reference_step(reference, samples, 1.0 / batch.loss_tokens))
            rec["grad_error"].append(max_relative_error({k: p.grad for k, p in mine.items()},
                                                        {k: ref_params[k].grad for k in mine}))
            ref_opt.step()
            rec["plan_digest"].append(hashlib.sha256(batch.plan.to_bytes()).hexdigest())
            rec["kinds"] |= {f"{i.kind}:{i.mode}" for i in batch.rank_plan.program.instructions}
            rec["schedule"] = batch.schedule
            rec["microbatches"].append(len(h.microbatches))
            rec["packed"] |= any(m.packed for m in batch.microbatches.values())
    rec["param_error"] = max_relative_error({k: p.detach() for k, p in mine.items()},
                                            {k: ref_params[k].detach() for k in mine})
    rec["arena_bytes"] = ex.arena_bytes
    return rec


def killed_rank(rank: int, world: int, victim: int, timeout_s: float) -> dict:
    """S = world, 1F1B: rank ``victim`` exits (os._exit) in its second forward; the others run
    until their executor raises."""
    from gpt import build_model, stage_modules
    from pipeplan.torch import PipelineExecutor, owned_stages
    case = Case("1f1b", world)
    c = tiny_config()
    loader, _ = make_loader(case, rank, 1)
    with loader:
        batch = next(loader)
    h = batch.plan.header
    modules = stage_modules(build_model(c, 11), h.virtual_stages, owned_stages(h, rank))
    if rank == victim:
        stage = next(iter(modules.values()))
        calls = [0]
        original = stage.forward

        def dying_forward(x, data):
            calls[0] += 1
            if calls[0] == 2:
                os._exit(3)
            return original(x, data)
        stage.forward = dying_forward
    ex = PipelineExecutor(batch.rank_plan, modules, optimizer=torch.optim.SGD(
        [p for m in modules.values() for p in m.parameters()], lr=0.1), timeout_s=timeout_s)
    return _timed_step(ex, batch)


def _timed_step(ex, batch) -> dict:
    """Runs one step; what it raised (type, message, fields) and after how many seconds."""
    from pipeplan.torch import PipelineError
    dist.barrier()
    t0 = time.monotonic()
    try:
        ex.run(batch.rank_plan, batch.microbatches)
        return {"error_type": "", "step_s": time.monotonic() - t0}
    except PipelineError as e:
        return {"error_type": type(e).__name__, "message": str(e), "step_s": time.monotonic() - t0,
                "fields": {k: getattr(e, k) for k in ("rank", "index", "kind", "microbatch", "stage", "peer")}}


def stalled_rank(rank: int, world: int, sleeper: int, sleep_s: float, timeout_s: float) -> dict:
    """S = 2: rank ``sleeper`` sleeps ``sleep_s`` in its first forward; the other's wait must time out."""
    from gpt import build_model, stage_modules
    from pipeplan.torch import PipelineExecutor, owned_stages
    case = Case("1f1b", world)
    loader, _ = make_loader(case, rank, 1)
    with loader:
        batch = next(loader)
    h = batch.plan.header
    modules = stage_modules(build_model(tiny_config(), 11), h.virtual_stages, owned_stages(h, rank))
    if rank == sleeper:
        stage = next(iter(modules.values()))
        original = stage.forward

        def slow_forward(x, data):
            time.sleep(sleep_s)
            return original(x, data)
        stage.forward = slow_forward
    ex = PipelineExecutor(batch.rank_plan, modules, optimizer=torch.optim.SGD(
        [p for m in modules.values() for p in m.parameters()], lr=0.1), timeout_s=timeout_s)
    return _timed_step(ex, batch)
