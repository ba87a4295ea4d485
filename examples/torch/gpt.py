"""A GPT-style decoder in torch.nn, cut into pipeline stages by pipeplan's layer sharding.

GPT: token + learned position embedding, ``layers`` pre-norm blocks (causal self-attention and
a GeLU MLP), final LayerNorm and an untied LM head; no dropout (runs are deterministic). A stage
(GPTStage) holds a contiguous range of blocks, with the embedding on virtual stage 0 and the head
on the last; it follows pipeplan.torch's stage contract ``stage(x, data)`` and returns on the last
stage the micro-batch's share of the loss: ``loss_scale * sum(loss_mask * cross_entropy)``, so the
iteration's loss is the mean over the global batch's target tokens.

``reference_step`` is the single-process check: every sample of the global batch alone,
unpadded, through the whole model, the same loss; its gradients must equal the pipeline's.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from pipeplan.torch import Sample, build_microbatch, layer_ranges


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 96
    hidden: int = 32
    heads: int = 4
    layers: int = 8
    ffn: int = 128
    max_positions: int = 1024
    dtype: torch.dtype = torch.float64

    def analytic_model_fields(self) -> dict:
        """This shape as pipeplan.AnalyticModel keywords (no dropout, untied head)."""
        return dict(layers=self.layers, hidden=self.hidden, heads=self.heads, ffn_hidden=self.ffn, vocab=self.vocab,
                    max_positions=self.max_positions, dropout=False, tied_embeddings=False)

    def analytic_model(self):
        """pipeplan's analytic cost model of this shape on one CPU core (CPU_CORE): what the
        planner prices this model with."""
        import pipeplan
        return pipeplan.AnalyticModel(hardware=CPU_CORE, overhead_ms_per_kernel=CPU_OVERHEAD_MS_PER_KERNEL,
                                      **self.analytic_model_fields())


#: One CPU core running float64 torch ops, as pipeplan.AnalyticModel hardware: ~2 GFLOP/s,
#: ~5 GB/s memory, ~1 GB/s gloo over loopback; each torch op costs ~10 us of Python dispatch.
CPU_CORE = dict(name="cpu-core", peak_tensor_flops=2e9, memory_bandwidth_bytes_per_s=5e9,
                link_bandwidth_bytes_per_s=1e9, device_memory_mb=16000)
CPU_OVERHEAD_MS_PER_KERNEL = 0.01


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.heads = c.heads
        self.ln1 = nn.LayerNorm(c.hidden, dtype=c.dtype)
        self.qkv = nn.Linear(c.hidden, 3 * c.hidden, dtype=c.dtype)
        self.proj = nn.Linear(c.hidden, c.hidden, dtype=c.dtype)
        self.ln2 = nn.LayerNorm(c.hidden, dtype=c.dtype)
        self.fc = nn.Linear(c.hidden, c.ffn, dtype=c.dtype)
        self.out = nn.Linear(c.ffn, c.hidden, dtype=c.dtype)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(h, dim=-1))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
        att = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(att)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Embedding(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.tokens = nn.Embedding(c.vocab, c.hidden, dtype=c.dtype)
        self.positions = nn.Embedding(c.max_positions, c.hidden, dtype=c.dtype)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.tokens(ids) + self.positions(positions)


class Head(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.norm = nn.LayerNorm(c.hidden, dtype=c.dtype)
        self.lm = nn.Linear(c.hidden, c.vocab, bias=False, dtype=c.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm(self.norm(x))


class GPTStage(nn.Module):
    """Blocks [first, end) of a GPT, with the embedding (stage 0) and the head (last stage)."""

    def __init__(self, embedding: Optional[Embedding], blocks: Sequence[Block], head: Optional[Head], first_block: int):
        super().__init__()
        self.embedding = embedding
        self.blocks = nn.ModuleList(blocks)
        self.head = head
        self.first_block = first_block

    def forward(self, x: Optional[torch.Tensor], data) -> torch.Tensor:
        if self.embedding is not None:
            x = self.embedding(data.input_ids, data.position_ids)
        mask = data.attention_mask
        for block in self.blocks:
            x = block(x, mask)
        if self.head is None:
            return x
        logits = self.head(x)
        losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), data.labels.reshape(-1), reduction="none")
        return (losses * data.loss_mask.reshape(-1).to(losses.dtype)).sum() * data.loss_scale


def build_model(c: GPTConfig, seed: int = 0) -> GPTStage:
    """The whole model (one stage holding everything), initialised from ``seed``."""
    torch.manual_seed(seed)
    return GPTStage(Embedding(c), [Block(c) for _ in range(c.layers)], Head(c), 0)


def stage_modules(model: GPTStage, virtual_stages: int, stages: Sequence[int]) -> Dict[int, GPTStage]:
    """Copies of the parts of ``model`` that virtual stages ``stages`` hold (pipeplan's sharding of
    model.blocks over ``virtual_stages``)."""
    ranges = layer_ranges(len(model.blocks), virtual_stages)
    out = {}
    for v in stages:
        a, b = ranges[v]
        out[v] = GPTStage(copy.deepcopy(model.embedding) if v == 0 else None,
                          [copy.deepcopy(model.blocks[i]) for i in range(a, b)],
                          copy.deepcopy(model.head) if v == virtual_stages - 1 else None, a)
    return out


def stage_parameter_names(stage: GPTStage) -> List[Tuple[str, torch.nn.Parameter]]:
    """The stage's parameters under the whole model's names (blocks renumbered from first_block)."""
    out = []
    for name, p in stage.named_parameters():
        if name.startswith("blocks."):
            _, i, rest = name.split(".", 2)
            name = f"blocks.{int(i) + stage.first_block}.{rest}"
        out.append((name, p))
    return out


def reference_step(model: GPTStage, samples: Dict[int, Sample], loss_scale: float) -> float:
    """Loss and gradients (into model's .grad, zeroed first) of the batch ``samples``, each sample
    alone and unpadded; returns the loss."""
    model.zero_grad(set_to_none=False)
    total = 0.0
    for sid, s in samples.items():
        data = build_microbatch(0, 0, [[sid]], samples, s.tokens.numel(), loss_scale)
        loss = model(None, data)
        loss.backward()
        total += float(loss.detach())
    return total


def synthetic_samples(lengths: Sequence[Tuple[int, int]], vocab: int, seed: int) -> List[Sample]:
    """Samples of (input, target) token counts with token ids drawn from ``seed`` (sample i's ids
    depend only on seed and i)."""
    out = []
    for i, (inp, tgt) in enumerate(lengths):
        g = torch.Generator().manual_seed(seed * 1_000_003 + i)
        out.append(Sample(torch.randint(0, vocab, (inp + tgt,), generator=g), max(1, inp)))
    return out


def max_relative_error(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> Tuple[float, str]:
    """The largest ||a - b|| / ||b|| (||a|| where b is 0) over the names of ``a``, and its name."""
    worst, at = 0.0, ""
    for k, x in a.items():
        y = b[k]
        den = float(y.norm())
        e = float((x - y).norm()) / den if den > 0 else float(x.norm())
        if e > worst:
            worst, at = e, k
    return worst, at
