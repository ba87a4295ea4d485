"""pipeplan.torch's executor trains like one process: for every schedule the loss and every
gradient of a pipelined, data-parallel run over gloo equal a single-process, non-pipelined run
of the same model on the same global batches (float64, <= 1e-10 relative), and after three Adam
steps the parameters still match. One local cluster of 4 ranks (127.0.0.1) runs every case."""
import pytest

torch = pytest.importorskip("torch")
pipeplan = pytest.importorskip("pipeplan")

from torch_cluster import Case, pipeline_cases, run_cluster  # noqa: E402

TOLERANCE = 1e-10
ITERATIONS = 3
SCHEDULES = [Case("gpipe", 2), Case("1f1b", 2), Case("interleaved", 2, chunks=2), Case("adaptive", 2),
             Case("zb-h1", 2), Case("merak-early", 2)]
CASES = (SCHEDULES
         + [Case(c.schedule, 4, 1, c.chunks, recompute=c.recompute) for c in SCHEDULES]
         + [Case("1f1b", 2, 2), Case("interleaved", 2, 2, chunks=2), Case("zb-h1", 2, 2),
            Case("merak-early", 2, 2), Case("1f1b", 2, packing=True),
            Case("zb-h1", 2, 2, packing=True)])
WORLD = 4


@pytest.fixture(scope="module")
def results():
    out = run_cluster(WORLD, pipeline_cases, (CASES, ITERATIONS, 60.0), deadline_s=280.0)
    for o in out:
        assert o is not None, "a rank reported nothing before the deadline"
        assert o.ok, f"rank {o.rank}: {o.error_type}: {o.error}"
    return [o.value for o in out]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pipeline_equals_reference(results, case):
    ranks = [r[case.name] for r in results[:case.stages * case.dp]]
    assert all(r["schedule"] == ranks[0]["schedule"] for r in ranks)
    # Every rank planned the same plans on its own.
    assert len({tuple(r["plan_digest"]) for r in ranks}) == 1
    for it in range(ITERATIONS):
        loss = sum(r["loss"][it] for r in ranks)
        ref = ranks[0]["ref_loss"][it]
        assert abs(loss - ref) <= TOLERANCE * abs(ref), (it, loss, ref)
        for r in ranks:
            err, name = r["grad_error"][it]
            assert err <= TOLERANCE, f"iteration {it}: gradient of {name} differs by {err:.3g}"
    for r in ranks:
        err, name = r["param_error"]
        assert err <= TOLERANCE, f"after {ITERATIONS} Adam steps {name} differs by {err:.3g}"


def test_cases_exercise_what_they_name(results):
    """The matrix really runs split backwards, recomputation, interleaving, packing and dp."""
    kinds = {c.name: set().union(*(r[c.name]["kinds"] for r in results[:c.stages * c.dp])) for c in CASES}
    assert "backward:input_only" in kinds["zb-h1-S2-dp1"] and "backward_weight:" in kinds["zb-h1-S2-dp1"]
    assert "forward:checkpoint" in kinds["merak-early-S2-dp1"]
    assert "reduce_gradients:all_reduce" in kinds["1f1b-S2-dp2"]
    assert results[0]["interleaved-S2-dp1"]["schedule"] == "interleaved"
    assert any(r["1f1b-S2-dp1-packed"]["packed"] for r in results[:2])
    assert max(max(r["1f1b-S2-dp1"]["microbatches"]) for r in results[:2]) >= 2
