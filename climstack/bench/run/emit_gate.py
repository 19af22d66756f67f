"""The gate before `bench SITE --emit` writes its job scripts (climstack.check.gate): the
program each container mode of each comparison runs, verified in the image under the mode's
plan, confirmed by the image's own ld.so under the plan's runtime unless `model_only`. A
refused mode is not emitted (its script says why), as a mode whose plan cannot be made."""

from pathlib import Path

from climstack.bench.run import catalogue, modes
from climstack.errors import ClimstackError
from climstack.launch import sif_image


def refusals(pairs, plans: dict, image_path: Path, model_only: bool) -> dict:
    """{(comparison name, mode): why it is not emitted} for `pairs` of (comparison name,
    benchmark, mode) whose mode has a plan in `plans`; the image (a directory or a SIF,
    unpacked once) must exist."""
    if not image_path.exists():
        raise ClimstackError(
            f"--image {image_path} does not exist: each container mode's program is verified "
            "in it before its job script is written",
            fix="run this where the image is (the centre's login node) and give its path, or "
            "add --no-verify to write the scripts unverified",
        )
    refused = {}
    with sif_image.files(image_path) as tree:
        for comparison, benchmark, mode in pairs:
            if mode not in plans or catalogue.get(mode).binary == catalogue.HOST:
                continue
            try:
                path = modes.image_program(tree, benchmark, mode)
                modes.gated(plans[mode], tree, image_path, path, mode, model_only)
            except LookupError as why:
                refused[comparison, mode] = str(why)
    return refused
