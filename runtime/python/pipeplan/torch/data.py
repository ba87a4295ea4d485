"""Micro-batch tensors of a planned iteration: padded rows, or packed rows with position ids.

A sample is a 1-D tensor of token ids and the index where its target begins (``Sample``); the
model predicts token t + 1 from tokens <= t, and the loss covers the predictions of target
tokens (positions ``target_start - 1 .. length - 2``). A micro-batch of the plan runs as
``[rows, seqlen]`` tensors (seqlen = the plan's padded length): one sample per row, or, where
the plan packs, several samples per row one after another, each with its own positions
(0, 1, ...) and segment, so that attention never crosses samples.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import torch


@dataclass
class Sample:
    """One training sample: token ids and the index of its first target token (>= 1)."""
    tokens: torch.Tensor
    target_start: int = 1

    def truncated(self, max_seqlen: Optional[int]) -> "Sample":
        if max_seqlen is None or self.tokens.numel() <= max_seqlen:
            return self
        return Sample(self.tokens[:max_seqlen], min(self.target_start, max_seqlen))

    @property
    def loss_tokens(self) -> int:
        """Target tokens the loss covers (predictions of tokens target_start .. length - 1)."""
        return max(0, self.tokens.numel() - max(1, self.target_start))


def as_sample(item) -> Sample:
    """A dataset item as a Sample (a Sample, or a 1-D tensor of token ids: every next token is a
    target)."""
    if isinstance(item, Sample):
        return item
    if isinstance(item, torch.Tensor) and item.dim() == 1:
        return Sample(item, 1)
    raise TypeError(f"a dataset item must be a pipeplan.torch.Sample or a 1-D tensor of token ids, not {type(item)}")


@dataclass
class MicroBatchData:
    """The tensors of one micro-batch (``[rows, seqlen]`` each).

    input_ids: token ids (0 in padding); labels: the next token of the same sample (0 where
    none); loss_mask: True where the label is a target token; position_ids: position within the
    sample; segment_ids: the sample's index within its row (-1 in padding). ``loss_scale`` is
    1 / the global batch's loss tokens, so that the sum over micro-batches of
    ``loss_scale * sum(loss_mask * token_loss)`` is the mean over the global batch.
    """
    index: int
    replica: int
    sample_ids: List[int]
    rows: List[List[int]]
    input_ids: torch.Tensor
    labels: torch.Tensor
    loss_mask: torch.Tensor
    position_ids: torch.Tensor
    segment_ids: torch.Tensor
    loss_scale: float
    _mask: Optional[torch.Tensor] = field(default=None, repr=False)

    @property
    def packed(self) -> bool:
        return any(len(r) > 1 for r in self.rows)

    @property
    def attention_mask(self) -> torch.Tensor:
        """``[rows, seqlen, seqlen]`` bool: query t may attend key u (u <= t, same segment)."""
        if self._mask is None:
            s = self.segment_ids
            n = s.shape[1]
            causal = torch.ones(n, n, dtype=torch.bool, device=s.device).tril_()
            self._mask = (s[:, :, None] == s[:, None, :]) & causal
        return self._mask

    def to(self, device) -> "MicroBatchData":
        d = torch.device(device)
        if self.input_ids.device == d:
            return self
        move = {k: getattr(self, k).to(d, non_blocking=True)
                for k in ("input_ids", "labels", "loss_mask", "position_ids", "segment_ids")}
        return MicroBatchData(self.index, self.replica, self.sample_ids, self.rows, loss_scale=self.loss_scale, **move)


def build_microbatch(index: int, replica: int, rows: Sequence[Sequence[int]], samples: Dict[int, Sample],
                     seqlen: int, loss_scale: float, separator_tokens: int = 0) -> MicroBatchData:
    """The tensors of a micro-batch of ``rows`` (sample ids per row) padded to ``seqlen``;
    samples of one row are separated by ``separator_tokens`` padding tokens."""
    n = len(rows)
    input_ids = torch.zeros(n, seqlen, dtype=torch.long)
    labels = torch.zeros(n, seqlen, dtype=torch.long)
    loss_mask = torch.zeros(n, seqlen, dtype=torch.bool)
    position_ids = torch.zeros(n, seqlen, dtype=torch.long)
    segment_ids = torch.full((n, seqlen), -1, dtype=torch.long)
    for r, row in enumerate(rows):
        at = 0
        for k, sid in enumerate(row):
            s = samples[sid]
            length = s.tokens.numel()
            if at + length > seqlen:
                raise ValueError(f"micro-batch {index}: row {r} (samples {list(row)}) needs {at + length} tokens, the "
                                 f"plan's padded length is {seqlen}")
            sl = slice(at, at + length)
            input_ids[r, sl] = s.tokens
            labels[r, at:at + length - 1] = s.tokens[1:]
            loss_mask[r, at + max(1, s.target_start) - 1:at + length - 1] = True
            position_ids[r, sl] = torch.arange(length)
            segment_ids[r, sl] = k
            at += length + separator_tokens
    sample_ids = [sid for row in rows for sid in row]
    return MicroBatchData(index, replica, sample_ids, [list(r) for r in rows], input_ids, labels, loss_mask,
                          position_ids, segment_ids, loss_scale)


def microbatch_rows(sample_ids: Sequence[int], shape_rows: int, rows: Sequence[Sequence[int]]) -> List[List[int]]:
    """The rows of a plan micro-batch: its packed rows when the planner packed it, else one row
    per sample. Checks that the rows hold exactly the micro-batch's samples, one row per plan row."""
    out = [list(r) for r in rows] if rows else [[s] for s in sample_ids]
    if sorted(s for r in out for s in r) != sorted(sample_ids) or len(out) != shape_rows:
        raise ValueError(f"the micro-batch's {len(out)} rows {out} do not hold its samples {list(sample_ids)} in "
                         f"{shape_rows} rows")
    return out
