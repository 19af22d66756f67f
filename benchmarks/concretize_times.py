"""Print wall times, medians over --repeats runs: warm set-up, a Spack process starting,
and per environment a cold
concretization (`climstack concretize --no-reuse`: Spack solves --fresh) and a warm one
(unchanged inputs: the lockfile is reused, climstack.stack.lock_cache).

Goals (issue 16): <= 45 s cold and <= 5 s warm per environment; <= 10 s for bin/setup
with a warm cache. Last, every environment cold at once as `make local` does it
(`climstack concretize --no-reuse`, one solve per CPU). --compare also solves each
environment without stack.yaml's concretizer:static_analysis and says whether the DAG
hashes are the same.

    .venv/bin/python benchmarks/concretize_times.py [--repeats 3] [--compare]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from climstack import pins
from climstack.common import process
from climstack.spack import DEFAULT
from climstack.stack import environments, lock_cache

os.environ["SPACK_DISABLE_LOCAL_CONFIG"] = "1"


def median_of(repeats: int, action) -> float:
    times = []
    for _ in range(repeats):
        start = time.monotonic()
        action()
        times.append(time.monotonic() - start)
    return statistics.median(times)


def dag_hashes(env_dir: Path) -> set[str]:
    return set(json.loads((env_dir / "spack.lock").read_text())["concrete_specs"])


def same_without_static_analysis(env_dir: Path) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp)
        manifest = environments.absolute_manifest(env_dir)
        manifest["spack"]["concretizer"] = {"static_analysis": False}
        (copy / "spack.yaml").write_text(yaml.safe_dump(manifest))
        lock_cache.concretize(copy, reuse=False)
        return dag_hashes(copy) == dag_hashes(env_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    setup = [str(pins.PROJECT_ROOT / "bin" / "setup")]
    environ = {**os.environ, "CLIMSTACK_NO_APT": "1"}
    seconds = median_of(
        args.repeats, lambda: subprocess.run(setup, check=True, env=environ, capture_output=True)
    )
    print(f"setup (warm cache): {seconds:.1f} s  (goal <= 10 s)")
    # what every Spack command pays first: the bytecode bin/setup writes saves ~0.9 s of it
    spack = DEFAULT.command("--version")
    seconds = median_of(5, lambda: subprocess.run(spack, check=True, capture_output=True))
    print(f"a Spack process starting (spack --version, median of 5): {seconds:.2f} s")
    print(f"{'environment':<20} {'cold':>8} {'warm':>8}   goals: cold <= 45 s, warm <= 5 s")
    for name, env_dir in environments.find_environments().items():
        cold = median_of(args.repeats, lambda: environments.concretize(env_dir, reuse=False))
        warm = median_of(args.repeats, lambda: environments.concretize(env_dir))
        same = ""
        if args.compare:
            same = "  same DAGs without static_analysis: "
            same += "yes" if same_without_static_analysis(env_dir) else "NO"
        print(f"{name:<20} {cold:7.1f}s {warm:7.1f}s{same}", flush=True)
    command = [str(pins.PROJECT_ROOT / "bin" / "climstack"), "concretize", "--no-reuse"]
    seconds = median_of(
        args.repeats, lambda: subprocess.run(command, check=True, capture_output=True)
    )
    print(f"all at once, cold ({os.cpu_count()} solves at a time): {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(process.script(main))
