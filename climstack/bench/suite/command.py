"""`climstack bench suite`: MPICH's test suite on the host MPIs of this machine, each
natively and in the image of its ABI through its bind plan (suite_lanes: the MPICH ABI in the
ARCHER2-style image, the MPI-5 standard ABI in containers/mpi-abi), judged against
expected.yaml; the report suite.md (a table per host and route, the container-only failures
first) and suite.json. Exit status 1 when a lane is unexpected either way."""

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from climstack import pins
from climstack.bench.abi.abi_report import IMAGES
from climstack.bench.suite import judged, suite_builds, suite_lanes, suite_run
from climstack.check import gate
from climstack.common import atomic, progress
from climstack.errors import ClimstackError
from climstack.image import image

#: the image of each ABI (the MPICH ABI's is the ARCHER2-style image)
IMAGE = IMAGES["mpich"]


def _names(given: str | None, known, option: str) -> list[str]:
    names = given.split(",") if given else list(known)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ClimstackError(f"{option}: unknown {', '.join(unknown)}", fix=",".join(known))
    return names


def run_suite(args, fresh_out) -> int:
    hosts = _names(args.hosts, suite_lanes.HOSTS, "--hosts")
    routes = _names(args.routes, suite_lanes.ROUTES, "--routes")
    args.out = args.out or pins.cache_dir() / "bench" / time.strftime("suite-%Y%m%d-%H%M%S")
    out = fresh_out(args)
    if out.exists() and args.force:
        shutil.rmtree(out)
    given = {"mpich": args.image, "standard": args.abi_image}
    images: dict[str, Path] = {}

    def image_of(route: str) -> Path:
        kind = suite_lanes.ABI[route]
        if kind not in images:
            name = IMAGES[kind]
            images[kind] = Path(given[kind] or image.build(name, image.default_destination(name)))
        return images[kind]

    lanes = []
    for host in hosts:
        for route in (r for r in routes if host in suite_lanes.hosts_of(r)):
            where = image_of(route) if route in suite_lanes.NATIVE_OF else None
            with progress.step(f"MPICH's test suite ({args.tests}) on {host}, {route}"):
                made = suite_lanes.lane(host, route, args.tests, out / host, where,
                                        args.model_only)  # fmt: skip
                outcomes = suite_run.run(
                    made.suite, made.mpiexec, out / host / route, made.wrapper, made.env
                )
            plan_of = suite_run.planned(made.suite)
            lanes.append(
                judged.Lane(host, route, outcomes, judged.expected(host, route),
                            len(plan_of.not_built), len(plan_of.too_many_ranks), made.title)
            )  # fmt: skip
    if not lanes:
        raise ClimstackError(
            f"no lane: no host of {','.join(hosts)} has a route of {','.join(routes)}",
            fix="see `climstack bench suite --help`",
        )
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
            f"| {lane.title} | {lane.route} | {len(lane.outcomes)} | {lane.passed} "
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
        help="MPICH's own test suite (test/mpi) natively on each host MPI and in the image "
        "of its ABI through the bind plan, judged against expected failures",
    )
    suite.add_argument("--tests", choices=suite_builds.SLICES, default="smoke",
                       help="the 33-test smoke slice, or every C test built")  # fmt: skip
    suite.add_argument("--hosts", help=f"comma-separated, from {','.join(suite_lanes.HOSTS)}")
    suite.add_argument(
        "--routes",
        help=f"comma-separated, from {','.join(suite_lanes.ROUTES)} (default: all); a host "
        "runs those of its ABIs",
    )
    suite.add_argument("--image", type=Path, help=f"the image directory of {IMAGE}")
    suite.add_argument("--abi-image", type=Path, help=f"that of {IMAGES['standard']}")
    suite.add_argument("--out", type=Path, help="the report's directory")
    suite.add_argument("--force", action="store_true", help="replace --out if it exists")
    gate.add_option(suite)
    suite.set_defaults(run=lambda args: run_suite(args, fresh_out), resume=False)
