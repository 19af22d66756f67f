"""`climstack bench workflow`: a `make local` run's output kept as a record (--record LOG),
or the tables of one record or of two, before and after (climstack.stack.workflow_times)."""

import json
from pathlib import Path

from climstack.common import atomic
from climstack.errors import OK, ClimstackError
from climstack.stack import workflow_times


def run_workflow(args) -> int:
    """A make local's output kept as a record (--record LOG), or the tables of records."""
    if args.record and not args.out:
        raise ClimstackError("--record LOG needs --out RECORD", fix="add --out FILE.json")
    if args.report and len(args.report) > 2:
        raise ClimstackError(
            f"--report: {len(args.report)} records", fix="give one record, or two: before, after"
        )
    if args.record:
        record = workflow_times.parse(
            Path(args.record).read_text(errors="replace"), args.label, args.cache
        )
        atomic.write_text(Path(args.out), json.dumps(record, indent=1) + "\n")
        print(f"bench workflow: {args.out}: {len(record['tasks'])} rows, "
              f"{len(record['builds'])} package builds")  # fmt: skip
        return OK
    print(workflow_times.report([workflow_times.load(Path(p)) for p in args.report]))
    return OK


def add_parser(actions) -> None:
    times = actions.add_parser(
        "workflow",
        help="make local's tasks and slowest package builds: a run's output kept as a record, "
        "or the tables of one record or of two (before, after)",
    )
    what = times.add_mutually_exclusive_group(required=True)
    what.add_argument("--record", metavar="LOG", help="make local's output (stdout + stderr)")
    what.add_argument("--report", nargs="+", metavar="RECORD", help="one record, or two")
    times.add_argument("--label", default="run", help="with --record: the run's name")
    times.add_argument("--cache", default="warm", help="with --record: empty or warm")
    times.add_argument("--out", help="with --record: the record's path (JSON)")
    times.set_defaults(run=run_workflow)
