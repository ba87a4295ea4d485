"""Which layers a virtual stage holds, and which virtual stages a rank runs."""
from __future__ import annotations

from typing import List, Tuple

from .._pipeplan import equal_layer_counts


def layer_ranges(layers: int, stages: int) -> List[Tuple[int, int]]:
    """pipeplan's layer sharding (the partition tier's method ``layers``,
    ``pipeplan.equal_layer_counts``): ``layers`` transformer layers in ``stages`` contiguous
    non-empty ranges ``[first, end)`` of equal counts, the remainder to the first stages; the
    embedding rides with stage 0's first layer and the LM head with the last stage's last layer.
    ValueError unless 1 <= stages <= layers."""
    out, at = [], 0
    for n in equal_layer_counts(layers, stages):
        out.append((at, at + n))
        at += n
    return out


def owned_stages(header, rank: int) -> List[int]:
    """The virtual stages the plan's placement puts on ``rank``'s pipeline device."""
    device = header.device_of_rank(rank)
    return [s for s in range(header.virtual_stages) if header.device_of_stage(s) == device]
