"""The one gate before a command runs or publishes programs of an image under a bind plan
(`verify --run`, `slurm`, `modules --image`, `bench local`, `bench SITE --emit`, the
container smokes): each program's verify verdict must be ok, confirmed by the image's own
ld.so under the plan's runtime, unless `model_only` accepts climstack's model alone, which
is then said. A SIF is read unpacked, a podman image mounted."""

import sys
from contextlib import nullcontext
from pathlib import Path

from climstack.check import verdict, verify
from climstack.errors import ClimstackError
from climstack.launch import image_files


class Refused(ClimstackError):
    """A program the gate refused: `why`, the verdict's reason (Report.refusal)."""

    def __init__(self, message: str, why: str, fix: str):
        super().__init__(message, fix=fix)
        self.why = why


def require(
    plan, image: Path, programs: list[str], model_only: bool, what: str, fix: str, tree=None
):
    """Verify each of `programs` (paths in the image) under `plan`; the first refused stops
    `what` with the verdict and `fix`. Their reports. `tree`: the image's files, if the
    caller has them open (a SIF unpacked), else they are opened here."""
    reports = []
    with nullcontext(tree) if tree else image_files.files(image) as tree:
        for program in programs:
            report = verify.check(program, plan, tree, runtime_image=image)
            if why := report.refusal(model_only):
                raise Refused(
                    f"{what}: {program} in {image} is not proven to run on the host MPI: "
                    f"{why}\n" + verdict.render(report),
                    why,
                    fix,
                )
            if not report.confirmed:
                print(
                    f"{what}: --model-only: {program} accepted on the model's ok alone "
                    f"({report.unconfirmed_why})",
                    file=sys.stderr,
                )
            reports.append(report)
    return reports


def add_option(parser, when: str = "") -> None:
    """--model-only, the gate's one override, worded alike in every command; `when`: the
    option it goes with ("with --run: ")."""
    parser.add_argument(
        "--model-only",
        action="store_true",
        help=f"{when}accept a verdict of climstack's loader model that the image's own ld.so "
        "did not confirm (not asked, or could not answer: its runtime not on PATH here); said "
        "in the output. A refused program never runs or is published",
    )
