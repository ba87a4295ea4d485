"""pipeplan: plans pipeline-parallel training of variable-length batches.

A thin binding of pipeplan's C++ headers (the extension ``pipeplan._pipeplan``): cost models,
the planner, execution plans and their files. ``pipeplan.torch`` runs the plans in PyTorch.
See docs/python.md for the API and a runnable example.
"""
from pkgutil import extend_path

# In a build tree the package's Python files (source folder) and the extension (build folder)
# are two folders on PYTHONPATH; this joins them into one package. Installed, both are in one
# folder and this changes nothing.
__path__ = extend_path(__path__, __name__)

from ._pipeplan import (  # noqa: E402  (after __path__ is complete)
    NO_PEER,
    NO_SLOT,
    AnalyticModel,
    Buffer,
    Candidate,
    ExecutionPlan,
    Instruction,
    LimitExceeded,
    MicroBatch,
    PlanHeader,
    PlanResult,
    Planner,
    ProfileModel,
    RankPlan,
    RankProgram,
    TensorShape,
    ValidationReport,
    Violation,
    __version__,
    dtype_bytes,
    equal_layer_counts,
    hardware_presets,
    instruction_dtype,
    kind_code,
    kind_name,
    kinds,
    model_presets,
    plan_from_bytes,
    rank_plan_from_bytes,
    read_plan,
    read_rank_plan,
    write_plan,
)

__all__ = [
    "NO_PEER", "NO_SLOT", "AnalyticModel", "Buffer", "Candidate", "ExecutionPlan", "Instruction",
    "LimitExceeded", "MicroBatch", "PlanHeader", "PlanResult", "Planner", "ProfileModel", "RankPlan",
    "RankProgram", "TensorShape", "ValidationReport", "Violation", "__version__", "dtype_bytes",
    "equal_layer_counts", "hardware_presets", "instruction_dtype", "kind_code", "kind_name", "kinds", "model_presets",
    "plan_from_bytes", "rank_plan_from_bytes", "read_plan", "read_rank_plan", "write_plan",
]
