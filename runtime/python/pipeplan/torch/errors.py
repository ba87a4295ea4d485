"""Errors of pipeplan.torch: each names the rank and, where one is involved, the instruction
(index, kind, micro-batch, stage, peer), as the C++ executor's do."""
from __future__ import annotations


class PipelineError(RuntimeError):
    """A rank could not run (or finish) its plan. ``rank``, ``index`` (instruction number),
    ``kind``, ``microbatch``, ``stage`` and ``peer`` say where; the fields not involved are None.
    ``mb`` is another name of ``microbatch`` (read-only), for handlers written against it."""

    def __init__(self, message: str, *, rank=None, index=None, kind=None, microbatch=None, stage=None, peer=None):
        super().__init__(message)
        self.rank, self.index, self.kind, self.microbatch, self.stage, self.peer = rank, index, kind, microbatch, stage, peer

    @property
    def mb(self):
        """Another name of ``microbatch``."""
        return self.microbatch


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
