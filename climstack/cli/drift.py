"""`climstack drift <site>`: has the host's Cray PE moved away from the site scope? Exit 0
clean, 1 drift, 2 error. `--write FILE` proposes the update as a diff, `--apply` makes it in
place; both keep the YAML's comments and show the DAG difference (climstack.cray.drift)."""

from pathlib import Path

from climstack.common import atomic
from climstack.cray.cray_pe import CrayPe
from climstack.cray.drift import check, project_of, proposal, report, unified_diff
from climstack.inputs import sites
from climstack.stack import lock_diff


def run(args) -> int:
    site, pe = sites.get(args.site), CrayPe(args.root)
    findings = check(site, pe)
    print(report(site, pe, findings))
    drifted = any(f.problems for f in findings)
    if not (args.write or args.apply):
        return 1 if drifted else 0
    if not any(f.proposed for f in findings):
        print("nothing to propose: no drifted external has a version to move to")
        return 1 if drifted else 0
    edits = proposal(site, pe, findings)
    project = project_of(site)
    diff = unified_diff(edits, project)
    print(diff, end="")
    if not args.no_dag:  # before anything is written: a proposal that fails is not written
        names = [
            f"{root}/{site.name}"
            for root in ("environments", "containers")
            if (project / root / site.name / "spack.yaml").is_file()
            or (lock_diff.PROJECT_ROOT / root / site.name / "spack.yaml").is_file()
        ]
        for name, lines in lock_diff.compare(project, edits, names).items():
            print(f"DAG difference of {name}: " + "\n".join(lines))
    if args.write:
        atomic.write_text(Path(args.write), diff)
        print(f"proposed update written to {args.write} (apply: patch -p1 < {args.write})")
    else:
        for path, (_, new) in edits.items():
            atomic.write_text(path, new)
            print(f"updated {path}")
    return 1 if drifted else 0


def register(commands) -> None:
    sub = commands.add_parser(
        "drift",
        help="compare a site scope's Cray PE externals with the host's Cray PE "
        "(exit 0 clean, 1 drift, 2 error)",
    )
    sub.add_argument("site", help="a folder of site/ (archer2, gaea-c6) or a scope directory")
    sub.add_argument("--root", default="/", help="where the host's /opt/cray is (default /)")
    action = sub.add_mutually_exclusive_group()
    action.add_argument("--write", metavar="FILE", help="write the proposed update as a diff")
    action.add_argument("--apply", action="store_true", help="update the scope in place")
    sub.add_argument(
        "--no-dag",
        action="store_true",
        help="with --write/--apply: do not re-concretize to show the DAG change",
    )
    sub.set_defaults(run=run)
