"""The ways `bench scale` starts N ranks of one program on one node, each the way a user
would: natively; the ARCHER2-style image through the local bind plan under Apptainer (one
container and SIF mount per rank, or `--sharens`: the ranks of one parent share one), under
Charliecloud (a container per rank, or the node's ranks joined: `--join`) and under podman
(one container per node, its ranks `podman exec`ed into it: bench local's bind-cdi).

Apptainer runs as an ordinary user's does: the launcher under one user namespace (as root:
climstack.common.userns; an ordinary user is in one already) and the release's own binary per
rank, not bin/apptainer: as root its wrapper gives each rank a namespace of its own (and its
Python start-up), and `--sharens` followers could not join their first rank's instance.
"""

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from climstack.bench.run import modes
from climstack.bind import stages
from climstack.launch import launchers, provided_apptainer, runtimes
from climstack.launch.runtimes import apptainer

#: name -> (runtime, bench local's catalogue mode, the node's ranks in one container (ch-run
#: --join), the runtime's options before the image (Apptainer's --sharens: the ranks of one
#: parent share one container and SIF mount)), in the order a repeat starts from
MODES = {
    "native": (None, "native", False, ()),
    "apptainer": ("apptainer", "bind", False, ()),
    "apptainer-sharens": ("apptainer", "bind", False, ("--sharens",)),
    "charliecloud": ("charliecloud", "bind", False, ()),
    "charliecloud-joined": ("charliecloud", "bind", True, ()),
    "podman": ("podman", "bind-cdi", True, ()),
}
#: where a container rank's paths on the host's bind plan start (stages: the plan's links
#: and the host side of its binds)
BIND_ROOTS = (str(Path(stages.LINKS_DIR).parent), stages.HOST_SIDE)


@dataclass(frozen=True)
class Launch:
    """N ranks of a mode: the host command line, and what its file-system calls are sorted
    by (climstack.bench.scale.observe)."""

    mode: str
    ranks: int
    argv: list[str]
    env: dict
    program: str  # the program as each rank execs it (its path in the image, or the host's)
    container: bool
    image_file: str  # the SIF or image directory on the host ("" natively)
    install_root: str  # the native build's install tree ("" in a container)


def as_user(argv: list[str], options=()) -> list[str]:
    """A launch `argv` that runs this machine's Apptainer, as an ordinary user's: one
    namespace around the launcher (as root), the release's binary per rank, `options` after
    its `exec`; any other as it is."""
    provided = apptainer.on_this_machine()
    if provided not in argv:
        return argv
    real = str(provided_apptainer.built() or provided)
    at = argv.index(provided)
    argv = [*argv[:at], real, argv[at + 1], *options, *argv[at + 2 :]]
    if os.geteuid() == 0:
        return [sys.executable, "-m", "climstack.common.userns", *argv]
    return argv


class Modes:
    """The modes `names` on this host: the native build `prefixes`, the image `image_dir`
    (its SIF `sif` for Apptainer), the directory `work` bound in (where a model runs). Each
    mode's program is located (and, in a container, passed by the gate: `verify` confirmed
    by the image's ld.so) once, for every rank count: the same file of the same image under
    the same plan."""

    def __init__(self, names, prefixes: dict, image_dir: Path, sif: Path, work: Path):
        self.names, self.prefixes = list(names), prefixes
        self.image_dir, self.sif, self.work = image_dir, sif, work
        self.programs: dict[tuple[str, str], str] = {}
        #: where the native build's prefixes sit: the shared file system a centre installs into
        self.install_root = os.path.commonpath([str(p) for p in prefixes.values()])

    def image(self, runtime: str) -> Path:
        """What `runtime` runs: the SIF, or the image directory."""
        return self.sif if runtimes.get(runtime).image_format == "sif" else self.image_dir

    def mode(self, name: str, ranks: int) -> modes.Mode:
        runtime, row, join, _ = MODES[name]
        launcher = launchers.get("mpiexec").argv(ranks)
        if runtime is None:
            return modes.native(launcher, self.prefixes, name)
        target = self.image(runtime) if self.image(runtime) != self.image_dir else None
        env = {**os.environ, **runtimes.get(runtime).env(home=False)}
        return modes.container(
            row, self.image_dir, launcher, ranks, runtime, target, env=env, work=self.work,
            join=join,
        )  # fmt: skip

    def launch(self, name: str, ranks: int, benchmark, cwd: Path | None = None) -> Launch:
        """`benchmark` (bench local's runner.Benchmark) in `name` on `ranks` ranks, started in
        `cwd`; LookupError (why) if the mode cannot run its program."""
        runtime, _, _, options = MODES[name]
        mode = self.mode(name, ranks)
        if mode.unavailable:
            raise LookupError(mode.unavailable)
        if (name, benchmark.name) not in self.programs:
            self.programs[(name, benchmark.name)] = mode.locate(benchmark)
        program = self.programs[(name, benchmark.name)]
        argv = as_user(mode.wrap([program], cwd=str(cwd) if cwd else None), options)
        image_file = str(self.image(runtime)) if runtime else ""
        return Launch(
            name, ranks, argv, mode.env or dict(os.environ), program, runtime is not None,
            image_file, "" if runtime else self.install_root,
        )  # fmt: skip
