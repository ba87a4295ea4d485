"""pipeplan.torch: runs pipeplan's execution plans in PyTorch trainers.

- PipelineExecutor: one rank's program with torch.distributed (gloo or NCCL), handlers per
  instruction kind, receive buffers in one arena laid out by the plan (executor.py);
- PlannedLoader: plans iteration i + k in a background thread while iteration i trains and
  yields each rank its plan and micro-batch tensors (loader.py, data.py);
- layer_ranges: pipeplan's layer sharding of a transformer over virtual stages (stages.py).

docs/torch.md describes the contracts, the measured overheads and what was run on which backend.
"""
from .data import MicroBatchData, Sample, as_sample, build_microbatch
from .errors import PipelineError, PlanRejected, ShapeMismatch, StepFailed, StepTimeout
from .executor import PipelineExecutor
from .loader import PlannedBatch, PlannedLoader, TokenBudgetBatches
from .stages import layer_ranges, owned_stages

__all__ = [
    "MicroBatchData", "Sample", "as_sample", "build_microbatch", "PipelineError", "PlanRejected", "ShapeMismatch",
    "StepFailed", "StepTimeout", "PipelineExecutor", "PlannedBatch", "PlannedLoader", "TokenBudgetBatches",
    "layer_ranges", "owned_stages",
]
