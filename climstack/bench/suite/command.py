"""`climstack bench suite`: MPICH's test suite, built by Spack against each host MPI
(suite_builds), run natively on each and in the ARCHER2-style image (MPICH ABI) through
the bind plan `climstack bind local [--prefix HOST_MPI]` writes for that host MPI, once
verify confirmed the plan with the image's own ld.so (the gate, on the image's mpi-probe:
the suite's programs are bound in, not the image's). Judged against expected.yaml; the report
suite.md (a table per host and route, the container-only failures first) and suite.json.
Exit status 1 when a lane is unexpected either way."""

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from climstack import pins
from climstack.bench.host_builds import HOSTS, DEBIAN_PREFIX
from climstack.bench.suite import judged, suite_builds, suite_run
from climstack.bind import loader, plan
from climstack.check import gate
from climstack.common import atomic, progress
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.inputs import sites
from climstack.launch import runtimes

IMAGE = "container-archer2"
PROBE = f"{image.VIEW}/bin/mpi-probe"
ROUTES = ("native", "bind")


def mpiexec(host: str) -> str:
    """The host MPI's own launcher (Hydra's mpiexec: it enforces MPITEST_TIMEOUT)."""
    if HOSTS[host].wheel:
        return str(HOSTS[host].prefix() / "bin" / "mpiexec")
    return str(DEBIAN_PREFIX / "bin" / "mpiexec.mpich")


def bind_wrapper(host: str, image_dir: Path, model_only: bool) -> str:
    """Each rank's command in the image under the local site's bind plan for `host`'s MPI
    (a wheel's by its --prefix; Debian's is the site's own), as a job step starts it (the
    test's directory bound in, the rank started there), once the gate passed the plan."""
    prefix = str(HOSTS[host].prefix()) if HOSTS[host].wheel else None
    made = plan.make(
        sites.get("local"), "bind", view=loader.View(), runtime="charliecloud", prefix=prefix
    )
    runtime = runtimes.get("charliecloud")
    runtime.prepare_image(made, image_dir)
    gate.require(made, image_dir, [PROBE], model_only, "bench suite", fix="climstack verify")
    return runtime.job_lines(made, str(image_dir), [], here=True)[1]


def run_suite(args, fresh_out) -> int:
    hosts = args.hosts.split(",") if args.hosts else list(suite_builds.HOSTS)
    unknown = [h for h in hosts if h not in suite_builds.HOSTS]
    if unknown:
        raise ClimstackError(
            f"--hosts: unknown {', '.join(unknown)}", fix=",".join(suite_builds.HOSTS)
        )
    args.out = args.out or pins.cache_dir() / "bench" / time.strftime("suite-%Y%m%d-%H%M%S")
    out = fresh_out(args)
    if out.exists() and args.force:
        shutil.rmtree(out)
    wanted = args.routes.split(",")
    if set(wanted) - set(ROUTES):
        raise ClimstackError(f"--routes {args.routes}: unknown", fix=",".join(ROUTES))
    prefixes = suite_builds.prefixes(args.tests, hosts)
    lanes, image_dir = [], None
    for host in hosts:
        routes = {"native": ""}
        if "bind" in wanted:
            image_dir = image_dir or Path(
                args.image or image.build(IMAGE, image.default_destination(IMAGE))
            )
            routes["bind"] = bind_wrapper(host, image_dir, args.model_only)
        for route, wrapper in ((r, w) for r, w in routes.items() if r in wanted):
            with progress.step(f"MPICH's test suite ({args.tests}) on {host}, {route}"):
                outcomes = suite_run.run(
                    prefixes[host], mpiexec(host), out / host / route, wrapper
                )
            plan_of = suite_run.planned(prefixes[host])
            lanes.append(
                judged.Lane(host, route, outcomes, judged.expected(host, route),
                            len(plan_of.not_built), len(plan_of.too_many_ranks))
            )  # fmt: skip
    report = markdown(lanes, args.tests)
    atomic.write_text(out / "suite.md", report)
    atomic.write_text(out / "suite.json", json.dumps(record(lanes, args.tests), indent=1))
    print(report, end="")
    print(f"report: {out / 'suite.md'}")
    return 0 if all(lane.ok for lane in lanes) else 1


def record(lanes: list[judged.Lane], tests: str) -> dict:
    return {
        "tests": tests,
        "lanes": [
            {"host": lane.host, "route": lane.route, "ok": lane.ok,
             "outcomes": [asdict(o) for o in lane.outcomes]}
            for lane in lanes
        ],
    }  # fmt: skip


def markdown(lanes: list[judged.Lane], tests: str) -> str:
    lines = [f"# MPICH's test suite ({tests}): {suite_builds.PACKAGE}", ""]
    only = judged.container_only(lanes)
    lines += ["## Container-only failures (pass natively, fail in the image)", ""]
    lines += [f"- {host}, {route}: `{test}`" for host, route, test in only] or ["none", ""]
    if only:
        lines.append("")
    lines += [
        "## Per host MPI and route",
        "",
        "| host MPI | route | tests | passed | failed | expected failures | listed yet passed "
        f"| not built | over {suite_run.MAX_RANKS} ranks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for lane in lanes:
        lines.append(
            f"| {HOSTS[lane.host].title} | {lane.route} | {len(lane.outcomes)} | {lane.passed} "
            f"| {len(lane.failed)} | {len(lane.expected_failures)} "
            f"| {len(lane.unexpected_passes)} | {lane.not_built} | {lane.too_many_ranks} |"
        )
    for lane in (lane for lane in lanes if not lane.ok):
        lines += ["", f"### {lane.host}, {lane.route}: unexpected", ""]
        lines += [f"- failed: `{test}`" for test in lane.failed]
        lines += [f"- listed, yet passed: `{test}`" for test in lane.unexpected_passes]
    timed = sorted(
        ((o, lane) for lane in lanes for o in lane.outcomes), key=lambda p: -p[0].seconds
    )
    lines += ["", "Slowest: " + ", ".join(
        f"`{o.test}` ({lane.host}, {lane.route}) {o.seconds:.1f} s" for o, lane in timed[:5]
    )]  # fmt: skip
    return "\n".join(lines) + "\n"


def add_parser(subparsers, fresh_out) -> None:
    suite = subparsers.add_parser(
        "suite",
        help="MPICH's own test suite (test/mpi) natively on each host MPI and in the "
        "ARCHER2-style image through the bind plan, judged against expected failures",
    )
    suite.add_argument("--tests", choices=suite_builds.SLICES, default="smoke",
                       help="the 33-test smoke slice, or every C test built")  # fmt: skip
    suite.add_argument("--hosts", help=f"comma-separated, from {','.join(suite_builds.HOSTS)}")
    suite.add_argument("--routes", default="native,bind", help="native,bind (default both)")
    suite.add_argument("--image", type=Path, help=f"the image directory of {IMAGE}")
    suite.add_argument("--out", type=Path, help="the report's directory")
    suite.add_argument("--force", action="store_true", help="replace --out if it exists")
    gate.add_option(suite)
    suite.set_defaults(run=lambda args: run_suite(args, fresh_out), resume=False)
