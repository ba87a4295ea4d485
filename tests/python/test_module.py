"""The pipeplan module against the C++ library it binds: plan files read and written in both
formats agree byte for byte with the CLI's, the planner's results equal `pipeplan plan --json`
on the same batch, validation, exceptions, NumPy fields and the GIL released while planning.

The CLI is the one the build made (PIPEPLAN_CLI, set by `meson test` and `meson devenv`)."""
import json
import os
import pathlib
import re
import subprocess
import threading
import time

import numpy as np
import pytest

import pipeplan

CLI = os.environ.get("PIPEPLAN_CLI", "")
SOURCE = pathlib.Path(os.environ.get("PIPEPLAN_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
DATA = pathlib.Path(os.environ.get("PIPEPLAN_DATA_DIR", SOURCE / ".." / "shared" / "data"))

needs_cli = pytest.mark.skipif(not CLI or not os.access(CLI, os.X_OK),
                               reason="PIPEPLAN_CLI does not name the built pipeplan CLI (run through meson test or meson devenv)")

GPT = dict(stages=4, layers_per_stage=8, memory_mb=40000)


def gpt_batch(n, seed=7):
    """n (input, target) pairs drawn from a fixed seed (decoder-only lengths: their sum)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(8, 1500, size=n), rng.integers(1, 300, size=n)], axis=1)


def write_batch(path, pairs):
    path.write_text("input_tokens,target_tokens\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    return path


def cli_flags(options):
    flags = []
    for k, v in options.items():
        flags += ["--" + k.replace("_", "-"), str(v)]
    return flags


def run_cli(*args, check=True):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"pipeplan {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")
    return r


@pytest.fixture(scope="module")
def gpt():
    return pipeplan.AnalyticModel("gpt-6.7b")


@pytest.fixture(scope="module")
def gpt_result(gpt):
    return pipeplan.Planner(gpt, **GPT).plan(gpt_batch(48), iteration=5)


# --- the planner against the CLI -----------------------------------------------------------------

CLI_CASES = [
    ("analytic:gpt-6.7b", dict(GPT)),
    ("analytic:gpt-6.7b", dict(stages=2, layers_per_stage=16, memory_mb=80000, dp=2)),
    ("analytic:gpt-6.7b", dict(stages=2, layers_per_stage=4, memory_mb=40000, chunks=2)),
    ("analytic:gpt-6.7b", dict(GPT, schedule="1f1b", max_seqlen=1024)),
    ("analytic:t5-11b", dict(stages=8, layers_per_stage=6, memory_mb=40000)),
]


@needs_cli
@pytest.mark.parametrize("model,options", CLI_CASES, ids=lambda x: x if isinstance(x, str) else "-".join(f"{k}{v}" for k, v in x.items()))
def test_planner_equals_the_cli(tmp_path, model, options):
    pairs = gpt_batch(40, seed=11)
    batch = write_batch(tmp_path / "batch.csv", pairs)
    out = tmp_path / "plans"
    r = run_cli("plan", "--model", model, "--batch", batch, "--iteration", 3, "--json", "--out", out, *cli_flags(options))
    want = json.loads(r.stdout)
    planner = pipeplan.Planner(pipeplan.AnalyticModel(model.split(":")[1]), **options)
    got = planner.plan(pairs, iteration=3)
    assert got.schedule == want["schedule"]
    assert len(got.microbatches) == want["microbatches"]
    assert got.makespan_ms == want["makespan_ms"]
    assert got.lower_bound_ms == want["lower_bound_ms"]
    assert got.peak_memory_mb == want["peak_memory_mb"]
    assert got.arena_mb == want["arena_mb"]
    assert got.live_peak_mb == want["live_peak_mb"]
    assert got.model_state_mb == want["model_state_mb"]
    assert got.budget_mb == want["budget_mb"]
    assert got.memory_attempts == want["memory_attempts"]
    header = got.plan.header
    assert header.device_memory_mb == options["memory_mb"]
    assert header.model_state_mb == want["model_state_mb"]
    assert all(a + s <= header.device_memory_mb for a, s in zip(got.arena_mb, got.model_state_mb))
    assert [(c.schedule, c.split, c.feasible, c.polished) for c in got.candidates] == \
           [(c["schedule"], c["split"], c["feasible"], c["polished"]) for c in want["candidates"]]
    assert [c.makespan_ms for c in got.candidates if c.feasible] == \
           [c["makespan_ms"] for c in want["candidates"] if c["feasible"]]
    # The rank files the CLI wrote are byte for byte what the module writes.
    for rank in range(got.plan.header.ranks):
        cli_bytes = (out / f"rank_{rank}.plan").read_bytes()
        assert got.share_of(rank).to_bytes() == cli_bytes
        assert len(cli_bytes) == want["plan_bytes"][rank]
        assert pipeplan.read_rank_plan(out / f"rank_{rank}.plan") == got.plan.share_of(rank)


@needs_cli
def test_torch_csv_equals_the_cli(tmp_path, gpt):
    pairs = gpt_batch(24)
    batch = write_batch(tmp_path / "batch.csv", pairs)
    run_cli("plan", "--model", "analytic:gpt-6.7b", "--batch", batch, *cli_flags(GPT),
            "--torch-csv", tmp_path / "s.csv", "--torch-csv-comms", tmp_path / "c.csv")
    plan = pipeplan.Planner(gpt, **GPT).plan(pairs).plan
    assert plan.to_torch_csv() == (tmp_path / "s.csv").read_text()
    assert plan.to_torch_csv(with_comms=True) == (tmp_path / "c.csv").read_text()
    with pytest.raises(ValueError, match="replica"):
        plan.to_torch_csv(replica=1)


@pytest.mark.skipif(not (DATA / "cost_models" / "gpt_6.7b_timing.csv").exists(),
                    reason="no profiles in ../shared/data/cost_models (PIPEPLAN_DATA_DIR)")
@needs_cli
def test_profile_model_equals_the_cli(tmp_path):
    pairs = gpt_batch(32, seed=3)
    batch = write_batch(tmp_path / "batch.csv", pairs)
    folder = DATA / "cost_models"
    want = json.loads(run_cli("plan", "--profiles", folder, "--model", "gpt_6.7b", "--batch", batch, "--json",
                              *cli_flags(GPT)).stdout)
    model = pipeplan.ProfileModel(str(folder), "gpt_6.7b")
    assert model.name == "gpt_6.7b" and not model.is_encoder_decoder
    got = pipeplan.Planner(model, **GPT).plan(pairs)
    assert (got.schedule, got.makespan_ms, got.lower_bound_ms) == (want["schedule"], want["makespan_ms"], want["lower_bound_ms"])


def test_planner_is_reusable_and_deterministic(gpt):
    planner = pipeplan.Planner(gpt, **GPT)
    pairs = gpt_batch(48)
    a = planner.plan(pairs)
    other = planner.plan(gpt_batch(30, seed=1))
    b = planner.plan(pairs, iteration=9)
    assert other.plan != a.plan
    assert b.plan.header.iteration == 9 and a.plan.header.iteration == 0
    assert b.plan.programs == a.plan.programs
    assert b.makespan_ms == a.makespan_ms
    # Lengths as a 1-D list (decoder-only: the sum of a pair) give the same plan.
    c = planner.plan([int(x + y) for x, y in pairs])
    assert c.plan == a.plan


def test_plan_result_fields(gpt_result):
    r = gpt_result
    h = r.plan.header
    assert h.iteration == 5 and h.devices == 4 and h.dp == 1 and h.ranks == 4
    # A V schedule (zb-v, v-half, v-min) places each device's layers as two chunks in a V.
    v = h.schedule in ("zb-v", "v-half", "v-min")
    assert h.virtual_stages == (8 if v else 4) and h.placement == ("v-shape" if v else "linear")
    assert h.schedule == r.schedule and h.dtype == "fp16"
    assert r.makespan_ms == h.predicted_makespan_ms >= r.lower_bound_ms > 0
    assert len(r.programs) == 4 and [p.rank for p in r.programs] == [0, 1, 2, 3]
    ids = sorted(i for mb in r.microbatches for i in mb.sample_ids)
    assert ids == list(range(48))  # every sample in exactly one micro-batch
    assert [mb.sample_ids for mb in r.microbatches] == [mb.sample_ids for mb in h.microbatches]
    assert all(mb.shape.hidden == 4096 and mb.shape.microbatch_size == len(mb.sample_ids) for mb in r.microbatches)
    assert any(c.schedule == r.schedule and c.feasible for c in r.candidates)
    assert set(r.planning_ms) == {"split", "schedule", "lower", "validate", "total"}
    assert r.recompute in ("none", "selective", "full")
    stage_devices = [0, 1, 2, 3, 3, 2, 1, 0] if v else [0, 1, 2, 3]
    assert [h.device_of_stage(s) for s in range(len(stage_devices))] == stage_devices
    with pytest.raises(IndexError):
        h.device_of_stage(len(stage_devices))
    assert r.plan.validate().ok


def test_interleaved_dp_and_dtype(gpt):
    r = pipeplan.Planner(gpt, stages=2, layers_per_stage=4, chunks=2, dp=2, memory_mb=40000, dtype="fp64",
                         schedule="interleaved").plan(gpt_batch(32))
    h = r.plan.header
    assert (h.devices, h.dp, h.chunks, h.placement, h.dtype) == (2, 2, 2, "interleaved", "fp64")
    assert h.ranks == 4 and h.virtual_stages == 4
    assert [h.device_of_rank(k) for k in range(4)] == [0, 1, 0, 1]
    assert [h.replica_of_rank(k) for k in range(4)] == [0, 0, 1, 1]
    assert [h.device_of_stage(s) for s in range(4)] == [0, 1, 0, 1]
    assert {mb.replica for mb in r.microbatches} == {0, 1}
    messages = [x for p in r.programs for x in p.instructions if x.kind.startswith(("send", "recv"))]
    assert messages and all(x.dtype == "fp64" for x in messages)
    starts = [x for x in messages if x.kind.endswith("_start")]
    assert all(x.bytes == 8 * x.shape.microbatch_size * (x.shape.seqlen + x.shape.dec_seqlen) * x.shape.hidden for x in starts)
    assert any(x.kind == "reduce_gradients" and x.mode == "all_reduce" for x in r.programs[0].instructions)


def test_packed_rows(gpt):
    r = pipeplan.Planner(gpt, packing=True, **GPT).plan(gpt_batch(64, seed=5) // 4)
    packed = [mb for mb in r.microbatches if mb.rows]
    assert packed, "expected the split to pack some micro-batch of short samples"
    for mb in packed:
        assert sorted(i for row in mb.rows for i in row) == sorted(mb.sample_ids)
        assert len(mb.rows) == mb.shape.microbatch_size
    # Plan files carry no rows.
    assert all(not mb.rows for mb in r.plan.header.microbatches)


def test_encoder_decoder_pairs():
    t5 = pipeplan.AnalyticModel("t5-11b")
    assert t5.is_encoder_decoder
    planner = pipeplan.Planner(t5, stages=8, layers_per_stage=6, memory_mb=40000)
    r = planner.plan(np.array([[100, 20], [300, 40], [50, 9], [700, 80]], dtype=np.int32))
    assert all(mb.shape.dec_seqlen > 0 for mb in r.microbatches)
    with pytest.raises(ValueError, match="encoder-decoder model needs"):
        planner.plan([100, 300])


def test_recompute_and_checkpointed_forwards(gpt):
    # The split's recomputation mode prices the layers; checkpointed forwards come from Merak's schedules.
    assert pipeplan.Planner(gpt, recompute="full", **GPT).plan(gpt_batch(32)).recompute == "full"
    r = pipeplan.Planner(gpt, schedule="merak-early", **GPT).plan(gpt_batch(32))
    xs = [x for p in r.programs for x in p.instructions]
    assert "checkpoint" in {x.mode for x in xs if x.kind == "forward"}
    assert any(x.kind == "recompute" for x in xs)
    with pytest.raises(ValueError, match="unknown recompute mode 'half'"):
        pipeplan.Planner(gpt, recompute="half", **GPT)


# --- analytic models --------------------------------------------------------------------------

def test_analytic_model_from_a_shape():
    tiny = pipeplan.AnalyticModel(layers=4, hidden=64, heads=4, vocab=1000, name="tiny")
    s = tiny.shape
    assert (s["name"], s["layers"], s["hidden"], s["kv_heads"], s["head_dim"], s["ffn_hidden"]) == ("tiny", 4, 64, 4, 16, 256)
    assert not tiny.is_encoder_decoder and tiny.hidden == 64 and tiny.hardware == "a100-40gb"
    c = tiny.evaluate("encoder", mbs=2, seqlen=128)
    assert c["forward_ms"] > 0 and c["backward_ms"] > 0 and c["stored_mb"] > 0
    assert tiny.evaluate("decoder", mbs=1, seqlen=8)["forward_ms"] is None  # no decoder in a decoder-only model
    # Preset fields can be replaced; slower efficiencies give slower layers.
    slow = pipeplan.AnalyticModel("gpt-6.7b", compute_efficiency=0.1, memory_efficiency=0.1)
    fast = pipeplan.AnalyticModel("gpt-6.7b")
    assert slow.evaluate("encoder", 1, 512)["forward_ms"] > fast.evaluate("encoder", 1, 512)["forward_ms"]
    assert pipeplan.AnalyticModel("gpt-6.7b", layers=8).shape["layers"] == 8
    cpu = pipeplan.AnalyticModel(layers=2, hidden=32, heads=2, vocab=100, hardware=dict(
        name="cpu", peak_tensor_flops=1e11, memory_bandwidth_bytes_per_s=2e10, link_bandwidth_bytes_per_s=1e9))
    assert cpu.hardware == "cpu"
    enc_dec = pipeplan.AnalyticModel(layers=2, decoder_layers=2, hidden=32, heads=2, vocab=100)
    assert enc_dec.is_encoder_decoder
    assert set(pipeplan.model_presets()) >= {"gpt-6.7b", "t5-11b"} and "h100-sxm" in pipeplan.hardware_presets()


def test_analytic_model_errors():
    with pytest.raises(ValueError, match="unknown model preset 'gpt-9'.*valid: gpt-6.7b"):
        pipeplan.AnalyticModel("gpt-9")
    with pytest.raises(ValueError, match="unknown hardware preset"):
        pipeplan.AnalyticModel("gpt-6.7b", hardware="tpu")
    with pytest.raises(ValueError, match="'vocab' is required"):
        pipeplan.AnalyticModel(layers=2, hidden=32, heads=2)
    with pytest.raises(ValueError, match="unknown field 'width'"):
        pipeplan.AnalyticModel(layers=2, hidden=32, heads=2, vocab=10, width=3)
    with pytest.raises(ValueError, match="unknown FFN activation 'tanh'"):
        pipeplan.AnalyticModel(layers=2, hidden=32, heads=2, vocab=10, activation="tanh")
    with pytest.raises(ValueError, match="efficiencies must be > 0"):
        pipeplan.AnalyticModel("gpt-6.7b", compute_efficiency=0)
    with pytest.raises(ValueError, match="profile directory '/nonexistent' does not exist"):
        pipeplan.ProfileModel("/nonexistent", "gpt_6.7b")


# --- plan files ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_plan_file_round_trip(tmp_path, gpt_result, fmt):
    plan = gpt_result.plan
    path = tmp_path / f"plan.{fmt}"
    plan.write(str(path), format=fmt)
    assert path.read_bytes() == plan.to_bytes(fmt)
    assert pipeplan.read_plan(path) == plan
    assert pipeplan.plan_from_bytes(plan.to_bytes(fmt)) == plan
    assert pipeplan.ExecutionPlan.from_bytes(path.read_bytes()) == plan
    share = plan.share_of(2)
    assert share.rank == 2 and share.header == plan.header and share.program == plan.programs[2]
    pipeplan.write_plan(share, tmp_path / "rank", format=fmt)
    assert pipeplan.read_rank_plan(tmp_path / "rank") == share
    assert pipeplan.rank_plan_from_bytes(share.to_bytes(fmt)) == share
    assert share.validate().ok
    if fmt == "json":
        assert json.loads(plan.to_json())["header"]["schedule"] == plan.header.schedule
    with pytest.raises(ValueError, match="a rank file holds one program|one program"):
        pipeplan.rank_plan_from_bytes(plan.to_bytes(fmt))
    with pytest.raises(IndexError):
        plan.share_of(4)


@needs_cli
@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_files_written_here_read_by_the_cli(tmp_path, gpt_result, fmt):
    files = []
    for rank in range(4):
        files.append(tmp_path / f"rank_{rank}.{fmt}")
        gpt_result.plan.share_of(rank).write(files[-1], format=fmt)
    out = run_cli("plan-check", *files).stdout
    assert re.search(r"whole plan: 4 ranks, plan [0-9a-f]{16}, schedule " + re.escape(gpt_result.schedule) + ", iteration 5", out)
    assert ": valid" in out
    shown = run_cli("plan-show", files[1]).stdout
    assert f"rank 1: {len(gpt_result.programs[1].instructions)} instructions" in shown


def corrupted(plan):
    """The plan with rank 0's first activation send going to the wrong peer (still well-formed)."""
    doc = json.loads(plan.to_json())
    sends = [x for x in doc["programs"][0]["instructions"] if x["kind"] == "send_activation_start"]
    sends[0]["peer"] = 2
    return pipeplan.plan_from_bytes(json.dumps(doc).encode())


@needs_cli
def test_validate_catches_a_corrupted_plan(tmp_path, gpt_result):
    bad = corrupted(gpt_result.plan)
    with pytest.raises(ValueError, match="invalid plan") as e:
        bad.validate()
    report = bad.validate(raise_error=False)
    assert not report.ok and not report and report.violations
    v = report.violations[0]
    assert v.rule and v.message and str(v).startswith(f"rank {v.rank}")
    assert str(e.value) == "invalid plan:\n" + str(report)
    # The CLI's validator, on the same file, says the same.
    bad.write(tmp_path / "bad.plan")
    r = run_cli("plan-check", tmp_path / "bad.plan", check=False)
    assert r.returncode == 1
    for line in str(report).splitlines():
        assert line in r.stdout


def test_malformed_files_name_file_and_field(tmp_path, gpt_result):
    data = bytearray(gpt_result.plan.to_bytes())
    data[-3] ^= 0xFF
    (tmp_path / "flipped.plan").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="flipped.plan"):
        pipeplan.read_plan(tmp_path / "flipped.plan")
    (tmp_path / "bad.json").write_text('{"format": "pipeplan-plan", "version": 1}')
    with pytest.raises(ValueError, match="bad.json"):
        pipeplan.read_plan(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="missing.plan"):  # a file that cannot be opened is bad input
        pipeplan.read_plan(tmp_path / "missing.plan")
    with pytest.raises(ValueError, match="unknown plan format 'yaml'"):
        gpt_result.plan.to_bytes("yaml")
    with pytest.raises((ValueError, RuntimeError), match="is a directory"):
        gpt_result.plan.write(tmp_path)


# --- instructions and NumPy ----------------------------------------------------------------------

def test_instruction_objects_and_array(gpt_result):
    prog = gpt_result.programs[1]
    xs = prog.instructions
    a = prog.instructions_array()
    assert a.dtype == pipeplan.instruction_dtype() and a.dtype.itemsize == 64 and len(a) == len(xs) == len(prog)
    kinds = pipeplan.kinds()
    for x, row in zip(xs, a):
        assert kinds[x.kind] == x.kind_code == row["kind"] and pipeplan.kind_name(int(row["kind"])) == x.kind
        assert (x.microbatch, x.stage, x.peer, x.bytes) == (row["microbatch"], row["stage"], row["peer"], row["bytes"])
        assert getattr(x, "mb") == x.microbatch  # the older name, kept for handlers written against it
        assert row["clock_mhz"] == 0 and x.frequency_mhz is None  # no set_frequency in this plan
        assert x.shape.as_tuple() == (row["microbatch_size"], row["seqlen"], row["dec_seqlen"], row["hidden"])
        for name in ("in_slot", "out_slot", "stash_slot", "work_slot"):
            slot = getattr(x, name)
            assert (slot is None and row[name] == pipeplan.NO_SLOT) or slot == row[name]
        assert x.dtype == "fp16" and row["dtype"] == 1
    fwd = [x for x in xs if x.kind == "forward"]
    bwd = [x for x in xs if x.kind == "backward"]
    sends = [x for x in xs if x.kind == "send_activation_start"]
    assert fwd and all(x.mode in ("store", "checkpoint") for x in fwd)
    assert bwd and all(x.mode in ("whole", "input_only") for x in bwd)
    # Rank 1 sends forward to rank 2; in a V its second chunk's activations go back to rank 0.
    peers = {2} if gpt_result.plan.header.placement == "linear" else {0, 2}
    assert all(x.mode == "" for x in sends) and {x.peer for x in sends} == peers
    assert all(x.out_slot is not None and x.out_slot < len(prog.buffers) for x in fwd)
    roles = {b.role for b in prog.buffers}
    assert roles <= {"activation_in", "activation_out", "stash", "grad_in", "grad_out", "workspace"} and "stash" in roles
    assert all(b.offset_bytes + b.size_bytes <= prog.arena_bytes for b in prog.buffers)
    assert all(getattr(b, "mb") == b.microbatch for b in prog.buffers)
    assert prog.live_peak_bytes <= prog.arena_bytes
    assert pipeplan.kind_code("user<200>") == 200 and pipeplan.kind_name(200) == "user<200>"
    assert pipeplan.dtype_bytes("bf16") == 2 and pipeplan.dtype_bytes("fp64") == 8
    with pytest.raises(ValueError, match="unknown instruction kind"):
        pipeplan.kind_code("jump")


# --- errors --------------------------------------------------------------------------------------

@needs_cli
def test_limit_exceeded_carries_the_cli_message(tmp_path, gpt):
    pairs = gpt_batch(8)
    batch = write_batch(tmp_path / "batch.csv", pairs)
    r = run_cli("plan", "--model", "analytic:gpt-6.7b", "--batch", batch, "--stages", 4, "--layers-per-stage", 8,
                "--memory-mb", 1000, check=False)
    assert r.returncode != 0
    with pytest.raises(pipeplan.LimitExceeded) as e:
        pipeplan.Planner(gpt, stages=4, layers_per_stage=8, memory_mb=1000).plan(pairs)
    assert isinstance(e.value, RuntimeError)
    assert str(e.value) in r.stderr


@needs_cli
def test_no_fitting_schedule_is_limit_exceeded(tmp_path, gpt):
    """GPipe keeps every micro-batch's activations: on long samples no split fits its peak."""
    pairs = np.stack([np.random.default_rng(7).integers(500, 2048, size=256), np.zeros(256, dtype=np.int64)], axis=1)
    batch = write_batch(tmp_path / "batch.csv", pairs)
    r = run_cli("plan", "--model", "analytic:gpt-6.7b", "--batch", batch, "--schedule", "gpipe", *cli_flags(GPT), check=False)
    assert r.returncode == 3  # the CLI's status for a resource limit (pipeplan::limit_exceeded)
    with pytest.raises(pipeplan.LimitExceeded, match="no candidate schedule fits in 40000") as e:
        pipeplan.Planner(gpt, schedule="gpipe", **GPT).plan(pairs)
    assert str(e.value) in r.stderr


def test_bad_input_is_a_value_error(gpt):
    with pytest.raises(ValueError, match="memory_mb .* is required"):
        pipeplan.Planner(gpt, stages=4, layers_per_stage=8)
    with pytest.raises(ValueError, match="unknown option 'stage'.*valid: stages"):
        pipeplan.Planner(gpt, stage=4, memory_mb=1)
    with pytest.raises(ValueError, match="give stages and layers_per_stage"):
        pipeplan.Planner(gpt, stages=4, memory_mb=40000)
    with pytest.raises(ValueError, match="unknown schedule 'fast'"):
        pipeplan.Planner(gpt, schedule="fast", **GPT)
    with pytest.raises(ValueError, match="chunks 2 does not apply to schedule 1f1b"):
        pipeplan.Planner(gpt, schedule="1f1b", chunks=2, stages=4, layers_per_stage=4, memory_mb=40000)
    with pytest.raises(ValueError, match="unknown dtype 'fp12'"):
        pipeplan.Planner(gpt, dtype="fp12", **GPT)
    with pytest.raises(ValueError, match="option 'dp' has the wrong type"):
        pipeplan.Planner(gpt, dp="two", **GPT)
    with pytest.raises(TypeError, match="AnalyticModel or pipeplan.ProfileModel"):
        pipeplan.Planner("gpt-6.7b", **GPT)
    planner = pipeplan.Planner(gpt, **GPT)
    with pytest.raises(ValueError, match="integer token counts"):
        planner.plan([100.5, 200])
    with pytest.raises(ValueError, match=r"lengths\[1\]: -3 tokens is out of range"):
        planner.plan([100, -3])
    with pytest.raises(ValueError, match="shape \\(N, 2\\)"):
        planner.plan(np.ones((3, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="the batch has no samples"):
        planner.plan([])
    with pytest.raises(ValueError, match="sample 1 is in no given micro-batch"):
        planner.plan_microbatches([100, 200], [[0]])


def test_plan_microbatches_keeps_the_given_split(gpt):
    lengths = [int(x) for x in gpt_batch(12).sum(axis=1)]
    given = [[0, 1, 2], [3, 4, 5, 6], [7], [8, 9, 10, 11]]
    r = pipeplan.Planner(gpt, **GPT).plan_microbatches(lengths, given)
    assert sorted(sorted(mb.sample_ids) for mb in r.microbatches) == sorted(sorted(g) for g in given)


# --- the GIL ---------------------------------------------------------------------------------------

def test_planning_releases_the_gil(gpt):
    """A Python thread keeps running while another thread plans: the longest pause of the
    Python thread during the planning is a small part of the planning time."""
    planner = pipeplan.Planner(gpt, **GPT)
    lengths = gpt_batch(600, seed=2)
    span = {}

    def plan():
        span["start"] = time.perf_counter()
        planner.plan(lengths)
        span["end"] = time.perf_counter()

    stamps = []
    t = threading.Thread(target=plan)
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
        sum(range(200))  # a little pure-Python work between time stamps
    t.join()
    inside = [s for s in stamps if span["start"] < s < span["end"]]
    duration = span["end"] - span["start"]
    assert duration > 0.05, "the batch planned too quickly to measure"
    points = [span["start"], *inside, span["end"]]
    longest_pause = max(b - a for a, b in zip(points, points[1:]))
    assert longest_pause < duration / 3, f"the Python thread stalled {longest_pause:.3f} s of {duration:.3f} s"


def test_the_documented_example_runs(capsys):
    text = (SOURCE / "docs" / "python.md").read_text()
    block = text.split("## An example")[1].split("```python")[1].split("```")[0]
    exec(compile(block, "docs/python.md", "exec"), {})
    out = capsys.readouterr().out
    assert "micro-batches" in out and "forwards on rank 1:" in out


def test_equal_layer_counts_is_the_libraries_sharding():
    import pipeplan.torch
    assert pipeplan.equal_layer_counts(10, 4) == [3, 3, 2, 2]
    assert pipeplan.equal_layer_counts(8, 8) == [1] * 8
    assert pipeplan.torch.layer_ranges(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    for layers, stages in ((3, 4), (4, 0)):
        with pytest.raises(ValueError, match="need 1 <= stages <= layers"):
            pipeplan.torch.layer_ranges(layers, stages)
