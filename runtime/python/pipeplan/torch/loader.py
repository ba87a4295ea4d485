"""PlannedLoader: plans iteration i + k while iteration i trains.

The loader draws each iteration's global batch from a batch sampler (any iterable of lists of
dataset indices, e.g. TokenBudgetBatches), plans it with the planner in a background thread
(pipeplan's planner releases the GIL while it plans), and yields for this rank a PlannedBatch:
the rank's plan, the micro-batch tensors of its replica (pipeplan.torch.data), and how long the
training loop waited for the plan (``stall_ms``: 0 in steady state when planning an iteration
takes less than training one). Every rank draws the same batches and plans them with the same
planner and options, so every rank gets the same plan for the same iteration.
"""
from __future__ import annotations

import concurrent.futures
import random
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

from .data import MicroBatchData, as_sample, build_microbatch, microbatch_rows


class TokenBudgetBatches:
    """Global batches as real trainers draw them: shuffle the dataset with ``seed`` (again each
    epoch, seeded by seed + epoch), then take samples until adding the next would pass
    ``tokens`` tokens (at least one sample per batch). ``lengths`` are the samples' lengths
    (after truncation); ``iterations`` bounds the number of batches (None: endless)."""

    def __init__(self, lengths: Sequence[int], tokens: int, *, seed: int = 0, iterations: Optional[int] = None):
        if tokens < 1 or not lengths:
            raise ValueError("TokenBudgetBatches: need samples and a token budget >= 1")
        self.lengths, self.tokens, self.seed, self.iterations = list(lengths), tokens, seed, iterations

    def __iter__(self) -> Iterator[List[int]]:
        epoch, done = 0, 0
        while True:
            order = list(range(len(self.lengths)))
            random.Random(self.seed + epoch).shuffle(order)
            batch: List[int] = []
            used = 0
            for i in order:
                if batch and used + self.lengths[i] > self.tokens:
                    yield batch
                    done += 1
                    if self.iterations is not None and done >= self.iterations:
                        return
                    batch, used = [], 0
                batch.append(i)
                used += self.lengths[i]
            epoch += 1


@dataclass
class PlannedBatch:
    """One iteration for one rank."""
    iteration: int
    plan: Any                       # pipeplan.ExecutionPlan (every rank's programs)
    rank_plan: Any                  # pipeplan.RankPlan of this rank
    microbatches: Dict[int, MicroBatchData]  # this rank's replica's micro-batches, by plan index
    dataset_ids: List[int]          # the global batch: dataset index of each sample id
    lengths: List[int]              # tokens of each sample (after truncation)
    loss_tokens: int                # target tokens of the global batch (the loss's denominator)
    planning_ms: float              # the planner's wall time for this iteration
    prepare_ms: float               # the background job's: samples, planning, tensors
    stall_ms: float                 # how long the training loop waited for this iteration
    schedule: str
    predicted_makespan_ms: float
    lower_bound_ms: float


class PlannedLoader:
    """Iterates PlannedBatch objects for plan rank ``rank`` (see the module docstring).

    dataset: map-style; ``dataset[i]`` is a Sample or a 1-D tensor of token ids.
    batch_sampler: iterable of lists of dataset indices (one list per iteration).
    planner: an object with ``plan(lengths, iteration=i)`` returning a result with ``plan``
        (pipeplan.ExecutionPlan), ``microbatches`` (the plan's table with ``rows`` where packed:
        sample ids are indices into ``lengths``), ``makespan_ms`` and ``lower_bound_ms``
        (pipeplan.Planner, or a wrapper planning baselines).
    lookahead: iterations planned ahead of the one training (>= 1).
    max_seqlen: samples are truncated to this many tokens before planning.
    separator_tokens: padding tokens between two samples of a packed row (the planner's).
    """

    def __init__(self, dataset, batch_sampler: Iterable[Sequence[int]], planner, *, rank: int, lookahead: int = 2,
                 max_seqlen: Optional[int] = None, separator_tokens: int = 0, first_iteration: int = 0):
        if lookahead < 1:
            raise ValueError("PlannedLoader: lookahead must be >= 1")
        self.dataset, self.planner, self.rank = dataset, planner, rank
        self.lookahead, self.max_seqlen, self.separator_tokens = lookahead, max_seqlen, separator_tokens
        self._batches = iter(batch_sampler)
        self._next_iteration = first_iteration
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pipeplan-planner")
        self._pending: List[concurrent.futures.Future] = []
        self.stalls_ms: List[float] = []
        self._exhausted = False

    def __iter__(self) -> "PlannedLoader":
        return self

    def __next__(self) -> PlannedBatch:
        self._fill()
        if not self._pending:
            raise StopIteration
        t0 = time.perf_counter()
        batch = self._pending.pop(0).result()
        stall_ms = (time.perf_counter() - t0) * 1e3
        self._fill()
        if batch is None:
            self._pending.clear()
            raise StopIteration
        batch.stall_ms = stall_ms
        self.stalls_ms.append(stall_ms)
        return batch

    def close(self) -> None:
        """Stops planning ahead (pending plans are dropped)."""
        for f in self._pending:
            f.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "PlannedLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------
    def _fill(self) -> None:
        while not self._exhausted and len(self._pending) < self.lookahead:
            try:
                ids = list(next(self._batches))
            except StopIteration:
                self._exhausted = True
                return
            iteration = self._next_iteration
            self._next_iteration += 1
            self._pending.append(self._pool.submit(self.prepare, iteration, ids))

    def prepare(self, iteration: int, ids: List[int]) -> PlannedBatch:
        """Plans ``ids`` (dataset indices) as ``iteration`` and builds this rank's tensors (what
        the background thread runs; callable directly for a synchronous loader)."""
        t_start = time.perf_counter()
        samples = {k: as_sample(self.dataset[i]).truncated(self.max_seqlen) for k, i in enumerate(ids)}
        lengths = [samples[k].tokens.numel() for k in range(len(ids))]
        t0 = time.perf_counter()
        result = self.planner.plan(lengths, iteration=iteration)
        planning_ms = (time.perf_counter() - t0) * 1e3
        plan = result.plan
        rank_plan = plan.share_of(self.rank)
        h = plan.header
        replica = h.replica_of_rank(self.rank)
        loss_tokens = sum(s.loss_tokens for s in samples.values())
        if loss_tokens == 0:
            raise ValueError(f"iteration {iteration}: the global batch has no target token")
        scale = 1.0 / loss_tokens
        mbs: Dict[int, MicroBatchData] = {}
        for j, m in enumerate(_microbatch_table(result)):
            if m.replica != replica:
                continue
            rows = microbatch_rows(m.sample_ids, m.shape.microbatch_size, getattr(m, "rows", None) or [])
            mbs[j] = build_microbatch(j, replica, rows, samples, m.shape.seqlen, scale, self.separator_tokens)
        prepare_ms = (time.perf_counter() - t_start) * 1e3
        return PlannedBatch(iteration, plan, rank_plan, mbs, list(ids), lengths, loss_tokens, planning_ms, prepare_ms,
                            0.0, h.schedule, float(result.makespan_ms), float(getattr(result, "lower_bound_ms", 0.0)))


def _microbatch_table(result) -> Sequence[Any]:
    """The planned micro-batches in the plan's table order, each with replica, sample_ids, shape
    and (where packed) rows: the result's list (pipeplan.PlanResult.microbatches carries the
    packed rows), else the plan header's."""
    listed = getattr(result, "microbatches", None)
    table = result.plan.header.microbatches
    if listed is None:
        return table
    if len(listed) != len(table):
        raise ValueError(f"the planner result lists {len(listed)} micro-batches, its plan {len(table)}")
    return listed
