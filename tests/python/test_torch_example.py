"""examples/torch/train_gpt.py trains on 2 local gloo processes and passes its own --check."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("pipeplan")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch" / "train_gpt.py"


def test_train_gpt_check_passes_and_prints_each_iteration(tmp_path):
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("task,input_tokens,target_tokens\n" + "".join(f"t,{5 + i % 40},{1 + i % 7}\n" for i in range(64)))
    r = subprocess.run([sys.executable, str(EXAMPLE), "--spawn", "--stages", "2", "--iterations", "2", "--tokens", "400",
                        "--max-seqlen", "32", "--lengths", str(lengths), "--check", "--timeout", "60"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("iter ")]
    assert len(lines) == 2, r.stdout
    for x in lines:
        assert re.search(r"loss \d+\.\d+ .* ms .*stall .* ms .*\d+ micro-batches  \S+", x), x
    assert "check: passed" in r.stdout


def test_train_gpt_rejects_a_lengths_file_without_its_columns(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("input,target\n3,4\n")
    r = subprocess.run([sys.executable, str(EXAMPLE), "--spawn", "--stages", "2", "--iterations", "1",
                        "--lengths", str(bad)], capture_output=True, text=True, timeout=240)
    assert r.returncode != 0 and f"{bad}: no column 'input_tokens'" in r.stdout + r.stderr
