#!/usr/bin/python3
"""Seeded global batches that mix real samples with a share of long-target samples.

A batch is drawn like the tests' draw_batch (tests/batching/real_batches.hpp: seeded splitmix64
Fisher-Yates over the length file, samples taken while input + target tokens fit the budget),
except that each slot is, with probability `share`, a synthetic long-target sample instead of the
next real one. The synthetic samples stand for chain-of-thought math (short question, long worked
answer): input tokens uniform in [40, 150], target tokens uniform in [80, 300] (both inclusive),
drawn from a second splitmix64 stream (seed ^ 0x5851F42D4C957F2D) so that share 0 gives exactly
draw_batch's batch. Same (file, tokens, seed, share) -> same CSV, byte for byte.

  /usr/bin/python3 benchmarks/batching/mixed_batches.py --tokens 65536 --seed 1 --share 0.25 -o b.csv
  /usr/bin/python3 benchmarks/batching/mixed_batches.py --tokens 65536 --seeds 1-3 --shares 0,0.1,0.25,0.5 -d DIR

The CSV has the columns input_tokens,target_tokens,long (1 = synthetic long-target sample), one
sample per row: `pipeplan split|plan --batch` and the DynaPipe reference harness read it.
"""
import argparse
import os
import sys

MASK = (1 << 64) - 1
DATA = os.environ.get("PIPEPLAN_DATA_DIR", os.path.join("..", "shared", "data"))
LONG_INPUT_TOKENS = (40, 150)
LONG_TARGET_TOKENS = (80, 300)
LONG_STREAM = 0x5851F42D4C957F2D


class SplitMix64:
    def __init__(self, seed):
        self.s = seed & MASK

    def __call__(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def read_lengths(path):
    """(input_tokens, target_tokens) of every row of a length file (CRLF or LF)."""
    rows = []
    with open(path, newline="") as f:
        header = f.readline().strip().split(",")
        i_in, i_tg = header.index("input_tokens"), header.index("target_tokens")
        for line in f:
            c = line.rstrip("\r\n").split(",")
            rows.append((int(c[i_in]), int(c[i_tg])))
    return rows


def long_sample(rng):
    lo_i, hi_i = LONG_INPUT_TOKENS
    lo_t, hi_t = LONG_TARGET_TOKENS
    return (lo_i + rng() % (hi_i - lo_i + 1), lo_t + rng() % (hi_t - lo_t + 1))


def draw_mixed(samples, budget, seed, share):
    """One global batch of at most `budget` input + target tokens: a list of (input, target, long)."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1] (got {share})")
    idx = list(range(len(samples)))
    rng = SplitMix64(seed)
    for i in range(len(idx), 1, -1):
        j = rng() % i
        idx[i - 1], idx[j] = idx[j], idx[i - 1]
    mix = SplitMix64(seed ^ LONG_STREAM)
    threshold = int(share * (1 << 53))  # P(long) = share, from the top 53 bits of one draw
    out, total, k = [], 0, 0
    while True:
        if share > 0 and (mix() >> 11) < threshold:
            a, b = long_sample(mix)
            is_long = 1
        else:
            if k == len(idx):
                break
            a, b = samples[idx[k]]
            k += 1
            is_long = 0
        total += a + b
        if total > budget:
            break
        out.append((a, b, is_long))
    return out


def write_batch(path, batch):
    """A batch CSV: input_tokens,target_tokens,long."""
    with open(path, "w") as f:
        f.write("input_tokens,target_tokens,long\n")
        for sample in batch:  # (input, target) or (input, target, long)
            f.write(f"{sample[0]},{sample[1]},{sample[2] if len(sample) > 2 else 0}\n")


def batch_name(tokens, seed, share):
    return f"mixed_{tokens}_s{seed}_long{round(100 * share)}.csv"


def values_of(spec, conv):
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        if b and conv is int:
            out += list(range(int(a), int(b) + 1))
        else:
            out.append(conv(part))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", default=os.path.join(DATA, "lengths", "superni_llama.csv"),
                    help="length file of the real samples (default: $PIPEPLAN_DATA_DIR/lengths/superni_llama.csv)")
    ap.add_argument("--tokens", default="65536", help="token budget(s), comma-separated")
    ap.add_argument("--seed", "--seeds", dest="seeds", default="1", help="seed(s): 1,2 or 1-3")
    ap.add_argument("--share", "--shares", dest="shares", default="0.25",
                    help="probability(ies) that a sample is a long-target one, in [0, 1]")
    ap.add_argument("-o", "--output", help="the CSV (one batch); default: stdout")
    ap.add_argument("-d", "--directory", help="write every batch of the grid here as " + batch_name(65536, 1, 0.25))
    a = ap.parse_args()
    if not os.path.isfile(a.lengths):
        sys.exit(f"{os.path.basename(sys.argv[0])}: no length file at {a.lengths} (set PIPEPLAN_DATA_DIR or --lengths)")
    samples = read_lengths(a.lengths)
    grid = [(t, s, sh) for t in values_of(a.tokens, int) for s in values_of(a.seeds, int)
            for sh in values_of(a.shares, float)]
    if a.directory:
        os.makedirs(a.directory, exist_ok=True)
        for t, s, sh in grid:
            write_batch(os.path.join(a.directory, batch_name(t, s, sh)), draw_mixed(samples, t, s, sh))
        return 0
    if len(grid) != 1:
        sys.exit(f"{os.path.basename(sys.argv[0])}: several batches asked for: give -d DIR")
    t, s, sh = grid[0]
    batch = draw_mixed(samples, t, s, sh)
    write_batch(a.output or "/dev/stdout", batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
