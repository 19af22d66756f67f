"""`climstack source-mirror`: source mirrors for air-gapped centres
(climstack.stack.sources.source_mirror)."""

from climstack.stack.sources.debian_sources import DebianSources
from climstack.stack.sources.source_mirror import checked, create, fill_from_debian


def register(commands) -> None:
    def run_create(args):
        print(create(*checked(args.environment, args.mirror)), end="")

    def run_fill(args):
        debian = DebianSources(suites=tuple(args.suite))
        report = fill_from_debian(*checked(args.environment, args.mirror), debian)
        for spec, outcome in sorted(report.items()):
            print(f"{spec}: {outcome}")
        print(f"deb-src entries: {debian.sources_file}")

    def run_fill_all(args):
        from climstack.stack import bench_sources  # it builds on this module

        bench_sources.fill(*checked(args.environment, args.mirror))
        print(f"source mirror {args.mirror}: filled for {args.environment}")

    sub = commands.add_parser("source-mirror", help="air-gapped source mirrors for an environment")
    actions = sub.add_subparsers(dest="action", required=True)
    create_cmd = actions.add_parser(
        "create", help="`spack mirror create --all` for an environment"
    )
    fill_cmd = actions.add_parser(
        "fill-debian",
        help="fill a mirror from Debian source packages "
        "whose orig tarball has the recipe's sha256",
    )
    fill_cmd.add_argument(
        "--suite",
        action="append",
        default=[],
        help="extra Debian suite to search (e.g. trixie); repeatable",
    )
    all_cmd = actions.add_parser(
        "fill",
        help="everything the environment cannot download here: Debian's byte-identical "
        "archives and the benchmarks' git versions (CLIMSTACK_<NAME>_GIT)",
    )
    for action, run in ((create_cmd, run_create), (fill_cmd, run_fill), (all_cmd, run_fill_all)):
        action.add_argument("environment", help="environment name or directory (concretized)")
        action.add_argument("mirror", help="mirror directory")
        action.set_defaults(run=run)
