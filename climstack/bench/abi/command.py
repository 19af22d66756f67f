"""`climstack bench abi`: the MPI-5 standard ABI image on each host MPI of the standard ABI,
beside native (C: climstack.bench.abi.abi), and its MOM6 on each (Fortran through mpif:
climstack.bench.abi.abi_model); the report abi.md and abi.json."""

import json
import shutil
import sys
import time
from pathlib import Path

from climstack import pins
from climstack.bench.abi import abi, abi_hosts, abi_model, abi_report, call_cost
from climstack.bench.run import kept
from climstack.common import atomic
from climstack.errors import ClimstackError
from climstack.image import image


IMAGE = "container-mpi-abi"


def prepare(hosts: list[str]) -> int:
    """What a run needs built, and nothing run: the image, each host's files (the wrappers
    Spack builds, Open MPI 6's sid system) and OSU's tarball, each kept by its inputs' stamp.
    So `make local` builds them untimed, beside the stack, and times only the runs."""
    image_dir = image.build(IMAGE, image.default_destination(IMAGE))
    for name in hosts:
        abi_hosts.host(name)
    print(
        f"climstack bench abi --prepare: {image_dir} and {len(hosts)} hosts; {abi.osu_tarball()}"
    )
    return 0


def run_abi(args, fresh_out) -> int:
    """The MPI-5 standard ABI image on each host MPI of the standard ABI, beside native (C),
    and its MOM6 on each (Fortran through mpif); exit status 1 when NetCDF-Bench's data or
    MOM6's outputs differ between hosts (a failed program: 3). With --report RECORD: that
    record's tables (abi.md) printed again, nothing run."""
    if args.report:
        return print_report(Path(args.report))
    names = args.benchmarks.split(",") if args.benchmarks else list(abi.SMALL)
    unknown = [n for n in names if n not in abi.OSU]
    if unknown:
        raise ClimstackError(
            f"--benchmarks: unknown {', '.join(unknown)}", fix=f"from {','.join(abi.OSU)}"
        )
    hosts = args.hosts.split(",") if args.hosts else list(abi_hosts.MODEL_HOSTS)
    bad = [h for h in hosts if h not in abi_hosts.MODEL_HOSTS]
    if bad:
        raise ClimstackError(
            f"--hosts: unknown {', '.join(bad)}", fix=",".join(abi_hosts.MODEL_HOSTS)
        )
    c_hosts = [h for h in hosts if h in abi_hosts.NAMES]  # the C lane's: native builds too
    if not c_hosts:
        raise ClimstackError(
            f"--hosts {args.hosts}: no host of the C lane",
            fix=f"add one of {','.join(abi_hosts.NAMES)}",
        )
    if args.prepare:
        if args.image or args.out:
            raise ClimstackError(
                "--prepare builds the image of the cache and runs nothing: it takes no --image "
                "or --out",
                fix="drop --image and --out, or drop --prepare",
            )
        return prepare(hosts)
    args.out = args.out or pins.cache_dir() / "bench" / time.strftime("abi-%Y%m%d-%H%M%S")
    out = fresh_out(args)
    if out.exists() and args.force:
        shutil.rmtree(out)
    image_dir = Path(args.image or image.build(IMAGE, image.default_destination(IMAGE)))
    tarball = abi.osu_tarball()
    results = abi.compare(image_dir, out, tarball, names, c_hosts, args.repeats)
    planned = {}
    for host_name in hosts:
        host = abi_hosts.host(host_name, visible=(out, image_dir))
        planned[host_name] = (host, abi.host_plan(host, out / "model", image_dir))
    mpich_image = image.default_destination("container-archer2")  # if `make local` built it
    mpich_image = mpich_image if mpich_image.is_dir() else None
    results["model"] = abi_model.compare(
        image_dir, out / "model", planned, args.repeats, mpich_image
    )
    if priced := [h for h in c_hosts if h in call_cost.HOSTS]:
        results["call_cost"] = call_cost.measure(priced, out / "call-cost", args.repeats)
    if not args.image:  # the image of these inputs: its record is reusable (abi.recorded)
        results["image_key"] = image.inputs_key(IMAGE)
    results["compatibility"] = abi_report.compatibility(results, out, mpich_image)
    atomic.write_text(out / "abi.json", json.dumps(results, indent=2) + "\n")
    kept.prune(out)
    table = abi_report.markdown(results)
    (out / "abi.md").write_text(table + "\n")
    print(table)
    print(f"\nclimstack bench abi: {out / 'abi.md'}, {out / 'abi.json'}")
    differ = [k for k, v in results["netcdf"].items() if v["differences"]]
    differ += [k for k, v in abi.model_pairs(results["model"]).items() if v["differences"]]
    for pair in differ:
        print(f"climstack bench abi: the outputs differ: {pair}", file=sys.stderr)
    return max(abi_report.status(results["netcdf"]), abi_report.model_status(results["model"]))


def print_report(record: Path) -> int:
    """abi.md of the record `record` (an abi.json), from it alone: as the run wrote it."""
    try:
        results = json.loads(record.read_text())
    except (OSError, ValueError) as err:
        raise ClimstackError(
            f"--report {record}: not a readable abi.json ({err})",
            fix="name the abi.json a `climstack bench abi` run wrote",
        ) from None
    missing = [k for k in ("hosts", "ratios", "sizes", "netcdf", "model") if k not in results]
    if missing:
        raise ClimstackError(
            f"--report {record}: no {', '.join(missing)}: not a `bench abi` record",
            fix="name the abi.json a `climstack bench abi` run wrote",
        )
    print(abi_report.markdown(results))
    return 0
