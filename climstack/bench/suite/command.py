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
    shard = _shard(args.shard)
    hosts = _names(args.hosts, suite_lanes.HOSTS, "--hosts")
    routes = _names(args.routes, suite_lanes.ROUTES, "--routes")
    pairs = [(h, r) for h in hosts for r in routes if h in suite_lanes.hosts_of(r, args.tests)]
    if not pairs:
        fortran = {r: ",".join(suite_lanes.hosts_of(r, "fortran")) for r in routes}
        raise ClimstackError(
            f"no lane: no host of {','.join(hosts)} has a route of {','.join(routes)}"
            + (" with the Fortran tests" if args.tests == "fortran" else ""),
            fix="see `climstack bench suite --help`" if args.tests != "fortran" else
            "the MPICH ABI's Fortran tests run where the MPI has its own Fortran side (the "
            "standard ABI's through mpif, on every host): "
            + "; ".join(f"{r}: {h or 'none'}" for r, h in fortran.items()),
        )  # fmt: skip
    args.out = args.out or pins.cache_dir() / "bench" / time.strftime("suite-%Y%m%d-%H%M%S")
    out = fresh_out(args)
    if out.exists() and args.force:
        shutil.rmtree(out)
    given = {"mpich": args.image, "standard": args.abi_image}
    what = args.tests + (f", shard {args.shard}" if shard != (1, 1) else "")
    images: dict[str, Path] = {}

    def image_of(route: str) -> Path:
        kind = suite_lanes.ABI[route]
        if kind not in images:
            name = IMAGES[kind]
            images[kind] = Path(given[kind] or image.build(name, image.default_destination(name)))
        return images[kind]

    lanes = []
    for host, route in pairs:
        where = image_of(route) if route in suite_lanes.NATIVE_OF else None
        with progress.step(f"MPICH's test suite ({what}) on {host}, {route}"):
            made = suite_lanes.lane(host, route, args.tests, out / host, where,
                                    args.model_only)  # fmt: skip
            outcomes = suite_run.run(
                made.suite, made.mpiexec, out / host / route, made.wrapper, made.env, shard
            )
        plan_of = suite_run.planned(made.suite).shard(*shard)
        lanes.append(
            judged.Lane(host, route, outcomes, judged.expected(host, route),
                        len(plan_of.not_built), len(plan_of.too_many_ranks), made.title)
        )  # fmt: skip
    report = markdown(lanes, what)
    atomic.write_text(out / "suite.md", report)
    saved = record(lanes, args.tests, shard)
    atomic.write_text(out / "suite.json", json.dumps(saved, indent=1))
    print(report, end="")
    print(f"report: {out / 'suite.md'}")
    return 0 if all(lane.ok for lane in lanes) else 1


def _shard(given: str) -> tuple[int, int]:
    """--shard K/N: the K-th of N shards (1 <= K <= N)."""
    index, _, count = given.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise ClimstackError(
            f"--shard {given}: not K/N with 1 <= K <= N",
            fix="for example --shard 2/8 (the second of eight shards), or 1/1 (every test)",
        )
    return int(index), int(count)


def record(lanes: list[judged.Lane], tests: str, shard=(1, 1)) -> dict:
    return {
        "tests": tests,
        "shard": list(shard),
        "lanes": [
            {"host": lane.host, "route": lane.route, "title": lane.title, "ok": lane.ok,
             "not_built": lane.not_built, "too_many_ranks": lane.too_many_ranks,
             "outcomes": [asdict(o) for o in lane.outcomes]}
            for lane in lanes
        ],
    }  # fmt: skip


def merged(paths: list[Path]) -> tuple[list[judged.Lane], str]:
    """The lanes of several runs' suite.json (the shards of one slice) as one run's, judged
    against today's expected failures; what they cover ("all, shards 1-3 of 8")."""
    records = []
    for path in paths:
        try:
            records.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as err:
            raise ClimstackError(f"--report {path}: {err}", fix="give suite.json files "
                                 "`climstack bench suite` wrote") from err  # fmt: skip
    slices = {(r.get("tests"), (r.get("shard") or [1, 1])[1]) for r in records}
    indexes = sorted((r.get("shard") or [1, 1])[0] for r in records)
    if len(slices) != 1 or len(set(indexes)) != len(indexes):
        raise ClimstackError(
            f"--report: {len(records)} records of different slices or repeated shards "
            f"({sorted(map(str, slices))}, shards {indexes})",
            fix="give the shards of one `--tests` slice and `--shard K/N` count, each once",
        )
    ((tests, count),) = slices
    found: dict[tuple[str, str], dict] = {}
    for lane in (lane for r in records for lane in r["lanes"]):
        into = found.setdefault(
            (lane["host"], lane["route"]),
            {"title": lane.get("title", ""), "outcomes": [], "not_built": 0, "too_many": 0},
        )
        into["outcomes"] += [suite_run.Outcome(**o) for o in lane["outcomes"]]
        into["not_built"] += lane.get("not_built", 0)
        into["too_many"] += lane.get("too_many_ranks", 0)
    lanes = [judged.Lane(host, route, got["outcomes"], judged.expected(host, route),
                         got["not_built"], got["too_many"], got["title"])
             for (host, route), got in found.items()]  # fmt: skip
    shards = f", shards {','.join(map(str, indexes))} of {count}" if count > 1 else ""
    return lanes, f"{tests}{shards}"


def report_of(paths: list[Path]) -> int:
    """`bench suite --report SUITE_JSON...`: the runs' lanes as one report, on stdout."""
    lanes, what = merged(paths)
    print(markdown(lanes, what), end="")
    return 0 if all(lane.ok for lane in lanes) else 1


def markdown(lanes: list[judged.Lane], tests: str) -> str:
    lines = [f"# MPICH's test suite ({tests}): {suite_builds.PACKAGE}", ""]
    only = judged.causes(lanes)
    lines += ["## Container-only failures (pass natively, fail in the image)", ""]
    lines += [
        f"- {host}, {route}: `{test}`" + (f" (named: {why})" if why else " (no named cause)")
        for (host, route, test), why in only.items()
    ] or ["none", ""]
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
        stopped = {o.test for o in lane.outcomes if o.timed_out}
        lines += [f"- failed: `{test}`" + (" (timed out)" if test in stopped else "")
                  for test in lane.failed]  # fmt: skip
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
                       help="the smoke slice (33 C tests; 10 Fortran ones more where the "
                       "MPI has Fortran), every test built, or every Fortran test")  # fmt: skip
    suite.add_argument("--shard", default="1/1",
                       help="K/N: the K-th of N shards of the tests (every N-th from the K-th), "
                       "so the full suite runs in parts that each fit an hour")  # fmt: skip
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
    suite.add_argument(
        "--report",
        type=Path,
        nargs="+",
        metavar="SUITE_JSON",
        help="print one report of earlier runs' suite.json (the shards of a slice), judged "
        "against today's expected failures; nothing is run",
    )
    suite.set_defaults(
        run=lambda args: report_of(args.report) if args.report else run_suite(args, fresh_out),
        resume=None,
    )
