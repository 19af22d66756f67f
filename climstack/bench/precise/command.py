"""`climstack bench local --precise`: the local environment installed, the precise
profile's modes made (pinned), its runs, then the report (the standard one, from the same
raw outputs) and the profile's own page."""

import time
from pathlib import Path

from climstack.bench.precise import profile, run, stopping, summary
from climstack.bench.run import runner
from climstack.bench.run.local import local_modes
from climstack.common import progress
from climstack.stack.install import install


def run_precise(args, out: Path, env_dir: Path, finish) -> int:
    """The profile into `out`; `finish(out, paths)`: the report and its exit status."""
    prefixes = install(env_dir)
    chosen = local_modes(
        list(profile.MODES), args.ranks, args.runtime, args.image, args.fabric_prefix,
        prefixes, runner.work_root(out), pin=True, model_only=args.model_only,
    )  # fmt: skip
    rule = stopping.Rule(cap=args.repeats)
    start = time.monotonic()
    with progress.step(f"the precise profile, up to {rule.cap} repeats, into {out}"):
        benchmarks = profile.chosen(args.benchmarks)
        repeats = run.run(benchmarks, chosen, out, args.ranks, rule)
    status = finish(out, [out / "raw"])
    page = summary.build(out, repeats, rule, time.monotonic() - start)
    for path in summary.write(out, page):
        print(f"  {path}")
    print(summary.markdown(page))
    return status
