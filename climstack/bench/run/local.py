"""What `climstack bench local` runs on: the image its container modes use, and the modes
themselves (the local environment it runs natively is climstack.stack.install's)."""

import os
from pathlib import Path

from climstack.bench.run import catalogue, modes
from climstack.check import container_smoke
from climstack.image import image
from climstack.launch import launchers, runtimes

#: the container environment whose image the container modes run (`climstack image`)
IMAGE = "container-archer2"
#: the host's CCE stand-in build (Debian's clang: NetCDF-C, NetCDF-Bench), which the modes
#: of PrgEnv-cray's flavour run or bind
CCE_ENV = "local-cce"


def needs_cce(names: list[str]) -> bool:
    """Whether the modes `names` run or bind the CCE stand-in's build."""
    return any(
        catalogue.get(n).binary == catalogue.HOST_CCE or catalogue.get(n).flavour == "cray"
        for n in names
    )


def mode_names(asked: str | None, known=None, what: str = "--modes") -> list[str]:
    """`asked` (--modes: comma-separated, None for all), checked against `known` (default:
    the catalogue's local modes)."""
    return catalogue.chosen(asked, list(known or catalogue.names(local=True)), what)


def local_modes(
    names: list[str],
    ranks: int,
    runtime: str,
    image_dir: Path | None,
    fabric_prefix: str | None,
    prefixes: dict[str, Path],
    work: Path | None = None,
    cce: dict[str, Path] | None = None,
    pin: bool = False,
    model_only: bool = False,
) -> list[modes.Mode]:
    """The modes `names` (mode_names: --modes checked) on `ranks` ranks, the container ones
    on `climstack image`'s image (`image_dir`, default: its default destination) under
    `runtime`, with the runs' directory `work` bound in (the files the I/O benchmarks
    write); `cce`: the CCE stand-in's prefixes (native-cce runs them,
    bind-host-netcdf-cray binds them); `pin`: each rank bound to a core of its own
    (Hydra's `-bind-to core`), natively and in every container alike; `model_only`: a
    program the image's ld.so did not confirm runs on the model's ok (climstack.check.gate)."""
    cce = cce or {}
    launcher = launchers.get("mpiexec").argv(ranks, extra=("-bind-to", "core") if pin else ())
    container = [n for n in names if catalogue.get(n).container]
    chosen = []
    if container:
        image_dir = image.build(IMAGE, image_dir or image.default_destination(IMAGE))
        target = str(container_smoke.target(IMAGE, runtime, image_dir))
        no_home = runtimes.get(runtime).env(home=False)
        env = {**os.environ, **no_home}  # the process runner sets USER
        # the host's NetCDF is the local environment's build, C and Fortran, or the CCE
        # stand-in's, C only (HDF5: the site's external, for both)
        netcdf = [str(prefixes[p]) for p in ("netcdf-c", "netcdf-fortran") if p in prefixes]
        by_flavour = {
            None: {"netcdf": ":".join(netcdf) or None},
            "cray": {"netcdf": str(cce["netcdf-c"]) if "netcdf-c" in cce else None},
        }
        for name in container:
            row = catalogue.get(name)
            own = row.runtime and row.runtime != runtime  # bind-cdi: podman, on the directory
            chosen.append(
                modes.container(
                    name, image_dir, launcher, ranks, row.runtime or runtime,
                    None if own else target, fabric_prefix, env, by_flavour[row.flavour], work,
                    model_only,
                )  # fmt: skip
            )
    by_name = {m.name: m for m in chosen}
    for name in ("native", "native-again"):  # the A/A control: native under another name
        if name in names:
            by_name[name] = modes.native(launcher, prefixes, name)
    if "native-cce" in names:
        by_name["native-cce"] = modes.native(launcher, cce, "native-cce")
    return [by_name[n] for n in names]
