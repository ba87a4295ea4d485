#!/usr/bin/python3
"""Side by side with DynaPipe's published planner on real batches (docs/batching.md).

Draws global batches from $PIPEPLAN_DATA_DIR/lengths with mixed_batches.py (share 0: exactly
the tests' draw_batch, seeded splitmix64 Fisher-Yates, samples taken while input + target tokens
fit the budget; share p: each sample is with probability p a synthetic long-target one, inputs
40-150 and targets 80-300 tokens), then for each batch runs, through the reference harness ../shared/reference/dynapipe (its
modules imported in this process, the cost model built once):
  * DynaPipe's default planner (dyna_split.run_split: elkai/LKH TSP order + its dynamic program), its
    realised objective priced by its own per-micro-batch cost (dyna_eval.mb_cost);
  * pipeplan's split (dynapipe and pipeplan accounting) with --order auto, lexicographic, tour,
    and on DynaPipe's TSP order (the batch rewritten in that order, --order dataset);
    dynapipe-accounting splits are priced again with DynaPipe's cost function.
Prints one JSON line per batch and a markdown table at the end.

  DYNAREF_WORK=/work/dynaref-work PIPEPLAN=build/examples/cli/pipeplan \\
    /usr/bin/python3 benchmarks/batching/dynapipe_side_by_side.py --model t5_11b --tokens 65536 --seeds 1-10
  ... --tokens 65536,262144 --seeds 1-3 --shares 0,0.1,0.25,0.5 --orders auto,lexicographic,tour

Run from the project root after ../shared/reference/dynapipe/build.sh. Nothing is written
inside the repository (scratch files go to $DYNAREF_WORK/side_by_side).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mixed_batches import batch_name, draw_mixed, read_lengths, values_of, write_batch  # noqa: E402

REF = os.environ.get("DYNAREF_DIR", os.path.join("..", "shared", "reference", "dynapipe"))
DATA = os.environ.get("PIPEPLAN_DATA_DIR", os.path.join("..", "shared", "data"))
PIPEPLAN = os.environ.get("PIPEPLAN", "build/examples/cli/pipeplan")
SETTINGS = {
    "t5_11b": ["--tp", "4", "--layers-per-stage", "6"],
    "gpt_6.7b": ["--tp", "2", "--layers-per-stage", "8"],
}
COMMON = ["--stages", "4", "--memory-mb", "36000", "--max-seqlen", "4096"]


def draw_batch(samples, budget, seed):
    """tests/batching/real_batches.hpp draw_batch: (input, target) pairs (mixed_batches.draw_mixed, share 0)."""
    return [(a, b) for a, b, _ in draw_mixed(samples, budget, seed, 0)]


def seeds_of(spec):
    """Seeds from "1-10" or "1,3,5"."""
    return values_of(spec, int)


def require_harness():
    """The scratch folder ($DYNAREF_WORK/...) once everything a run needs is there; otherwise
    exits with one line saying what is missing (no traceback): DynaPipe's reference harness
    ($DYNAREF_DIR, default ../shared/reference/dynapipe) built by its build.sh under
    $DYNAREF_WORK, the reference data ($PIPEPLAN_DATA_DIR) and the pipeplan tool ($PIPEPLAN)."""
    me = os.path.basename(sys.argv[0])
    work = os.environ.get("DYNAREF_WORK", "")
    if not os.path.isfile(os.path.join(REF, "dyna_plan.py")):
        sys.exit(f"{me}: DynaPipe's reference harness is not at {REF} (set DYNAREF_DIR)")
    if not work or not glob.glob(os.path.join(work, "dynapipe_src", "dynapipe", "data_opt", "dp_helper*.so")):
        sys.exit(f"{me}: DynaPipe is not built under DYNAREF_WORK={work or '(unset)'}: run "
                 f"DYNAREF_WORK=DIR {os.path.join(REF, 'build.sh')} once, then this with the same DYNAREF_WORK")
    if not os.path.isdir(os.path.join(DATA, "lengths")):
        sys.exit(f"{me}: the reference data is not at {DATA} (set PIPEPLAN_DATA_DIR)")
    if not os.access(PIPEPLAN, os.X_OK):
        sys.exit(f"{me}: {PIPEPLAN} not found: build it (ninja -C build examples/cli/pipeplan) or set PIPEPLAN")
    return work


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout)


def pipeplan_split(model, batch_csv, accounting, order, out_json):
    cmd = [PIPEPLAN, "split", "--profiles", os.path.join(DATA, "cost_models"), "--model", model,
           *SETTINGS[model], *COMMON, "--batch", batch_csv, "--accounting", accounting,
           "--interpolation", "linear", "--order", order, "--json"]
    j = run_json(cmd)
    with open(out_json, "w") as f:
        json.dump(j, f)
    return j


class Dynapipe:
    """DynaPipe's planner and cost function in this process (the harness's dyna_split.run_split
    and dyna_eval.mb_cost over one cost model, built once): same numbers as dyna_split.py and
    dyna_eval.py, without rebuilding the cost model for every call."""

    def __init__(self, model):
        sys.path.insert(0, os.path.abspath(REF))
        import dynaref
        from dynacm import build_cost_model

        dynaref.setup()
        self.model = model
        self.cm = build_cost_model(model)
        self.args = argparse.Namespace(model=model, tp=int(SETTINGS[model][1]), layers_per_stage=int(SETTINGS[model][3]),
                                       stages=int(COMMON[1]), memory_mb=float(COMMON[3]), max_seqlen=int(COMMON[5]),
                                       dp=1, disable_tsp=False)

    def lengths(self, batch_csv):
        import dynaref

        return dynaref.read_batch(batch_csv, self.model, self.args.max_seqlen)

    def split(self, batch_csv):
        """DynaPipe's default planner (TSP order + its dynamic program): dyna_split.py's JSON."""
        import dyna_split

        enc, dec = self.lengths(batch_csv)
        res, wall = dyna_split.run_split(self.cm, self.args, enc, dec)
        if not res.get("feasible"):
            raise RuntimeError(f"DynaPipe finds no feasible split of {batch_csv}")
        res["split_wall_s"] = [wall]
        return res

    def price(self, batch_csv, split):
        """dyna_eval.py on a split JSON: DynaPipe's objective of its micro-batches, the largest
        relative difference to the JSON's own per-micro-batch values, DynaPipe's memory limit."""
        import dyna_eval

        enc, dec = self.lengths(batch_csv)
        a = self.args
        raw = self.cm.get_raw_cost_model(a.tp, split.get("recompute") or "none")
        ref = split.get("per_microbatch") or [{}] * len(split["microbatches"])
        times, worst, stored, peak = [], 0.0, 0.0, 0.0
        for ids, m in zip(split["microbatches"], ref):
            n, e, d = dyna_eval.mb_shape(enc, dec, ids)
            t, st, pk = dyna_eval.mb_cost(raw, a.layers_per_stage, n, e, d)
            times.append(t)
            stored, peak = max(stored, st), max(peak, pk)
            for v, key in ((t, "time_ms"), (st, "stored_mb"), (pk, "peak_mb")):
                if key in m and m[key]:
                    worst = max(worst, abs(v - m[key]) / abs(m[key]))
        obj = dyna_eval.objective(times, a.stages, a.dp)[0]
        avail, _ = dyna_eval.available_memory(self.cm, a.model, a.tp, a.layers_per_stage, a.memory_mb, a.dp)
        limit = ("preferred" if peak <= avail and stored <= avail / a.stages else
                 "available" if peak <= avail and stored <= avail else "exceeded")
        return {"dynapipe_objective_ms": obj, "max_abs_rel": worst, "dynapipe_memory_limit": limit}


def print_table(results, orders):
    """Markdown: per batch, objectives (ms) in DynaPipe's accounting (pipeplan's splits priced by
    DynaPipe's own cost function) and in pipeplan's; `TSP` = pipeplan's exact split on DynaPipe's
    TSP order; Δ = default vs DynaPipe's planner (dynapipe acc.) or vs the exact split on the TSP order."""
    names = {"auto": "default", "lexicographic": "lexicographic", "tour": "tour"}
    cols = [names.get(o, o) for o in orders] + ["TSP"]
    print("| tokens | long share | seed | samples (long) | DynaPipe planner | " + " | ".join(cols) + " | Δ default | "
          + " | ".join("pp " + c for c in cols) + " | Δ default |")
    print("|" + "---|" * (7 + 2 * len(cols)))
    for r in results:
        d = r["dynapipe_planner_ms"]
        cells = [f"{r['tokens']:,}", f"{round(100 * r.get('share', 0))} %", str(r["seed"]),
                 f"{r['samples']} ({r.get('long_samples', 0)})", f"{d:.1f}"]
        cells += [f"{r[f'dynapipe_{o}_by_dynapipe_ms']:.1f}" for o in orders] + [f"{r['dynapipe_tsp_ms']:.1f}"]
        cells.append(f"{100 * (r['dynapipe_auto_by_dynapipe_ms'] / d - 1):+.2f} %")
        cells += [f"{r[f'pipeplan_{o}_ms']:.1f}" for o in orders + ["tsp"]]
        cells.append(f"{100 * (r['pipeplan_auto_ms'] / r['pipeplan_tsp_ms'] - 1):+.2f} %")
        print("| " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="t5_11b", choices=sorted(SETTINGS))
    ap.add_argument("--tokens", default="65536", help="token budget(s), comma-separated")
    ap.add_argument("--shares", default="0", help="shares of long-target samples (mixed_batches.py), comma-separated")
    ap.add_argument("--seeds", default="1-10")
    ap.add_argument("--orders", default="auto,lexicographic,tour")
    ap.add_argument("--reuse-dynapipe", action="store_true",
                    help="reuse DynaPipe's split of a batch from an earlier run ($DYNAREF_WORK/side_by_side/*_dyn.json)")
    ap.add_argument("--table-from", nargs="+", metavar="LOG",
                    help="only print the table from the JSON lines of earlier runs")
    a = ap.parse_args()
    if a.table_from:
        rows = [json.loads(line) for f in a.table_from for line in open(f) if line.startswith("{")]
        print_table(rows, a.orders.split(","))
        return 0
    work = os.path.join(require_harness(), "side_by_side")
    lengths = read_lengths(os.path.join(DATA, "lengths", "superni_llama.csv" if a.model == "t5_11b"
                                        else "superni_gpt.csv"))
    os.makedirs(work, exist_ok=True)
    orders = a.orders.split(",")
    dyna = Dynapipe(a.model)
    results = []
    grid = [(t, sh, s) for t in values_of(a.tokens, int) for sh in values_of(a.shares, float)
            for s in values_of(a.seeds, int)]
    for tokens, share, seed in grid:
        batch = draw_mixed(lengths, tokens, seed, share)
        tag = f"{a.model}_" + batch_name(tokens, seed, share)[:-len(".csv")]
        bcsv = os.path.join(work, tag + ".csv")
        write_batch(bcsv, batch)
        dyn_json = os.path.join(work, tag + "_dyn.json")
        if a.reuse_dynapipe and os.path.isfile(dyn_json):
            with open(dyn_json) as f:
                dyn = json.load(f)
        else:
            dyn = dyna.split(bcsv)
            with open(dyn_json, "w") as f:
                json.dump(dyn, f)
        dyn_eval = dyna.price(bcsv, dyn)
        dyn_obj = dyn_eval["dynapipe_objective_ms"]
        # DynaPipe's TSP order: its micro-batches are contiguous ranges of it.
        tsp = [i for mb in dyn["microbatches"] for i in mb]
        tcsv = os.path.join(work, tag + "_tsp.csv")
        write_batch(tcsv, [batch[i] for i in tsp])
        row = {"model": a.model, "tokens": tokens, "share": share, "seed": seed, "samples": len(batch),
               "long_samples": sum(x[2] for x in batch),
               "dynapipe_planner_ms": dyn_obj, "dynapipe_split_wall_s": dyn.get("split_wall_s"),
               "dynapipe_limit": f"{dyn.get('recompute')}/{dyn_eval.get('dynapipe_memory_limit')}"}
        for acc in ("dynapipe", "pipeplan"):
            for order in orders + ["tsp"]:
                out = os.path.join(work, f"{tag}_{acc}_{order}.json")
                if order == "tsp":
                    j = pipeplan_split(a.model, tcsv, acc, "dataset", out)
                else:
                    j = pipeplan_split(a.model, bcsv, acc, order, out)
                row[f"{acc}_{order}_ms"] = j["objective_ms"]
                if acc == "dynapipe" and order != "tsp":
                    ev = dyna.price(bcsv, j)
                    row[f"{acc}_{order}_by_dynapipe_ms"] = ev["dynapipe_objective_ms"]
                    # DynaPipe's cost of pipeplan's micro-batches vs pipeplan's: relative difference
                    row[f"{acc}_{order}_max_abs_rel"] = ev["max_abs_rel"]
                    row[f"{acc}_{order}_limit"] = f"{j['recompute']}/{ev.get('dynapipe_memory_limit')}"
        print(json.dumps(row), flush=True)
        results.append(row)
    print()
    print_table(results, orders)
    return 0


if __name__ == "__main__":
    sys.exit(main())
