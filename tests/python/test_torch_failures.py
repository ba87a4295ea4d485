"""pipeplan.torch's executor fails loudly and in bounded time: a killed rank makes every other
rank raise within its timeout, a stalled peer makes the waiting rank raise StepTimeout, and a
tensor or plan that disagrees with the other is an error naming the instruction."""
import pytest

torch = pytest.importorskip("torch")
pipeplan = pytest.importorskip("pipeplan")

from torch_cluster import Case, killed_rank, make_loader, make_planner, run_cluster, stalled_rank, tiny_config  # noqa: E402


def test_killed_rank_makes_every_other_rank_raise():
    timeout_s = 8.0
    out = run_cluster(4, killed_rank, (2, timeout_s), deadline_s=150.0)
    assert out[2] is None  # the victim reported nothing: it exited mid-iteration
    for r in (0, 1, 3):
        o = out[r]
        assert o is not None and o.ok, f"rank {r}: {o and o.error}"
        v = o.value
        assert v["error_type"] in ("StepFailed", "StepTimeout"), (r, v)
        assert v["step_s"] < timeout_s + 5.0, (r, v["step_s"])
        f = v["fields"]
        assert f["rank"] == r and f["peer"] is not None and f["microbatch"] is not None and f["kind"], (r, v)
        assert f"rank {r}: instruction #{f['index']} {f['kind']} (micro-batch {f['microbatch']}" in v["message"]
        assert f"peer {f['peer']}" in v["message"]


def test_stalled_peer_times_out_naming_rank_peer_instruction_and_microbatch():
    out = run_cluster(2, stalled_rank, (1, 6.0, 1.5), deadline_s=90.0)
    v = out[0].value
    assert v["error_type"] == "StepTimeout", v
    assert 1.4 < v["step_s"] < 5.0, v["step_s"]
    f = v["fields"]
    assert f["rank"] == 0 and f["peer"] == 1 and f["kind"].endswith("_wait")
    assert f"timed out after 1500 ms waiting for peer 1 (micro-batch {f['microbatch']})" in v["message"]


def _rank0(case, planner=None):
    """Rank 0's plan, data and stage modules of a one-iteration batch (no process group needed
    until the first message)."""
    from gpt import build_model, stage_modules
    from pipeplan.torch import owned_stages
    loader, _ = make_loader(case, 0, 1)
    if planner is not None:
        loader.planner = planner
    with loader:
        batch = next(loader)
    h = batch.plan.header
    return batch, stage_modules(build_model(tiny_config(), 11), h.virtual_stages, owned_stages(h, 0))


def test_message_shape_disagreeing_with_the_tensor_is_an_error_naming_the_instruction():
    from pipeplan.torch import PipelineExecutor, ShapeMismatch
    case = Case("1f1b", 2)
    wide = make_planner(case, hidden_size=tiny_config().hidden + 4)  # the plan's messages are 12 wide
    batch, modules = _rank0(case, wide)
    ex = PipelineExecutor(batch.rank_plan, modules, optimizer=torch.optim.SGD(modules[0].parameters(), lr=0.1))
    with pytest.raises(ShapeMismatch) as e:
        ex.run(batch.rank_plan, batch.microbatches)
    msg = str(e.value)
    assert e.value.kind == "forward" and e.value.stage == 0 and e.value.rank == 0
    assert f"rank 0: instruction #{e.value.index} forward (micro-batch {e.value.microbatch}, stage 0)" in msg
    assert getattr(e.value, "mb") == e.value.microbatch  # the older name, kept for handlers written against it
    assert "the plan's is" in msg and ", 12] of torch.float64" in msg


def test_plan_rejected_before_running():
    from pipeplan.torch import PipelineExecutor, PlanRejected
    batch, modules = _rank0(Case("1f1b", 2))
    with pytest.raises(PlanRejected, match="no handler is registered for this kind .pass optimizer="):
        PipelineExecutor(batch.rank_plan, modules).run(batch.rank_plan, batch.microbatches)
    wrong = {1: modules[0]}
    with pytest.raises(PlanRejected, match=r"places virtual stages \[0\] on this rank, the executor has modules for \[1\]"):
        PipelineExecutor(batch.rank_plan, wrong, optimizer=torch.optim.SGD(modules[0].parameters(), lr=0.1)).run(
            batch.rank_plan, batch.microbatches)


def test_message_bytes_disagreeing_with_its_shape_is_rejected_before_running():
    """A plan file whose message says fewer bytes than its shape and element type make (here the
    JSON form edited by hand) is rejected, naming the instruction, before anything runs."""
    import json
    from pipeplan.torch import PipelineExecutor, PlanRejected
    batch, modules = _rank0(Case("1f1b", 2))
    j = json.loads(batch.rank_plan.to_json())
    prog = j["programs"][0]["instructions"]
    k = next(i for i, x in enumerate(prog) if x["kind"] == "send_activation_start")
    prog[k]["bytes"] -= 8
    edited = pipeplan.RankPlan.from_bytes(json.dumps(j).encode())
    ex = PipelineExecutor(edited, modules, optimizer=torch.optim.SGD(modules[0].parameters(), lr=0.1), validate=False)
    with pytest.raises(PlanRejected, match=rf"rank 0: instruction #{k} send_activation_start \(micro-batch "
                                           r"\d+, stage 0, peer 1\): its shape \[\d+, \d+, 8\] of fp64 is \d+ "
                                           r"bytes, the message \d+"):
        ex.run(edited, batch.microbatches)


def test_register_handler_replaces_builtins_and_runs_user_code():
    """A one-stage plan runs in one process; a registered optimizer_step handler replaces the
    built-in one and sees the instruction and the executor."""
    from pipeplan.torch import PipelineExecutor
    batch, modules = _rank0(Case("1f1b", 1))
    ex = PipelineExecutor(batch.rank_plan, modules)
    seen = []
    ex.register_handler("optimizer_step", lambda op, e: seen.append((op.kind, op.index, e.rank)))
    with pytest.raises(ValueError, match="run by the executor"):
        ex.register_handler("send_activation_start", lambda op, e: None)
    loss = ex.run(batch.rank_plan, batch.microbatches)
    assert seen == [("optimizer_step", len(batch.rank_plan.program) - 1, 0)]
    assert loss > 0 and all(float(p.grad.abs().sum()) > 0 for p in modules[0].parameters())
