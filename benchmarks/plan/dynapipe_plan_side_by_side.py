#!/usr/bin/python3
"""Plans side by side with DynaPipe's published planner on real batches (docs/plans.md).

Draws global batches from $PIPEPLAN_DATA_DIR/lengths exactly as the tests' draw_batch does (the
helpers of benchmarks/batching/dynapipe_side_by_side.py), then for each batch runs:
  * DynaPipe's full planner (reference harness dyna_plan.py: its split, then its schedule search
    over recompute types and clustered micro-batch permutations, priced by DynaPipe's simulator
    on its uniform cluster: 100 Gbit/s, no latency);
  * `pipeplan plan --accounting dynapipe --bandwidth-gbps 100 --json` (pipeplan's split and
    schedule, priced by pipeplan's simulator), with --out to read the chosen micro-batches;
  * the two cross prices, so that each comparison is made under one cost model:
      - DynaPipe's micro-batches planned by pipeplan (`pipeplan plan --microbatches`): both
        plans priced by pipeplan's simulator;
      - pipeplan's micro-batches planned by DynaPipe (`dyna_plan.py --split-json`): both priced
        by DynaPipe's simulator.
Prints one JSON line per batch and a markdown table at the end.

  DYNAREF_WORK=/work/dynaref-work PIPEPLAN=build/examples/cli/pipeplan \\
    /usr/bin/python3 benchmarks/plan/dynapipe_plan_side_by_side.py --model gpt_6.7b --seeds 1-5 \\
    [--pipeplan-flags='--alternative-splits 4']

Run from the project root after ../shared/reference/dynapipe/build.sh. Scratch files go to
$DYNAREF_WORK/plan_side_by_side (nothing is written inside the repository).
"""
import argparse
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "batching"))
from dynapipe_side_by_side import (COMMON, DATA, PIPEPLAN, REF, SETTINGS, draw_batch, read_lengths,  # noqa: E402
                                   require_harness, run_json, seeds_of, write_batch)

NETWORK = ["--accounting", "dynapipe", "--bandwidth-gbps", "100"]
EXTRA = []  # more `pipeplan plan` flags (--pipeplan-flags)


def dynapipe_plan(model, batch_csv, split_json=None, seed=0):
    cmd = ["/usr/bin/python3", os.path.join(REF, "dyna_plan.py"), "--model", model, *SETTINGS[model], *COMMON,
           "--batch", batch_csv, "--cluster", "uniform", "--seed", str(seed)]
    if split_json:
        cmd += ["--split-json", split_json]
    j = run_json(cmd)
    if not j.get("feasible"):
        raise RuntimeError(f"DynaPipe's planner found no plan for {batch_csv}: {j.get('error')}")
    return j


def pipeplan_plan(model, batch_csv, out_dir=None, microbatches=None):
    cmd = [PIPEPLAN, "plan", "--profiles", os.path.join(DATA, "cost_models"), "--model", model, *SETTINGS[model],
           *COMMON, *NETWORK, *EXTRA, "--batch", batch_csv, "--json"]
    if out_dir:
        cmd += ["--out", out_dir, "--format", "json"]
    if microbatches:
        cmd += ["--microbatches", microbatches]
    return run_json(cmd)


def chosen_microbatches(out_dir):
    """The sample ids of the plan's micro-batches (rank 0's header, replica 0: dp = 1)."""
    with open(os.path.join(out_dir, "rank_0.json")) as f:
        header = json.load(f)["header"]
    return [m["sample_ids"] for m in header["microbatches"]]


def one_batch(model, samples, tokens, seed, work):
    base = os.path.join(work, f"{model}_{tokens}_{seed}")
    batch_csv = base + ".csv"
    batch = draw_batch(samples, tokens, seed)
    write_batch(batch_csv, batch)
    dyn = dynapipe_plan(model, batch_csv)
    out_dir = base + "_plan"
    pp = pipeplan_plan(model, batch_csv, out_dir=out_dir)
    pp_split = base + "_pipeplan_split.json"
    with open(pp_split, "w") as f:
        json.dump({"microbatches": chosen_microbatches(out_dir)}, f)
    dyn_split = base + "_dynapipe_split.json"
    with open(dyn_split, "w") as f:
        json.dump({"microbatches": dyn["microbatches_in_planned_order"]}, f)
    pp_on_dyn = pipeplan_plan(model, batch_csv, microbatches=dyn_split)  # DynaPipe's split, pipeplan's planner
    dyn_on_pp = dynapipe_plan(model, batch_csv, split_json=pp_split)     # pipeplan's split, DynaPipe's planner
    return {
        "model": model, "tokens": tokens, "seed": seed, "samples": len(batch),
        "dynapipe_makespan_ms": dyn["makespan_ms"], "dynapipe_microbatches": dyn["n_microbatches"],
        "dynapipe_schedule": dyn["best_schedule"], "dynapipe_recompute": dyn["best_recompute"],
        "dynapipe_wall_s": (dyn.get("split_wall_s") or 0) + dyn["schedule_wall_s"],
        "pipeplan_makespan_ms": pp["makespan_ms"], "pipeplan_lower_bound_ms": pp["lower_bound_ms"],
        "pipeplan_ratio": pp["makespan_ms"] / pp["lower_bound_ms"], "pipeplan_microbatches": pp["microbatches"],
        "pipeplan_schedule": pp["schedule"], "pipeplan_planning_ms": pp["planning_ms"]["total"],
        "dynapipe_split_by_pipeplan_ms": pp_on_dyn["makespan_ms"],
        "pipeplan_split_by_dynapipe_ms": dyn_on_pp["makespan_ms"],
    }


def print_table(rows):
    """Markdown: makespans (ms). Own = each planner priced by its own simulator; the pipeplan-sim
    columns compare pipeplan's plan with DynaPipe's micro-batches planned by pipeplan, the
    DynaPipe-sim columns DynaPipe's plan with pipeplan's micro-batches planned by DynaPipe."""
    print("| model | seed | samples | DynaPipe plan (DynaPipe sim) | pipeplan plan (pipeplan sim) | lower bound | ratio "
          "| DynaPipe split, pipeplan planner (pipeplan sim) | Δ pipeplan sim | pipeplan split, DynaPipe planner "
          "(DynaPipe sim) | Δ DynaPipe sim | mbs DynaPipe / pipeplan | planning DynaPipe s / pipeplan ms |")
    print("|" + "---|" * 13)
    for r in rows:
        pp, dyn = r["pipeplan_makespan_ms"], r["dynapipe_makespan_ms"]
        a, b = r["dynapipe_split_by_pipeplan_ms"], r["pipeplan_split_by_dynapipe_ms"]
        print(f"| {r['model']} | {r['seed']} | {r['samples']} | {dyn:.1f} | {pp:.1f} | {r['pipeplan_lower_bound_ms']:.1f} "
              f"| {r['pipeplan_ratio']:.3f} | {a:.1f} | {100 * (pp / a - 1):+.2f} % | {b:.1f} | {100 * (b / dyn - 1):+.2f} % "
              f"| {r['dynapipe_microbatches']} / {r['pipeplan_microbatches']} "
              f"| {r['dynapipe_wall_s']:.2f} / {r['pipeplan_planning_ms']:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt_6.7b", choices=sorted(SETTINGS))
    ap.add_argument("--tokens", type=int, default=65536)
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--pipeplan-flags", default="", help="extra `pipeplan plan` flags, e.g. --pipeplan-flags='--alternative-splits 4'")
    ap.add_argument("--table-from", nargs="+", metavar="LOG", help="only print the table from earlier runs' JSON lines")
    a = ap.parse_args()
    if a.table_from:
        print_table([json.loads(line) for f in a.table_from for line in open(f) if line.startswith("{")])
        return 0
    EXTRA.extend(a.pipeplan_flags.split())
    work = os.path.join(require_harness(), "plan_side_by_side")
    os.makedirs(work, exist_ok=True)
    samples = read_lengths(os.path.join(DATA, "lengths", "superni_llama.csv" if a.model == "t5_11b" else "superni_gpt.csv"))
    rows = []
    for seed in seeds_of(a.seeds):
        try:
            r = one_batch(a.model, samples, a.tokens, seed, work)
        except RuntimeError as e:  # a failed planner run: its command and error, no traceback
            sys.exit(f"{os.path.basename(sys.argv[0])}: seed {seed}: {e}")
        print(json.dumps(r), flush=True)
        rows.append(r)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
