"""One way to run a program in a container under a bind plan: the host launcher starts the
ranks, each rank runs the runtime's command in the image. `command` is the host command
line, `launch` runs it, `job_step` writes it into a job script (the plan in the runtime's
lines before the step, or in its command)."""

import os
from pathlib import Path, PurePosixPath

from climstack.bind import loader, remedy
from climstack.common import process
from climstack.errors import ClimstackError
from climstack.launch import sif_image
from climstack.launch.launchers.base import Launcher
from climstack.launch.runtimes.base import Runtime


def command(
    plan, runtime: Runtime, launcher: Launcher, image, argv: list[str], ranks=1, join=0, cwd=None
) -> list[str]:
    """The host command line: `argv` in `image` on `ranks` ranks; `join`: ranks of a node
    that may share one container (where the runtime can); `cwd`: where it starts in it."""
    return runtime.launch_args(
        plan, str(image), launcher.argv(ranks), remedied(plan, image, argv), join, cwd
    )


def launch(
    plan,
    runtime: Runtime,
    launcher: Launcher,
    image,
    argv: list[str],
    *,
    ranks: int = 1,
    join: int = 0,
    home: bool = True,
    env: dict | None = None,
    timeout: float = 3600,
    check: bool = True,
    what: str = "",
    fix: str = "",
) -> process.CompletedProcess:
    """Run `argv` in `image` under the plan (the image checked first); `home` False: the
    runtime does not mount the user's home; `env`: on top of this process's."""
    runtime.check_image(plan, Path(image))
    return process.run(
        command(plan, runtime, launcher, image, argv, ranks, join),
        what or f"{argv[0]} in {image} under {runtime.name}",
        env={**os.environ, **runtime.env(home), **launcher.env(), **(env or {})},
        timeout=timeout,
        check=check,
        fix=fix,
    )


def job_step(
    plan, runtime: Runtime, launcher: Launcher, image: str, components, here=False, share=True
):
    """(lines before the step, the step) of a job script that runs every (ranks, nodes,
    argv) of `components` in `image`: one launch, heterogeneous when there are several;
    `here`: each rank starts in the step's working directory; `share` False: one container
    per rank even where the runtime could share one (a program that never calls MPI_Init)."""
    het = len(components) > 1
    before, parts = [], []
    # each only when asked: a plug-in written before it still emits the other jobs
    options = {"here": True} if here else {}
    options |= runtime.share_option(share)
    for index, (ranks, nodes, argv) in enumerate(components):
        argv = remedied(plan, image, argv)
        lines, rank = runtime.job_lines(plan, image, argv, **options)
        before += lines if index == 0 else []
        parts.append((launcher.argv(ranks, nodes, het_group=index if het else None), rank))
    return before, launcher.step(parts)


def remedied(plan, image, argv: list[str]) -> list[str]:
    """`argv` as the plan's RPATH remedy runs it (bind.remedy): through the image's ld.so,
    or the patched copy; the executable is read from the image."""
    if not getattr(plan, "rpath_remedy", ""):
        return argv
    if not PurePosixPath(argv[0]).is_absolute():
        raise ClimstackError(
            f"--rpath-remedy {plan.rpath_remedy} runs {argv[0]} through the image's ld.so, "
            "which needs its path",
            fix=f"give the path of {argv[0]} inside the image",
        )
    with sif_image.files(Path(image)) as tree:
        closure = loader.closure(argv[0], loader.View(tree))
        interpreter = closure.root.info.interpreter or remedy.DEFAULT_INTERPRETER
        if plan.rpath_remedy == "runpath":
            argv = [remedy.patched_copy(plan, tree, argv[0]), *argv[1:]]
    return remedy.wrap(plan, argv, set(closure.libraries), interpreter)
