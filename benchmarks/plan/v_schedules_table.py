#!/usr/bin/python3
"""Makespan / lower bound of every candidate schedule of `pipeplan plan` on real batches.

Runs `pipeplan plan --json` (candidates of the default `auto` choice, which includes the V
schedules when a device's layer count is even) for GPT-6.7B (tp 2, 32 layers) and T5-11B
(tp 4, 24 layers), SuperNI batches of 65,536 and 262,144 tokens, S = 4, 8, 16, at 36,000 MB,
and prints the rows of docs/schedules.md's table: per schedule its best makespan over the
splits (adaptive, 1F1B and ZB-H1 also planned by name, since the auto choice prunes them by their
lower bound when a V beats it) divided by the lower bound of the one-chunk placement (`lower_bound_ms` of the same
command with `--schedule zb-h1`: the V's two chunks per device fill and drain faster, so a V
schedule may finish below it), the choice with and without the V schedules.

    /usr/bin/python3 benchmarks/plan/v_schedules_table.py [--pipeplan build/examples/cli/pipeplan]
        [--data /work/shared/data]
"""
import argparse
import json
import subprocess
import sys

OLD = ("adaptive", "1f1b", "zb-h1", "interleaved")
NEW = ("zb-v", "v-half", "v-min")
MODELS = {"gpt_6.7b": (2, 32, "superni_gpt.csv"), "t5_11b": (4, 24, "superni_llama.csv")}


def run(pipeplan, data, model, tokens, stages, seed, extra=()):
    tp, layers, lengths = MODELS[model]
    if layers % stages:
        return None
    cmd = [pipeplan, "plan", "--profiles", data + "/cost_models", "--model", model, "--tp", str(tp),
           "--stages", str(stages), "--layers-per-stage", str(layers // stages), "--memory-mb", "36000",
           "--max-seqlen", "4096", "--lengths", data + "/lengths/" + lengths, "--tokens", str(tokens),
           "--seed", str(seed), "--json"] + list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "exit %d" % out.returncode}
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeplan", default="build/examples/cli/pipeplan")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/work/shared/data")
    a = ap.parse_args()
    print("| model | tokens | S | " + " | ".join(OLD[:3] + NEW) + " | chosen | without V | lower bound (ms) | plan (ms) |")
    print("|---|---|---|" + "---|" * (len(OLD[:3] + NEW) + 4))
    for model in MODELS:
        for tokens in (65536, 262144):
            for stages in (4, 8, 16):
                j = run(a.pipeplan, a.data, model, tokens, stages, a.seed)
                if j is None:
                    print("| %s | %d | %d | (layers do not divide into %d stages) |" % (model, tokens, stages, stages))
                    continue
                if "error" in j:
                    print("| %s | %d | %d | error: %s |" % (model, tokens, stages, j["error"]))
                    continue
                best = {}

                def add(result):
                    for c in result.get("candidates", []):
                        if c["feasible"] and c["makespan_ms"] is not None:
                            best[c["schedule"]] = min(best.get(c["schedule"], float("inf")), c["makespan_ms"])

                add(j)
                # the one-chunk kinds, each named (the auto choice prunes them by their lower bound
                # when a V beats it)
                named = {k: run(a.pipeplan, a.data, model, tokens, stages, a.seed, ("--schedule", k)) for k in OLD[:3]}
                for r in named.values():
                    add(r)
                base = named["zb-h1"]
                lb = base["lower_bound_ms"] if "error" not in base else j["lower_bound_ms"]
                cells = ["%.3f" % (best[k] / lb) if k in best else "–" for k in OLD[:3] + NEW]
                old = min((v for k, v in best.items() if k in OLD), default=float("inf"))
                print("| %s | %d | %d | %s | %s %.3f | %.3f | %.1f | %.1f |" % (
                    model, tokens, stages, " | ".join(cells), j["schedule"], j["makespan_ms"] / lb, old / lb, lb,
                    j["planning_ms"]["total"]))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
