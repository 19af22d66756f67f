"""`climstack bind`: discover the host MPI and its library closure (bind.discover,
bind.loader), make the bind plan (bind.plan), write it, and render it for a runtime
(launch.runtimes) or run a command under it."""

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path

from climstack.bind import cdi, discover, families, loader, plan, podman_hpc, remedy, stages
from climstack.common import process
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.launch import launch, runtimes


#: the formats that print (and write) the plan and run nothing
PRINTED = ("env", "json", "cdi", "podman-hpc")


def written(made, form: str) -> None:
    """--format cdi / podman-hpc: the plan's CDI spec (its spec directory) or podman-hpc
    module (its modules.d), written into the plan directory and printed; how to use it."""
    if form == "cdi":
        directory = cdi.spec_dir(made)
        print((directory / cdi.FILE).read_text(), end="")
        print(
            f"# CDI spec: {directory / cdi.FILE}\n# podman --cdi-spec-dir {directory} run "
            f"--device {cdi.device(made)} ...; apptainer exec --cdi-dirs {directory} "
            f"--device {cdi.device(made)} ...",
            file=sys.stderr,
        )
    else:
        file = podman_hpc.write(made, Path(made.directory) / "podman-hpc")
        print(file.read_text(), end="")
        module = podman_hpc.name_of(made)
        print(
            f"# podman-hpc module: {file}\n# PODMANHPC_MODULES_DIR={file.parent} "
            f"podman-hpc run --{module} ...",
            file=sys.stderr,
        )


def check_arguments(args) -> None:
    """Options that the chosen --format would ignore or cannot honour are refused."""
    if args.format in PRINTED and (args.image or args.program):
        raise ClimstackError(
            f"--format {args.format} prints the plan and runs nothing: --image and --command "
            "are for --format args or exec",
            fix="drop --image/--command, or pass --format args (print) or exec (run)",
        )
    if args.format in ("args", "exec") and not args.image:
        raise ClimstackError(
            f"--format {args.format} needs --image",
            fix="pass --image IMAGE (a .sif or an image directory)",
        )
    if args.format == "exec" and not args.image.exists():
        raise ClimstackError(
            f"--image {args.image} does not exist", fix="give the .sif or image directory"
        )
    if args.prepare_image and not args.prepare_image.is_dir():
        raise ClimstackError(
            f"--prepare-image {args.prepare_image} is not a directory: it creates mount points "
            "in a Charliecloud image directory",
            fix="give an unpacked image directory (ch-convert); a .sif needs no preparing, "
            "Apptainer creates its mount points itself",
        )


def register(commands) -> None:
    def run(args):
        check_arguments(args)

        def renderer(made):
            runtime = runtimes.get(made.runtime)
            return runtime.exporter() if args.format == "env" else runtime

        made = plan.make(
            sites.get(args.site),  # resolved once, here
            args.mode,
            out=args.out,
            # the renderer's bind syntax is checked before anything is written
            check=lambda as_written: renderer(as_written).check_bind_paths(as_written),
            view=loader.View(args.root),
            prefix=args.prefix,
            fabric_prefix=args.fabric_prefix,
            runtime=args.runtime,
            with_families=families.parse_with(args.with_families),
            flavour=args.flavour,
            rpath_remedy=args.rpath_remedy,
            abi=args.abi,
            wrapper=args.wrapper,
        )
        runtime = runtimes.get(made.runtime)
        for absent in made.absent:
            print(
                f"climstack bind: warning: site extra absent on this host: {absent}",
                file=sys.stderr,
            )
        for warning in made.warnings:
            print(f"climstack bind: warning: {warning}", file=sys.stderr)
        if args.prepare_image:
            points = runtimes.get("charliecloud").prepare_image(made, args.prepare_image)
            print(f"# created {len(points)} mount points in {args.prepare_image}", file=sys.stderr)
        if args.format == "json":
            print(made.to_json())
        elif args.format in ("cdi", "podman-hpc"):
            written(made, args.format)
        elif args.format == "env":
            print(renderer(made).exports(made), end="")
        else:
            program = launch.remedied(made, args.image, args.program) if args.program else ["true"]
            argv = runtime.exec_args(made, str(args.image), program)
            if args.format == "args":
                print(shlex.join(argv))
            else:
                runtime.check_image(made, args.image)
                if not shutil.which(argv[0]):
                    raise ClimstackError(
                        f"--format exec: `{argv[0]}` ({made.runtime}) is not on PATH",
                        fix=f"load the {made.runtime} module, choose another --runtime, or "
                        "use --format args and run the printed command where it exists",
                    )
                os.execvpe(argv[0], argv, process.with_user())

    sub = commands.add_parser(
        "bind",
        help="discover the host MPI and its closure; write and "
        "render a bind plan for Apptainer or Charliecloud",
    )
    sub.add_argument("site", help="site scope (archer2, gaea-c6, local) or its path")
    sub.add_argument("--mode", choices=stages.MODES, default="bind")
    sub.add_argument("--prefix", help="host MPI prefix (default: module env, then site scope)")
    sub.add_argument("--fabric-prefix", help="host libfabric prefix (fabric mode)")
    sub.add_argument(
        "--abi",
        choices=tuple(discover.ABIS),
        default="mpich",
        help="the image's MPI ABI: mpich (libmpi.so.12, the default) or standard (MPI-5's "
        "libmpi_abi.so.1: the image of containers/mpi-abi)",
    )
    sub.add_argument(
        "--wrapper",
        metavar="PREFIX",
        help="--abi standard on a host MPI without libmpi_abi.so.1 (Cray MPICH, MPICH < 5, "
        "Open MPI 5): the mpi_abi_wrapper built against it (`spack location -i "
        "mpi-abi-wrapper`; default: $MPI_ABI_WRAPPER_LIB, $MPI_ABI_WRAPPER_ROOT, then the "
        "site environment's install)",
    )
    sub.add_argument("--runtime", choices=runtimes.NAMES, help="default: the site's site.yaml")
    sub.add_argument(
        "--with",
        dest="with_families",
        action="append",
        metavar="FAMILY[=PREFIX],...",
        help=f"also bind the host's {', '.join(families.FAMILIES)} (prefix: module "
        "environment, then the site's externals), e.g. --with netcdf,hdf5",
    )
    sub.add_argument(
        "--flavour",
        choices=tuple(families.FLAVOURS),
        help="PrgEnv flavour of the host builds (default: site.yaml, then $PE_ENV)",
    )
    sub.add_argument(
        "--rpath-remedy",
        choices=remedy.REMEDIES,
        help="run executables whose DT_RPATH reaches their own MPI through the image's "
        "ld.so (preload: --preload the host MPI; inhibit: --inhibit-rpath '') or as a "
        "copy with RUNPATH (runpath); `climstack verify` says which apply",
    )
    sub.add_argument(
        "--root",
        type=Path,
        default=Path("/"),
        help="host root to discover under (a copy of a host tree)",
    )
    sub.add_argument(
        "--out",
        type=Path,
        help="plan directory (default: user cache/bind/...); "
        "on a Cray, somewhere compute nodes see, e.g. under /work",
    )
    sub.add_argument(
        "--format",
        choices=(*PRINTED, "args", "exec"),
        default="env",
        help="env (exports), json (plan.json), cdi (a CDI spec, written into the plan "
        "directory), podman-hpc (a podman-hpc module, likewise), args (the runtime's "
        "command line) or exec (run it)",
    )
    sub.add_argument("--image", type=Path, help="image (.sif or directory) for args/exec")
    sub.add_argument(
        "--prepare-image",
        type=Path,
        metavar="IMAGE_DIR",
        help="create the mount points in a Charliecloud image directory",
    )
    sub.add_argument(
        "--command",
        dest="program",
        nargs=argparse.REMAINDER,
        default=[],
        help="(last) the command to run in the image, with its arguments",
    )
    sub.set_defaults(run=run)
