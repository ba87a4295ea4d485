"""PipelineExecutor: runs one rank's pipeplan program with PyTorch and torch.distributed.

The program (``RankPlan.program.instructions``) runs strictly in order; every instruction kind
has a handler (include/pipeplan/plan/instruction.hpp defines what each must do):

- ``load_microbatch``: moves the micro-batch's data to the stage modules' device;
- ``forward`` (mode ``store``): runs the stage module with autograd on a private copy of its
  input and keeps the graph (the stash); mode ``checkpoint``: runs it without autograd and keeps
  only the input buffer (the checkpoint) and the RNG state; ``recompute`` re-runs a
  checkpointed forward from its checkpoint with autograd; a backward of a checkpointed forward
  with no recompute before it recomputes inline;
- ``backward`` (mode ``whole``): input and weight gradients in one autograd pass; mode
  ``input_only`` (zero-bubble "B"): ``torch.autograd.grad`` with respect to the stage input and
  to the outputs of the stage's parametrised leaf modules, keeping the graph; ``backward_weight``
  ("W") then back-propagates each leaf module's output gradient into that module's parameters
  only (parameters shared between modules, or modules called twice, are back-propagated from
  the stage output instead), so B + W compute the same gradients as one whole backward;
- ``send_*_start`` / ``recv_*_start``: ``torch.distributed`` P2P operations on views of the
  rank's arena, shaped ``[microbatch_size, seqlen + dec_seqlen, hidden]`` with the plan's element
  type (no shape exchange); a run of consecutive starts is posted with ``batch_isend_irecv``
  (one NCCL group); ``*_wait`` waits for the start's request with the executor's timeout;
- ``free``: nothing to release (arena buffers are reused at the plan's offsets; the stash of a
  micro-batch is dropped by its last backward);
- ``reduce_gradients``: sums the gradients of this rank's parameters over its data-parallel
  group (the ranks holding the same pipeline device in every replica) in one flat collective;
- ``optimizer_step``: ``optimizer.step()``; ``set_frequency``: skipped unless a handler is
  registered; ``overlap_f_b``: skipped unless a handler is registered (the overlapped pair's
  forward and backward, the next two compute instructions, then run in program order);
  ``user<N>``: the registered handler.

The stage modules' contract: ``module(x, data)`` where ``x`` is the stage's input activation
(None on virtual stage 0) and ``data`` the micro-batch's data object (``data.to(device)`` is
called once when present); it returns the output activation, shaped and typed as the plan's
messages, or on the last virtual stage a scalar: this micro-batch's share of the loss (the loss
of the iteration is the sum of these shares, so each share must already be scaled, e.g. by
1 / the global batch's loss tokens).

Memory: activations and gradients that travel (or pass between two stages of this rank) live
in one arena tensor per rank, at the offsets of the plan's buffer planner; the arena covers the
plan's message buffers (activation and gradient roles), not its stash and workspace buffers,
because autograd keeps a stage's saved tensors itself.

Failures: a wait that exceeds ``timeout_s`` raises StepTimeout, any other failure StepFailed
(ShapeMismatch for a tensor that disagrees with the plan); both name the rank, the instruction,
its micro-batch and stage and, for messages, the peer. A plan that cannot run is rejected with
PlanRejected before any instruction runs.
"""
from __future__ import annotations

import datetime
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import torch
import torch.distributed as dist

from .errors import PipelineError, PlanRejected, ShapeMismatch, StepFailed, StepTimeout

#: torch element types of the plan's dtype names (fp8 has no torch 1.13 type).
TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
_ITEMSIZE = {name: torch.empty(0, dtype=t).element_size() for name, t in TORCH_DTYPES.items()}

MESSAGE_ROLES = frozenset({"activation_in", "activation_out", "grad_in", "grad_out"})
_STARTS = {"send_activation_start": True, "send_grad_start": True,
           "recv_activation_start": False, "recv_grad_start": False}
_WAITS = {"send_activation_wait": "send_activation_start", "send_grad_wait": "send_grad_start",
          "recv_activation_wait": "recv_activation_start", "recv_grad_wait": "recv_grad_start"}
_MESSAGE_KINDS = frozenset(_STARTS) | frozenset(_WAITS)
# Kinds that only advise the executor: skipped when no handler is registered.
_HINT_KINDS = frozenset(("set_frequency", "overlap_f_b"))


_NO_SLOT = 0xFFFFFFFF


class Op:
    """One instruction as the executor reads it: the fields of ``pipeplan.Instruction`` (kind,
    mode and dtype as names; slots None when unused; ``shape`` = (microbatch_size, seqlen +
    dec_seqlen, hidden)), copied once per plan from ``RankProgram.instructions_array()``.
    ``request`` pairs a message start with its wait; ``group`` is the first instruction index of
    the run of starts it is posted with."""

    __slots__ = ("index", "kind", "mode", "dtype", "microbatch", "stage", "peer", "in_slot", "out_slot",
                 "stash_slot", "work_slot", "shape", "bytes", "frequency_mhz", "request", "group")

    def __init__(self, index: int, names, microbatch, stage, peer, slots, shape, nbytes, clock_mhz=0):
        self.index = index
        self.kind, self.mode, self.dtype = names
        self.microbatch, self.stage, self.peer = microbatch, stage, peer
        self.in_slot, self.out_slot, self.stash_slot, self.work_slot = (None if x == _NO_SLOT else x for x in slots)
        self.shape = shape
        self.bytes = nbytes
        self.frequency_mhz = clock_mhz if self.kind == "set_frequency" else None
        self.request = None
        self.group = None

    @property
    def mb(self) -> int:
        """Another name of ``microbatch`` (read-only), for handlers written against it."""
        return self.microbatch

    def describe(self) -> str:
        """'instruction #i forward (micro-batch m, stage s[, peer p])', as the C++ executor says."""
        s = f"instruction #{self.index} {self.kind} (micro-batch {self.microbatch}, stage {self.stage}"
        if self.peer is not None and self.peer >= 0:
            s += f", peer {self.peer}"
        return s + ")"


class _Checkpoint:
    """A checkpointed forward: its input (the arena view the plan keeps live) and RNG state."""
    __slots__ = ("x_view", "rng")

    def __init__(self, x_view, rng):
        self.x_view, self.rng = x_view, rng


class _Stored:
    """A forward with autograd: its input leaf, output, captured leaf-module outputs and, after
    an input-only backward, their gradients and the output gradient."""
    __slots__ = ("x", "y", "captured", "captured_grads", "dy")

    def __init__(self, x, y, captured):
        self.x, self.y, self.captured = x, y, captured
        self.captured_grads = None
        self.dy = None


def _rng_state(device: torch.device):
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


def _set_rng_state(device: torch.device, state) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


class PipelineExecutor:
    """Runs rank plans of pipeplan on this process's rank (see the module docstring).

    rank_plan: the first plan (``pipeplan.RankPlan``); later iterations pass theirs to run().
    stage_modules: ``{virtual stage: torch.nn.Module}`` for every virtual stage the plan places
        on this rank's device (other stages are an error).
    optimizer: stepped by ``optimizer_step`` (without one, register an ``optimizer_step``
        handler).
    timeout_s: longest wait for one message or collective.
    rank_map: torch.distributed rank of each plan rank (default: the same number).
    dp_groups: ``{device: process group}`` of the data-parallel groups; by default the
        constructor creates them with ``dist.new_group`` (a collective call: construct the
        executor on every rank in the same order).
    batch_p2p: post runs of consecutive message starts with ``batch_isend_irecv`` (NCCL group
        calls); default: True.
    validate: before running a plan, also check the plan tier's rules for one rank
        (``RankPlan.validate()``: buffer lifetimes, compute order, end of iteration).
    """

    def __init__(self, rank_plan: Any, stage_modules: Mapping[int, torch.nn.Module], *,
                 optimizer: Optional[torch.optim.Optimizer] = None, timeout_s: float = 30.0,
                 rank_map: Optional[Sequence[int]] = None, dp_groups: Optional[Mapping[int, Any]] = None,
                 batch_p2p: bool = True, validate: bool = True):
        if not stage_modules:
            raise ValueError("PipelineExecutor: no stage modules")
        self.plan = rank_plan
        self.modules: Dict[int, torch.nn.Module] = dict(stage_modules)
        self.optimizer = optimizer
        self.timeout_s = float(timeout_s)
        self.batch_p2p = batch_p2p
        self.validate = validate
        h = rank_plan.header
        self._devices, self._dp = h.devices, h.dp
        self.rank = rank_plan.program.rank
        self._rank_map = list(rank_map) if rank_map is not None else list(range(h.ranks))
        if len(self._rank_map) != h.ranks:
            raise ValueError(f"PipelineExecutor: rank_map has {len(self._rank_map)} ranks, the plan {h.ranks}")
        params = [p for s in sorted(self.modules) for p in self.modules[s].parameters()]
        self.device = params[0].device if params else torch.device("cpu")
        self._params = [p for p in params if p.requires_grad]
        self._handlers: Dict[str, Callable[[Op], None]] = {
            "load_microbatch": self._load, "forward": self._forward, "recompute": self._recompute,
            "backward": self._backward, "backward_weight": self._backward_weight, "free": self._free,
            "reduce_gradients": self._reduce, "optimizer_step": self._step,
        }
        self._dp_group = self._make_dp_group(dp_groups)
        self._capture: Optional[list] = None
        for m in self.modules.values():
            self._hook_leaf_modules(m)
        self._names: Dict[tuple, tuple] = {}
        if dist.is_initialized() and dist.get_backend() == "nccl":
            # batch_isend_irecv's first NCCL call must involve every rank: one collective first.
            dist.all_reduce(torch.zeros(1, device=self.device))
        self._arena = torch.empty(0, dtype=torch.uint8, device=self.device)
        self.arena_bytes = 0
        self.loss = 0.0
        self.kind_seconds: Optional[Dict[str, float]] = None

    # ----------------------------------------------------------------------------- handlers
    def register_handler(self, kind: str, fn: Callable[[Op, "PipelineExecutor"], None]) -> None:
        """Runs ``fn(op, executor)`` for every instruction of ``kind`` (a built-in name or
        'user<N>'), replacing the built-in handler. Message kinds belong to the executor."""
        if kind in _MESSAGE_KINDS:
            raise ValueError(f"register_handler: {kind} is run by the executor's transport")
        self._handlers[kind] = lambda op: fn(op, self)

    def has_handler(self, kind: str) -> bool:
        return kind in self._handlers or kind in _MESSAGE_KINDS

    # ---------------------------------------------------------------------------- the step
    def run(self, rank_plan: Any = None, microbatches: Optional[Mapping[int, Any]] = None,
            *, profile: bool = False) -> float:
        """Runs one iteration of ``rank_plan`` (default: the constructor's) on the micro-batch
        data ``{plan micro-batch index: data}`` (entries this rank needs: its replica's
        micro-batches). Zeroes the gradients first; returns this rank's share of the loss (the
        sum of its last-stage forwards). With ``profile``, ``kind_seconds`` gets the time spent
        per instruction kind."""
        if rank_plan is not None:
            self.plan = rank_plan
        ops = self.compile(self.plan)
        self._data_in = microbatches if microbatches is not None else {}
        self._data: Dict[int, Any] = {}
        self._stash: Dict[tuple, Any] = {}
        self._requests: Dict[int, Any] = {}
        self.loss = 0.0
        self._losses: List[torch.Tensor] = []
        for p in self._params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.detach_().zero_()
        handlers = self._handlers
        times: Optional[Dict[str, float]] = {} if profile else None
        op = None
        try:
            for op in ops:
                if times is None:
                    self._dispatch(op, handlers)
                else:
                    t0 = time.perf_counter()
                    self._dispatch(op, handlers)
                    times[op.kind] = times.get(op.kind, 0.0) + time.perf_counter() - t0
        except PipelineError:
            raise
        except Exception as e:  # noqa: BLE001 - every failure becomes a StepFailed naming the instruction
            raise self._failure(op, e) from e
        finally:
            self._stash.clear()
            self._requests.clear()
        self.kind_seconds = times
        # One host synchronisation per step (not per micro-batch) on an accelerator.
        self.loss = float(torch.stack(self._losses).sum()) if self._losses else 0.0
        return self.loss

    def _dispatch(self, op: Op, handlers) -> None:
        kind = op.kind
        if kind in _STARTS:
            if op.group == op.index:
                self._post_group(op)
        elif kind in _WAITS:
            self._wait(op)
        elif kind in handlers:
            handlers[kind](op)
        elif kind not in _HINT_KINDS:
            raise StepFailed(self._where(op) + ": no handler is registered for this kind", **self._fields(op))

    # ------------------------------------------------------------------------ plan checking
    def compile(self, rank_plan: Any) -> List[Op]:
        """Checks ``rank_plan`` for this rank and executor (raises PlanRejected) and returns
        its instructions as Op records with each message's request and group filled in."""
        h, prog = rank_plan.header, rank_plan.program
        if prog.rank != self.rank:
            raise PlanRejected(f"rank {self.rank}: was given the plan of rank {prog.rank}", rank=self.rank)
        if (h.devices, h.dp) != (self._devices, self._dp):
            raise PlanRejected(f"rank {self.rank}: the plan has {h.devices} devices x {h.dp} replicas, this executor "
                               f"was built for {self._devices} x {self._dp}", rank=self.rank)
        if self.validate:
            report = rank_plan.validate(raise_error=False)
            if not report.ok:
                raise PlanRejected(f"rank {self.rank}: invalid plan:\n{report}", rank=self.rank)
        buffers = prog.buffers
        self._buffers = [(b.offset_bytes, b.size_bytes, b.role) for b in buffers]
        self._last_stage = h.virtual_stages - 1
        device = h.device_of_rank(self.rank)
        owned = {s for s in range(h.virtual_stages) if h.device_of_stage(s) == device}
        if set(self.modules) != owned:
            raise PlanRejected(f"rank {self.rank}: the plan places virtual stages {sorted(owned)} on this rank, the "
                               f"executor has modules for {sorted(self.modules)}", rank=self.rank)
        ops = self._ops_of(prog)
        nmb = len(h.microbatches)
        open_starts: List[Op] = []
        group = None
        for op in ops:
            self._check_op(op, nmb, len(buffers), h.ranks)
            if op.kind in _STARTS:
                group = op.index if group is None or not self.batch_p2p else group
                op.group = group
                op.request = op.index
                open_starts.append(op)
                continue
            group = None
            if op.kind in _WAITS:
                start = next((s for s in open_starts if s.kind == _WAITS[op.kind] and s.microbatch == op.microbatch
                              and s.stage == op.stage and s.peer == op.peer), None)
                if start is None:
                    raise self._rejected(op, "waits for a message that was not started (or was already waited for)")
                open_starts.remove(start)
                op.request = start.index
        if open_starts:
            raise self._rejected(open_starts[0], "is never waited for")
        self._ops_cache = ops
        self._split = {(op.microbatch, op.stage) for op in ops if op.kind == "backward" and op.mode == "input_only"}
        end = max((o + s for (o, s, r) in self._buffers if r in MESSAGE_ROLES), default=0)
        if end > rank_plan.program.arena_bytes:
            raise PlanRejected(f"rank {self.rank}: a buffer ends at byte {end}, outside the arena of "
                               f"{rank_plan.program.arena_bytes} bytes", rank=self.rank)
        if self._arena.numel() < end:
            self._arena = torch.empty(end, dtype=torch.uint8, device=self.device)
        self.arena_bytes = end
        return ops

    def _ops_of(self, prog: Any) -> List[Op]:
        """The program as Op records: the fields from the NumPy array of the instructions (one
        call), the kind, mode and dtype names from the binding's Instruction objects, once per
        distinct (kind, mode, dtype) code."""
        array = prog.instructions_array()
        f = {name: k for k, name in enumerate(array.dtype.names)}
        kind, mode, dtype, mb, stage, peer = (f[k] for k in ("kind", "mode", "dtype", "microbatch", "stage", "peer"))
        slots = [f[k] for k in ("in_slot", "out_slot", "stash_slot", "work_slot")]
        b, s, d, h, nbytes, mhz = (f[k] for k in ("microbatch_size", "seqlen", "dec_seqlen", "hidden", "bytes",
                                                  "clock_mhz"))
        objects = None
        ops = []
        for i, r in enumerate(array.tolist()):
            key = (r[kind], r[mode], r[dtype])
            names = self._names.get(key)
            if names is None:
                if objects is None:
                    objects = prog.instructions
                x = objects[i]
                names = self._names[key] = (x.kind, x.mode, x.dtype)
            ops.append(Op(i, names, r[mb], r[stage], r[peer], [r[k] for k in slots], (r[b], r[s] + r[d], r[h]),
                          r[nbytes], r[mhz]))
        return ops

    def _check_op(self, op: Op, microbatches: int, buffers: int, ranks: int) -> None:
        for slot in (op.in_slot, op.out_slot, op.stash_slot, op.work_slot):
            if slot is not None and slot >= buffers:
                raise self._rejected(op, f"slot {slot} is not in the buffer table ({buffers} buffers)")
        kind = op.kind
        if kind in ("forward", "recompute", "backward", "backward_weight", "load_microbatch"):
            if op.microbatch >= microbatches:
                raise self._rejected(op, f"micro-batch {op.microbatch} is not in the micro-batch table ({microbatches})")
        if kind in ("forward", "recompute", "backward", "backward_weight") and op.stage not in self.modules:
            raise self._rejected(op, f"virtual stage {op.stage} has no module on this rank")
        if kind not in _MESSAGE_KINDS:
            builtin_step = kind == "optimizer_step" and self._handlers.get(kind) == self._step
            if (kind not in self._handlers and kind not in _HINT_KINDS and kind != "free") or \
                    (builtin_step and self.optimizer is None):
                raise self._rejected(op, "no handler is registered for this kind" +
                                     (" (pass optimizer= or register one)" if kind == "optimizer_step" else ""))
            return
        if op.peer is None or op.peer < 0 or op.peer >= ranks or op.peer == self.rank:
            raise self._rejected(op, f"peer {op.peer} is not another rank of the {ranks}")
        if kind in _STARTS:
            slot = op.in_slot if _STARTS[kind] else op.out_slot
            if slot is None:
                raise self._rejected(op, "a message start needs its buffer")
            self._message_layout(op, slot)

    def _message_layout(self, op: Op, slot: int) -> None:
        """Checks that the message's shape and element type make exactly its bytes and that they
        fit its buffer, at an offset aligned for the element type."""
        dtype = TORCH_DTYPES.get(op.dtype)
        if dtype is None:
            raise self._rejected(op, f"element type {op.dtype} has no torch type here")
        itemsize = _ITEMSIZE[op.dtype]
        b0, b1, b2 = op.shape
        if b0 * b1 * b2 * itemsize != op.bytes:
            raise self._rejected(op, f"its shape [{b0}, {b1}, {b2}] of {op.dtype} is {b0 * b1 * b2 * itemsize} bytes, "
                                     f"the message {op.bytes}")
        offset, size, _ = self._buffers[slot]
        if op.bytes > size:
            raise self._rejected(op, f"{op.bytes} bytes do not fit buffer {slot} ({size} bytes)")
        if offset % itemsize:
            raise self._rejected(op, f"buffer {slot} at byte {offset} is not aligned for {op.dtype}")

    # ------------------------------------------------------------------------- buffers
    def buffer(self, slot: int) -> torch.Tensor:
        """The arena bytes (uint8) of buffer ``slot`` of the running plan."""
        offset, size, role = self._buffers[slot]
        if role not in MESSAGE_ROLES:
            raise ValueError(f"buffer {slot} ({role}) is not in the arena: autograd holds stashes and workspaces")
        return self._arena[offset:offset + size]

    def tensor(self, op: Op, slot: int) -> torch.Tensor:
        """Buffer ``slot`` as the activation (or gradient) tensor of ``op``'s micro-batch:
        ``op.shape`` of ``op.dtype``."""
        dtype = TORCH_DTYPES[op.dtype]
        offset, size, role = self._buffers[slot]
        n = op.shape[0] * op.shape[1] * op.shape[2] * _ITEMSIZE[op.dtype]
        if n > size:
            raise ShapeMismatch(f"{self._where(op)}: shape {list(op.shape)} of {op.dtype} needs {n} bytes, buffer "
                                f"{slot} has {size}", **self._fields(op))
        if role not in MESSAGE_ROLES:
            raise ShapeMismatch(f"{self._where(op)}: buffer {slot} is a {role} buffer, not an activation or gradient",
                                **self._fields(op))
        return self._arena[offset:offset + n].view(dtype).view(op.shape)

    def _write(self, op: Op, slot: int, value: torch.Tensor, what: str) -> None:
        dst = self.tensor(op, slot)
        if tuple(value.shape) != tuple(dst.shape) or value.dtype != dst.dtype:
            raise ShapeMismatch(f"{self._where(op)}: the stage's {what} is {list(value.shape)} of {value.dtype}, the "
                                f"plan's is {list(dst.shape)} of {dst.dtype} ({op.bytes or dst.numel() * dst.element_size()} "
                                f"bytes)", **self._fields(op))
        dst.copy_(value.detach())

    # ------------------------------------------------------------------------- compute
    def microbatch(self, mb: int) -> Any:
        """The data of micro-batch ``mb`` on the modules' device (moved once)."""
        d = self._data.get(mb)
        if d is None:
            if mb not in self._data_in:
                raise KeyError(f"no data was given for micro-batch {mb}")
            d = self._data_in[mb]
            if hasattr(d, "to"):
                d = d.to(self.device)
            self._data[mb] = d
        return d

    def _load(self, op: Op) -> None:
        self.microbatch(op.microbatch)

    def _run_stage(self, op: Op, x: Optional[torch.Tensor], capture: bool):
        self._capture = [] if capture else None
        try:
            y = self.modules[op.stage](x, self.microbatch(op.microbatch))
        finally:
            captured, self._capture = self._capture, None
        return y, captured

    def _forward(self, op: Op) -> None:
        key = (op.microbatch, op.stage)
        if key in self._stash:
            raise StepFailed(f"{self._where(op)}: a second forward of this micro-batch on this stage", **self._fields(op))
        x_view = None if op.stage == 0 else self.tensor(op, op.in_slot)
        if op.mode == "checkpoint":
            rng = _rng_state(self.device)
            with torch.no_grad():
                y, _ = self._run_stage(op, x_view, False)
            self._stash[key] = _Checkpoint(x_view, rng)
        else:
            state = self._autograd_forward(op, x_view)
            self._stash[key] = state
            y = state.y
        self._emit(op, y)

    def _autograd_forward(self, op: Op, x_view: Optional[torch.Tensor]) -> _Stored:
        x = None if x_view is None else x_view.detach().clone().requires_grad_(True)
        y, captured = self._run_stage(op, x, (op.microbatch, op.stage) in self._split)
        return _Stored(x, y, captured)

    def _emit(self, op: Op, y: torch.Tensor) -> None:
        if op.stage == self._last_stage:
            if y.dim() != 0:
                raise ShapeMismatch(f"{self._where(op)}: the last stage returned a tensor of shape {list(y.shape)}, "
                                    f"not a scalar loss", **self._fields(op))
            self._losses.append(y.detach())
        else:
            self._write(op, op.out_slot, y, "output")

    def _recompute(self, op: Op) -> None:
        key = (op.microbatch, op.stage)
        state = self._stash.get(key)
        if not isinstance(state, _Checkpoint):
            raise StepFailed(f"{self._where(op)}: recompute without a checkpointed forward before it", **self._fields(op))
        self._stash[key] = self._replay(op, state)

    def _replay(self, op: Op, cp: _Checkpoint) -> _Stored:
        saved = _rng_state(self.device)
        _set_rng_state(self.device, cp.rng)
        try:
            return self._autograd_forward(op, cp.x_view)
        finally:
            _set_rng_state(self.device, saved)

    def _backward(self, op: Op) -> None:
        key = (op.microbatch, op.stage)
        state = self._stash.get(key)
        if state is None:
            raise StepFailed(f"{self._where(op)}: backward without a forward before it", **self._fields(op))
        if isinstance(state, _Checkpoint):
            state = self._replay(op, state)
        last = op.stage == self._last_stage
        dy = None if last else self.tensor(op, op.in_slot)
        if op.mode == "whole":
            del self._stash[key]
            torch.autograd.backward(state.y, dy)
            dx = None if state.x is None else state.x.grad
        else:
            dy = None if dy is None else dy.clone()  # the arena buffer is reused before the weight pass
            inputs = ([state.x] if state.x is not None else []) + [out for _, out in state.captured]
            grads = torch.autograd.grad(state.y, inputs, dy, retain_graph=True, allow_unused=True) if inputs else ()
            dx = grads[0] if state.x is not None else None
            state.captured_grads = grads[1:] if state.x is not None else grads
            state.dy = dy
            self._stash[key] = state
        if op.stage != 0:
            if dx is None:
                raise StepFailed(f"{self._where(op)}: the stage's output does not depend on its input", **self._fields(op))
            self._write(op, op.out_slot, dx, "input gradient")

    def _backward_weight(self, op: Op) -> None:
        state = self._stash.pop((op.microbatch, op.stage), None)
        if not isinstance(state, _Stored) or state.captured_grads is None:
            raise StepFailed(f"{self._where(op)}: backward_weight without an input-only backward before it",
                             **self._fields(op))
        per_module: Dict[int, list] = {}
        for (module, out), g in zip(state.captured, state.captured_grads):
            if g is not None:
                per_module.setdefault(id(module), [module, [], []])
                per_module[id(module)][1].append(out)
                per_module[id(module)][2].append(g)
        shared = self._shared_params(state.captured)
        for module, outs, grads in per_module.values():
            params = [p for p in module.parameters(recurse=False) if p.requires_grad and id(p) not in shared]
            if params and len(outs) == 1:
                torch.autograd.backward(outs, grads, inputs=params, retain_graph=True)
        rest = self._rest_params(op.stage, state.captured, shared)
        if rest:
            torch.autograd.backward(state.y, state.dy, inputs=rest)

    def _shared_params(self, captured) -> set:
        """Parameters W cannot take from one leaf module's output: those of modules called more
        than once, and those held by several modules."""
        calls: Dict[int, int] = {}
        for module, _ in captured:
            calls[id(module)] = calls.get(id(module), 0) + 1
        owners: Dict[int, int] = {}
        shared = set()
        for module, _ in captured:
            if calls[id(module)] > 1:
                shared.update(id(p) for p in module.parameters(recurse=False))
        for module in {id(m): m for m, _ in captured}.values():
            for p in module.parameters(recurse=False):
                owners[id(p)] = owners.get(id(p), 0) + 1
        return shared | {k for k, n in owners.items() if n > 1}

    def _rest_params(self, stage: int, captured, shared: set) -> list:
        covered = {id(p) for m, _ in captured for p in m.parameters(recurse=False)} - shared
        return [p for p in self.modules[stage].parameters() if p.requires_grad and id(p) not in covered]

    def _hook_leaf_modules(self, root: torch.nn.Module) -> None:
        def hook(module, _inputs, output):
            if self._capture is not None and isinstance(output, torch.Tensor) and output.requires_grad:
                self._capture.append((module, output))
        for m in root.modules():
            if any(p.requires_grad for p in m.parameters(recurse=False)):
                m.register_forward_hook(hook)

    def _free(self, op: Op) -> None:
        """Arena buffers are reused at the plan's offsets; nothing to release."""

    # ----------------------------------------------------------------------- messages
    def _post_group(self, first: Op) -> None:
        ops = [first]
        for op in self._group_tail(first):
            ops.append(op)
        p2p = []
        for op in ops:
            send = _STARTS[op.kind]
            t = self.tensor(op, op.in_slot if send else op.out_slot)
            peer = self._rank_map[op.peer]
            tag = self._tag(op)
            p2p.append(dist.P2POp(dist.isend if send else dist.irecv, t, peer, tag=tag))
        try:
            works = dist.batch_isend_irecv(p2p) if len(p2p) > 1 else [p2p[0].op(p2p[0].tensor, p2p[0].peer, tag=p2p[0].tag)]
        except Exception as e:  # noqa: BLE001
            raise self._failure(first, e) from e
        for op, w in zip(ops, works):
            self._requests[op.request] = w

    def _group_tail(self, first: Op):
        ops = self._ops_cache
        i = first.index + 1
        while i < len(ops) and ops[i].group == first.index:
            yield ops[i]
            i += 1

    def _tag(self, op: Op) -> int:
        grad = 0 if "activation" in op.kind else 1
        return ((op.microbatch * (self._last_stage + 1) + op.stage) * 2 + grad) % (1 << 30)

    def _wait(self, op: Op) -> None:
        work = self._requests.pop(op.request, None)
        if work is None:
            raise StepFailed(f"{self._where(op)}: its message was never posted", **self._fields(op))
        t0 = time.monotonic()
        try:
            ok = work.wait(datetime.timedelta(seconds=self.timeout_s))
        except Exception as e:  # noqa: BLE001
            if "timed out" in str(e).lower() or time.monotonic() - t0 >= self.timeout_s:
                raise self._timeout(op) from e
            raise self._failure(op, e) from e
        if ok is False:
            raise self._timeout(op)

    def _timeout(self, op: Op) -> StepTimeout:
        return StepTimeout(f"{self._where(op)} timed out after {self.timeout_s * 1000:.0f} ms waiting for peer "
                           f"{op.peer} (micro-batch {op.microbatch})", **self._fields(op))

    # ---------------------------------------------------------------------- end of step
    def _make_dp_group(self, given: Optional[Mapping[int, Any]]):
        if self._dp == 1:
            return None
        device = self.rank % self._devices
        if given is not None:
            return given[device]
        mine = None
        for d in range(self._devices):
            g = dist.new_group([self._rank_map[r * self._devices + d] for r in range(self._dp)])
            if d == device:
                mine = g
        return mine

    def all_reduce(self, tensors: Sequence[torch.Tensor], op: Optional[Op] = None) -> None:
        """Sums ``tensors`` in place over this rank's data-parallel group (one flat collective)."""
        if self._dp_group is None or not tensors:
            return
        flat = torch.cat([t.reshape(-1) for t in tensors])
        work = dist.all_reduce(flat, group=self._dp_group, async_op=True)
        t0 = time.monotonic()
        try:
            ok = work.wait(datetime.timedelta(seconds=self.timeout_s))
        except Exception as e:  # noqa: BLE001
            if op is not None and ("timed out" in str(e).lower() or time.monotonic() - t0 >= self.timeout_s):
                raise StepTimeout(f"{self._where(op)} timed out after {self.timeout_s * 1000:.0f} ms in the "
                                  f"data-parallel all-reduce", **self._fields(op)) from e
            raise
        if ok is False and op is not None:
            raise StepTimeout(f"{self._where(op)} timed out in the data-parallel all-reduce", **self._fields(op))
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view_as(t))
            offset += n

    def _reduce(self, op: Op) -> None:
        # reduce_scatter (ZeRO >= 2) also sums every gradient here: a sharded optimizer
        # registers its own reduce_gradients handler.
        self.all_reduce([p.grad for p in self._params], op)

    def _step(self, op: Op) -> None:
        if self.optimizer is None:
            raise StepFailed(f"{self._where(op)}: no optimizer (pass optimizer= or register a handler)", **self._fields(op))
        self.optimizer.step()

    # ------------------------------------------------------------------------ errors
    def _fields(self, op: Optional[Op]) -> dict:
        if op is None:
            return {"rank": self.rank}
        peer = op.peer if op.peer is not None and op.peer >= 0 else None
        return {"rank": self.rank, "index": op.index, "kind": op.kind, "microbatch": op.microbatch, "stage": op.stage, "peer": peer}

    def _where(self, op: Op) -> str:
        return f"rank {self.rank}: {op.describe()}"

    def _rejected(self, op: Op, rule: str) -> PlanRejected:
        return PlanRejected(f"{self._where(op)}: {rule}", **self._fields(op))

    def _failure(self, op: Optional[Op], e: BaseException) -> PipelineError:
        if isinstance(e, PipelineError):
            return e
        if op is None:
            return StepFailed(f"rank {self.rank}: {type(e).__name__}: {e}", rank=self.rank)
        return StepFailed(f"{self._where(op)} failed: {type(e).__name__}: {e}", **self._fields(op))
