"""Errors of pipeplan.torch: each names the rank and, where one is involved, the instruction
(index, kind, micro-batch, stage, peer), as the C++ executor's do."""
from __future__ import annotations


class PipelineError(RuntimeError):
    """A rank could not run (or finish) its plan. ``rank``, ``index`` (instruction number),
    ``kind``, ``mb``, ``stage`` and ``peer`` say where; the fields not involved are None."""

    def __init__(self, message: str, *, rank=None, index=None, kind=None, mb=None, stage=None, peer=None):
        super().__init__(message)
        self.rank, self.index, self.kind, self.mb, self.stage, self.peer = rank, index, kind, mb, stage, peer


class PlanRejected(PipelineError, ValueError):
    """The plan was rejected before any instruction ran (a slot, peer, stage or handler missing,
    a message whose bytes disagree with its shape and element type, a wait without its start)."""


class StepFailed(PipelineError):
    """An instruction failed while the step ran (a handler raised, a peer closed the
    connection, a tensor disagreed with the plan)."""


class ShapeMismatch(StepFailed, ValueError):
    """A tensor's shape, element type or byte size disagrees with what the plan says for it."""


class StepTimeout(StepFailed, TimeoutError):
    """A wait for a message or a collective exceeded the executor's timeout."""
