#!/usr/bin/python3
"""The planned makespan over a sweep of memory limits: does more memory ever give a slower plan?

For each batch (GPT-6.7B, tp 2, S 4, 8 layers per stage, on SuperNI; T5-11B, tp 4, S 4, 6 layers
per stage, on SuperNI and with a share of long-target samples drawn by
benchmarks/batching/mixed_batches.py) runs `pipeplan plan --json` at every limit of the sweep and
prints per limit the makespan, micro-batches, recomputation mode, the budget the plan was made
under (below the limit after memory re-plans) and the rise over the fastest plan at any smaller
limit; then per batch the worst rise (the figure docs/plans.md quotes; 0 = monotone).

    /usr/bin/python3 benchmarks/plan/memory_sweep.py [--pipeplan build/examples/cli/pipeplan]
        [--data ../shared/data] [--models gpt,t5,t5mix] [--seeds 1,2,3] [--tokens 65536]
        [--from-mb 10000] [--to-mb 80000] [--step-mb 500] [--memory-probes] [--quiet]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SETUPS = {  # model, tp, layers per stage, length file, long-target share (None: --lengths)
    "gpt": ("gpt_6.7b", 2, 8, "superni_gpt.csv", None),
    "t5": ("t5_11b", 4, 6, "superni_llama.csv", None),
    "t5mix": ("t5_11b", 4, 6, "superni_llama.csv", 0.25),
}


def batch_args(args, setup, seed, tmp):
    _, _, _, lengths, share = setup
    if share is None:
        return ["--lengths", os.path.join(args.data, "lengths", lengths), "--tokens", str(args.tokens), "--seed", str(seed)]
    path = os.path.join(tmp, "mixed_%d_%s.csv" % (seed, share))
    subprocess.run([sys.executable, os.path.join(HERE, "..", "batching", "mixed_batches.py"), "--tokens", str(args.tokens),
                    "--seed", str(seed), "--share", str(share), "-o", path], check=True,
                   env=dict(os.environ, PIPEPLAN_DATA_DIR=args.data))
    return ["--batch", path]


def sweep(args, name, seed, tmp):
    setup = SETUPS[name]
    model, tp, layers, _, _ = setup
    base = [args.pipeplan, "plan", "--profiles", os.path.join(args.data, "cost_models"), "--model", model, "--tp", str(tp),
            "--stages", "4", "--layers-per-stage", str(layers), "--json"] + batch_args(args, setup, seed, tmp)
    best, worst = None, 0.0
    limit = args.from_mb
    while limit <= args.to_mb:
        out = subprocess.run(base + ["--memory-mb", str(limit)] + (["--memory-probes"] if args.memory_probes else []),
                             capture_output=True, text=True)
        if out.returncode != 0:
            if not args.quiet:
                print("  %6d MB: refused" % limit)
        else:
            r = json.loads(out.stdout)
            rise = r["makespan_ms"] / best - 1 if best is not None else 0.0
            worst = max(worst, rise)
            best = r["makespan_ms"] if best is None else min(best, r["makespan_ms"])
            if not args.quiet:
                print("  %6d MB: %9.2f ms  %3d micro-batches  %-9s  budget %8.1f MB  %+6.2f %%" %
                      (limit, r["makespan_ms"], r["microbatches"], r["recompute"], r["budget_mb"], 100 * rise))
        limit += args.step_mb
    print("%s seed %d, %d tokens, %d-%d MB: worst rise %+.2f %%" % (name, seed, args.tokens, args.from_mb, args.to_mb,
                                                                    100 * worst))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeplan", default="build/examples/cli/pipeplan")
    ap.add_argument("--data", default=os.environ.get("PIPEPLAN_DATA_DIR", os.path.join("..", "shared", "data")))
    ap.add_argument("--models", default="gpt,t5,t5mix")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--tokens", type=int, default=65536)
    ap.add_argument("--from-mb", type=int, default=10000)
    ap.add_argument("--to-mb", type=int, default=80000)
    ap.add_argument("--step-mb", type=int, default=500)
    ap.add_argument("--memory-probes", action="store_true", help="plan with `pipeplan plan --memory-probes`")
    ap.add_argument("--quiet", action="store_true", help="only the worst rise per batch")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.data, "cost_models")):
        sys.exit("memory_sweep.py: no profiles under %s (give --data or PIPEPLAN_DATA_DIR)" % args.data)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            if name not in SETUPS:
                sys.exit("memory_sweep.py: unknown model setup '%s' (gpt, t5, t5mix)" % name)
            for seed in (int(s) for s in args.seeds.split(",")):
                sweep(args, name, seed, tmp)


if __name__ == "__main__":
    main()
