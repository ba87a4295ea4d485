#!/usr/bin/python3
"""Writes the expected tables of tests/batching/dynapipe_reference.cpp from DynaPipe's own code.

Each table, dynapipe_<name>.csv, lists micro-batch shapes and what DynaPipe's per-micro-batch
cost function (`_get_time_and_memory_for_microbatch` in dynapipe/data_opt/dp_helper.cpp, float32)
says they cost, over DynaPipe's ProfileBasedCostModel rebuilt from ../shared/data/cost_models:
  * source `dp`: the micro-batches of DynaPipe's own split of a batch (dyna_split.py; the values
    are those its C++ dynamic program returned);
  * source `eval`: shapes priced by the reference harness's float32 copy of that function over
    DynaPipe's interpolators (dyna_eval.mb_cost), for batches too large for DynaPipe's planner
    (GPT 1M tokens: the micro-batches of pipeplan's split) and for a grid of shapes that covers
    extrapolation below 16 tokens and never-measured (out-of-memory) cells;
  * source `hole`: a shape whose interpolation reads a never-measured cell (DynaPipe's 1e100
    fill), written as `inf` (infeasible). DynaPipe itself prices most of these as 1e100-ish
    (infeasible too); below the grid a hole can come back as -1e99, which DynaPipe's
    max(encoder, decoder) then hides — pipeplan deliberately calls those infeasible as well.
Batches are drawn as tests/batching/real_batches.hpp draws them (benchmarks/batching/
dynapipe_side_by_side.py draw_batch), except the hand-made batch of short samples.

Run from the project root, after ../shared/reference/dynapipe/build.sh:
  DYNAREF_WORK=/work/dynaref-work /usr/bin/python3 tests/batching/data/make_dynapipe_tables.py [NAME...]
(NAME: gpt_65k, t5_65k, gpt_1m, gpt_short, t5_short, gpt_grid, t5_grid; none = all)
"""
import csv
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "batching"))
import dynapipe_side_by_side as sbs  # noqa: E402

REF = os.path.abspath(sbs.REF)
sys.path.insert(0, REF)
PY = "/usr/bin/python3"
HEADER = ["source", "recompute", "mbs", "seqlen", "dec_seqlen", "time_ms", "stored_mb", "peak_mb"]


def model_args(model):
    return ["--model", model, *sbs.SETTINGS[model], *sbs.COMMON]


def dp_rows(model, batch_csv):
    j = sbs.run_json([PY, os.path.join(REF, "dyna_split.py"), *model_args(model), "--batch", batch_csv])
    rows = []
    for m in j["per_microbatch"]:
        rows.append(["dp", j["recompute"], m["mbs"], m["seqlen"], m.get("dec_seqlen") or 0,
                     m["time_ms"], m["stored_mb"], m["peak_mb"]])
    return rows


def eval_rows(model, recompute, shapes):
    import dyna_eval
    from dynacm import build_cost_model

    raw = build_cost_model(model).get_raw_cost_model(int(sbs.SETTINGS[model][1]), recompute)
    L = int(sbs.SETTINGS[model][3])
    rows = []
    for mbs, e, d in shapes:
        t, s, p = dyna_eval.mb_cost(raw, L, mbs, e, d)
        if all(abs(x) < 1e30 for x in (t, s, p)) and not reads_hole(raw, mbs, e, d):
            rows.append(["eval", recompute, mbs, e, d, t, s, p])
        else:
            rows.append(["hole", recompute, mbs, e, d, math.inf, math.inf, math.inf])
    return rows


def reads_hole(raw, mbs, e, d):
    """True when one of the interpolated values reads a never-measured cell (DynaPipe's 1e100
    fill). Below the grid such a cell can come back as -1e99 and vanish in DynaPipe's
    max(encoder, decoder); pipeplan calls every such shape infeasible (source `hole`)."""
    vals = [raw.get_cost("Encoder FW", e, mbs), raw.get_cost("Encoder BW", e, mbs),
            raw.get_stored_activation("Encoder", e, mbs), raw.get_peak_activation("Encoder", e, mbs)]
    if d > 0:
        vals += [raw.get_cost("Decoder FW", (e, d), mbs), raw.get_cost("Decoder BW", (e, d), mbs),
                 raw.get_stored_activation("Decoder", (e, d), mbs), raw.get_peak_activation("Decoder", (e, d), mbs),
                 raw.get_cost("Postprocess FW", d, mbs), raw.get_cost("Postprocess BW", d, mbs)]
    else:
        vals += [raw.get_cost("Postprocess FW", e, mbs), raw.get_cost("Postprocess BW", e, mbs)]
    return any(abs(v) >= 1e30 for v in vals)


def pipeplan_shapes(model, batch_csv, work):
    out = os.path.join(work, "pp.json")
    j = sbs.pipeplan_split(model, batch_csv, "dynapipe", "auto", out)
    return j["recompute"], sorted({(m["mbs"], m["seqlen"], m.get("dec_seqlen") or 0) for m in j["per_microbatch"]})


ONLY = set(sys.argv[1:])  # table names to (re)write; none = all


def write(name, rows):
    if callable(rows):
        if ONLY and name not in ONLY:
            return
        rows = rows()
    path = os.path.join(HERE, f"dynapipe_{name}.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        for r in rows:
            w.writerow([repr(float(x)) if isinstance(x, float) and not math.isinf(x) else
                        ("inf" if isinstance(x, float) else x) for x in r])
    print(f"{path}: {len(rows)} rows", file=sys.stderr)


def main():
    import dynaref

    dynaref.setup()
    work = os.path.join(dynaref.work_dir(), "tables")
    os.makedirs(work, exist_ok=True)
    gpt = sbs.read_lengths(os.path.join(sbs.DATA, "lengths", "superni_gpt.csv"))
    llama = sbs.read_lengths(os.path.join(sbs.DATA, "lengths", "superni_llama.csv"))

    def batch_file(tag, batch):
        p = os.path.join(work, tag + ".csv")
        sbs.write_batch(p, batch)
        return p

    # Real batches split by DynaPipe's own planner (seed 1).
    write("gpt_65k", lambda: dp_rows("gpt_6.7b", batch_file("gpt65k", sbs.draw_batch(gpt, 65536, 1))))
    write("t5_65k", lambda: dp_rows("t5_11b", batch_file("t5_65k", sbs.draw_batch(llama, 65536, 1))))
    # GPT 1M tokens: DynaPipe's planner is too slow here; price pipeplan's micro-batches.
    def gpt_1m():
        rc, shapes = pipeplan_shapes("gpt_6.7b", batch_file("gpt1m", sbs.draw_batch(gpt, 1 << 20, 1)), work)
        return eval_rows("gpt_6.7b", rc, shapes)
    write("gpt_1m", gpt_1m)
    # Short samples (below the smallest profiled length, 16 tokens): DynaPipe extrapolates.
    # Many samples of 1..8 tokens (rounded to 8; T5 decoder: target + 2 <= 8), then 9..15 tokens,
    # then a few longer ones: DynaPipe's split has micro-batches of length 8 (extrapolated).
    short = ([(i % 5 + 1, i % 4) for i in range(400)] + [(9 + i % 5, i % 3) for i in range(60)] +
             [(40 + 7 * i, 3 + i % 5) for i in range(12)])
    write("gpt_short", lambda: dp_rows("gpt_6.7b", batch_file("gpt_short", short)))
    short_t5 = ([(i % 8 + 1, i % 6 + 1) for i in range(400)] + [(9 + i % 7, 1 + i % 4) for i in range(60)] +
                [(30 + 9 * i, 2 + i % 11) for i in range(12)])
    write("t5_short", lambda: dp_rows("t5_11b", batch_file("t5_short", short_t5)))
    # A grid of shapes: extrapolation below 16 tokens, interior points, never-measured cells.
    g_shapes = [(m, s, 0) for m in (1, 2, 3, 7, 16, 40, 64, 100) for s in (8, 24, 136, 520, 1024, 2056, 4096)]
    write("gpt_grid", lambda: eval_rows("gpt_6.7b", "none", g_shapes) + eval_rows("gpt_6.7b", "full", g_shapes[::3]))
    t_shapes = [(m, e, d) for m in (1, 3, 8, 24, 64) for e in (8, 16, 200, 1032, 4096) for d in (8, 16, 40, 256, 672)]
    write("t5_grid", lambda: eval_rows("t5_11b", "none", t_shapes) + eval_rows("t5_11b", "selective", t_shapes[::4]))


if __name__ == "__main__":
    main()
