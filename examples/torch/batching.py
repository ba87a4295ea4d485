"""How train_gpt.py forms micro-batches: pipeplan's planner, or one of two baselines planned
with the same planner on given micro-batches (Planner.plan_microbatches) under 1F1B.

- ``pipeplan``: the planner's exact split and chosen schedule (what pipeplan is for);
- ``packing`` (Megatron-LM's way): samples concatenated in dataset order into rows of
  ``pack_tokens`` (a sample that does not fit starts a new row; rows attend only within a
  sample), ``mbs`` rows per micro-batch, every row ``pack_tokens`` long;
- ``padding``: ``mbs`` samples per micro-batch in dataset order, every sample padded to the
  longest sample of the global batch.
Each planner wrapper has PlannedLoader's ``plan(lengths, iteration=)``; the result's micro-batches
name the real samples (and, for packing, their rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Sequence


@dataclass
class GivenMicroBatch:
    """A baseline's micro-batch: the real samples, their rows and the plan's shape and replica."""
    replica: int
    sample_ids: List[int]
    rows: List[List[int]]
    shape: Any


@dataclass
class GivenResult:
    plan: Any
    microbatches: List[GivenMicroBatch]
    makespan_ms: float
    lower_bound_ms: float
    schedule: str


def pack_rows(lengths: Sequence[int], pack_tokens: int) -> List[List[int]]:
    """Samples in order into rows of at most ``pack_tokens`` tokens (a new row when the next
    sample does not fit)."""
    rows: List[List[int]] = []
    used = pack_tokens + 1
    for i, n in enumerate(lengths):
        if n > pack_tokens:
            raise ValueError(f"sample {i} has {n} tokens, more than a packed row ({pack_tokens})")
        if used + n > pack_tokens:
            rows.append([])
            used = 0
        rows[-1].append(i)
        used += n
    return rows


class PackingPlanner:
    """Megatron-style packing, then ``mbs`` rows per micro-batch (see the module docstring)."""

    def __init__(self, planner, mbs: int, pack_tokens: int):
        self.planner, self.mbs, self.pack_tokens = planner, mbs, pack_tokens

    def plan(self, lengths: Sequence[int], iteration: int = 0) -> GivenResult:
        rows = pack_rows(lengths, self.pack_tokens)
        groups = [list(range(k, min(k + self.mbs, len(rows)))) for k in range(0, len(rows), self.mbs)]
        r = self.planner.plan_microbatches([self.pack_tokens] * len(rows), groups, iteration=iteration)
        return _given(r, lambda row_ids: [rows[i] for i in row_ids])


class PaddingPlanner:
    """``mbs`` samples per micro-batch, all padded to the batch's longest sample."""

    def __init__(self, planner, mbs: int):
        self.planner, self.mbs = planner, mbs

    def plan(self, lengths: Sequence[int], iteration: int = 0) -> GivenResult:
        n = len(lengths)
        groups = [list(range(k, min(k + self.mbs, n))) for k in range(0, n, self.mbs)]
        r = self.planner.plan_microbatches([max(lengths)] * n, groups, iteration=iteration)
        return _given(r, lambda ids: [[i] for i in ids])


def _given(r, rows_of) -> GivenResult:
    mbs = []
    for m in r.plan.header.microbatches:
        rows = rows_of(list(m.sample_ids))
        mbs.append(GivenMicroBatch(m.replica, [s for row in rows for s in row], rows, m.shape))
    return GivenResult(r.plan, mbs, r.makespan_ms, r.lower_bound_ms, r.schedule)
