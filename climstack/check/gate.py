"""The one gate before a command runs or publishes programs of an image under a bind plan
(`slurm`, `modules --image`): each program's verify verdict must be ok, confirmed by the
image's own ld.so under the plan's runtime, unless `model_only` accepts climstack's model
alone, which is then said. A SIF is read unpacked."""

import sys
from contextlib import nullcontext
from pathlib import Path

from climstack.check import verdict, verify
from climstack.errors import ClimstackError
from climstack.launch import sif_image


def require(
    plan, image: Path, programs: list[str], model_only: bool, what: str, fix: str, tree=None
):
    """Verify each of `programs` (paths in the image) under `plan`; the first refused stops
    `what` with the verdict and `fix`. Their reports. `tree`: the image's files, if the
    caller has them open (a SIF unpacked), else they are opened here."""
    reports = []
    with nullcontext(tree) if tree else sif_image.files(image) as tree:
        for program in programs:
            report = verify.check(program, plan, tree, runtime_image=image)
            if why := report.refusal(model_only):
                raise ClimstackError(
                    f"{what}: {program} in {image} is not proven to run on the host MPI: "
                    f"{why}\n" + verdict.render(report),
                    fix=fix,
                )
            if not report.confirmed:
                print(
                    f"{what}: --model-only: {program} accepted on the model's ok alone "
                    f"({report.unconfirmed_why})",
                    file=sys.stderr,
                )
            reports.append(report)
    return reports
