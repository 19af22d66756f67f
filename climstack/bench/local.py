"""What `climstack bench local` runs on: the local environment installed from offline
sources, the image its container modes use, and the modes themselves."""

import os
from pathlib import Path

from climstack import spack
from climstack.bench import modes
from climstack.check import container_smoke
from climstack.common import progress
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.launch import launchers, runtimes
from climstack.stack import bench_sources, environments

#: the container environment whose image the container modes run (`climstack image`)
IMAGE = "container-archer2"


def install(env_dir: Path) -> dict[str, Path]:
    """Fill the source mirror, install the whole environment; name -> prefix."""
    bench_sources.fill(env_dir, bench_sources.local_mirror())
    with progress.step(f"installing the whole {environments.label(env_dir)} environment"):
        spack.stream("install", "-j", "2", env=env_dir)
    return installed(env_dir)


def installed(env_dir: Path) -> dict[str, Path]:
    """What the environment has installed: name -> prefix."""
    found = spack.run("find", "--format", "{name} {prefix}", env=env_dir).stdout.split("\n")
    return {name: Path(prefix) for name, prefix in (line.split() for line in found if line)}


def mode_names(args, known=tuple(modes.MODES), what: str = "") -> list[str]:
    """--modes, checked against `known` (default: all of them); `what` ends the message."""
    names = args.modes.split(",") if args.modes else list(known)
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ClimstackError(
            f"--modes: unknown mode(s) {', '.join(unknown)}{what}", fix=f"from {','.join(known)}"
        )
    return names


def local_modes(args, prefixes: dict[str, Path], work: Path | None = None) -> list[modes.Mode]:
    """The modes asked for (--modes), the container ones on `climstack image`'s image, with
    the runs' directory `work` bound in (the files the I/O benchmarks write)."""
    names = mode_names(args)
    launcher = launchers.get("mpiexec").argv(args.ranks)
    chosen = [modes.native(launcher, prefixes)] if "native" in names else []
    if set(names) & set(modes.CONTAINER_MODES):
        image_dir = image.build(IMAGE, args.image or image.default_destination(IMAGE))
        target = str(container_smoke.target(IMAGE, args.runtime, image_dir))
        no_home = runtimes.get(args.runtime).env(home=False)
        env = {**os.environ, **no_home}  # the process runner sets USER
        # the host's NetCDF is the local environment's build, C and Fortran (HDF5: the
        # site's external)
        netcdf = [str(prefixes[p]) for p in ("netcdf-c", "netcdf-fortran") if p in prefixes]
        host_netcdf = {**modes.HOST_NETCDF, "netcdf": ":".join(netcdf) or None}
        for name in (n for n in modes.CONTAINER_MODES if n in names):
            chosen.append(
                modes.container(
                    name, image_dir, launcher, args.ranks, args.runtime, target,
                    args.fabric_prefix, env, host_netcdf, work,
                )  # fmt: skip
            )
    return chosen
