#!/usr/bin/env python3
"""Writes batch_65k.csv: a seeded synthetic instruction-tuning batch of about 65,536 tokens
(prompt and target lengths log-normal, as the main job's built-in batch), for the documented
commands that need a batch CSV. Standard library only:  python3 examples/data/make_batch.py"""
import os
import random

rng = random.Random(2024)
rows, tokens = [], 0
while tokens < 65536:
    prompt = min(4000, max(4, int(rng.lognormvariate(4.8, 0.75))))
    target = min(600, max(1, int(rng.lognormvariate(2.5, 1.0))))
    rows.append((prompt, target))
    tokens += prompt + target
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "batch_65k.csv"), "w") as f:
    f.write("input_tokens,target_tokens\n")
    f.writelines(f"{a},{b}\n" for a, b in rows)
print(f"{len(rows)} samples, {tokens} tokens")
