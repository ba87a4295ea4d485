#!/usr/bin/env python3
"""The `docs` suite: runs the shell blocks of README.md and docs/*.md against a build.

Every fenced block whose info string is `sh` runs (```text and ```console blocks are output,
anything else is not run). Blocks of one file run in order, in one scratch folder laid out
like the checkout: SCRATCH/checkout holds links to the source tree's entries and `build` (the
build under test), SCRATCH/shared/data links to the reference data when it is found, so
`../shared/data/...`, `build/...`, `benchmarks/...` and files an earlier block wrote all
resolve, and nothing is written into the checkout. `pipeplan` is the build's tool (on PATH).
Each block runs under `bash -eo pipefail`; a non-zero exit or a timeout fails the suite.

A block may be preceded (blank lines allowed) by one marker comment, e.g.
    <!-- docs-test: needs-data -->
    <!-- docs-test: needs clang++-16, needs-data -->
    <!-- docs-test: skip (runs every test suite: that is CI itself) -->
    <!-- docs-test: needs-file build/benchmarks/bench_energy -->
    <!-- docs-test: timeout 120 -->
needs-data     the block reads ../shared/data: skipped (and said so) when it is absent
needs PROGRAM  skipped when PROGRAM is not on PATH (e.g. clang++-16)
needs-file P   skipped when P (relative to the checkout, e.g. a benchmark this build lacks) is absent
skip (REASON)  never run; the reason is printed
timeout N      seconds for this block (default 60)

Usage: run_docs.py SOURCE_DIR BUILD_DIR [FILE...]   (exit 0: all ran or skipped; 1: a failure;
77: every block skipped). $PIPEPLAN_DATA_DIR overrides where the data is looked for.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
DEFAULT_TIMEOUT_S = 60


def blocks_of(path):
    """(line, info, text, marker) for every fenced block of a Markdown file (also indented
    ones, in list items: the fence's indentation is taken off every line)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)\s*([^\s`]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info, start = m.group(1), m.group(2), m.group(3), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        marker, k = "", start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and MARKER.match(lines[k].strip()):
            marker = MARKER.match(lines[k].strip()).group(1)
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[start + 1:j]]
        out.append((start + 1, info, "\n".join(body), marker))
        i = j + 1
    return out


def parse_marker(marker, where):
    """{'needs_data': bool, 'needs': [...], 'skip': reason or None, 'timeout': s}."""
    spec = {"needs_data": False, "needs": [], "files": [], "skip": None, "timeout": DEFAULT_TIMEOUT_S}
    if not marker:
        return spec
    for part in re.split(r",\s*(?![^()]*\))", marker):
        part = part.strip()
        if part == "needs-data":
            spec["needs_data"] = True
        elif part.startswith("needs-file "):
            spec["files"].append(part[len("needs-file "):].strip())
        elif part.startswith("needs "):
            spec["needs"].append(part[len("needs "):].strip())
        elif part.startswith("skip"):
            spec["skip"] = part[len("skip"):].strip(" ()") or "no reason given"
        elif re.fullmatch(r"timeout \d+", part):
            spec["timeout"] = int(part.split()[1])
        else:
            raise SystemExit(f"{where}: unknown docs-test marker '{part}' (needs-data, needs PROGRAM, needs-file PATH, skip (REASON), timeout N)")
    return spec


def find_data(source):
    env = os.environ.get("PIPEPLAN_DATA_DIR")
    if env:
        return env if os.path.isdir(env) else None
    p = os.path.normpath(os.path.join(source, "..", "shared", "data"))
    return p if os.path.isdir(os.path.join(p, "cost_models")) else None


def scratch_checkout(source, build, data):
    root = tempfile.mkdtemp(prefix="pipeplan-docs.")
    co = os.path.join(root, "checkout")
    os.mkdir(co)
    for name in os.listdir(source):
        if name not in ("build", ".git"):
            os.symlink(os.path.join(source, name), os.path.join(co, name))
    os.symlink(os.path.abspath(build), os.path.join(co, "build"))
    if data:
        os.makedirs(os.path.join(root, "shared"))
        os.symlink(os.path.abspath(data), os.path.join(root, "shared", "data"))
    return root, co


def run_file(md, source, build, data, env):
    """Runs md's sh blocks; returns (ran, skipped, failed)."""
    rel = os.path.relpath(md, source)
    ran = skipped = failed = 0
    root, co = scratch_checkout(source, build, data)
    try:
        for line, info, text, marker in blocks_of(md):
            if info != "sh":
                continue
            where = f"{rel}:{line}"
            spec = parse_marker(marker, where)
            missing = [p for p in spec["needs"] if shutil.which(p) is None]
            missing += [f for f in spec["files"] if not os.path.exists(os.path.join(co, f))]
            reason = (spec["skip"] or ("needs ../shared/data, which is absent" if spec["needs_data"] and not data else None)
                      or (f"needs {', '.join(missing)}, absent" if missing else None))
            if reason:
                print(f"SKIP {where}: {reason}")
                skipped += 1
                continue
            t0 = time.monotonic()
            try:
                p = subprocess.run(["bash", "-eo", "pipefail", "-c", text], cwd=co, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=spec["timeout"])
                rc, out = p.returncode, p.stdout.decode("utf-8", "replace")
            except subprocess.TimeoutExpired as e:
                rc, out = "timeout", (e.stdout or b"").decode("utf-8", "replace")
            dt = time.monotonic() - t0
            if rc == 0:
                print(f"ok   {where} ({dt:.1f} s)")
                ran += 1
            else:
                failed += 1
                print(f"FAIL {where} (exit {rc} after {dt:.1f} s; limit {spec['timeout']} s)\n--- block:\n{text}\n"
                      f"--- output (last 40 lines):")
                print("\n".join(out.rstrip().split("\n")[-40:]))
                print("---")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return ran, skipped, failed


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    source, build = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    files = argv[3:] or (["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(source, "docs"))
                                              if f.endswith(".md")))
    data = find_data(source)
    print(f"reference data: {data or 'absent (blocks marked needs-data are skipped)'}")
    env = dict(os.environ)
    env["PATH"] = os.path.join(build, "examples", "cli") + os.pathsep + env.get("PATH", "")
    env["PIPEPLAN_BUILD_DIR"] = "build"  # .ci/setup run in a block: the build under test
    if data:
        env["PIPEPLAN_DATA_DIR"] = os.path.abspath(data)
    totals = [0, 0, 0]
    for f in files:
        r = run_file(os.path.join(source, f), source, build, data, env)
        totals = [a + b for a, b in zip(totals, r)]
    print(f"docs: {totals[0]} blocks ran, {totals[1]} skipped, {totals[2]} failed")
    print(f"{totals[0]} passed, {totals[2]} failed, {totals[1]} skipped")  # every suite's closing line
    if totals[2]:
        return 1
    return 77 if totals[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
