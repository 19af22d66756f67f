"""The MPI-5 standard ABI comparison: one image (containers/mpi-abi), unchanged, run in bind
mode on each host MPI of the standard ABI (climstack.bench.abi.abi_hosts), beside the same
OSU benchmarks built natively with that MPI's own compiler wrapper; the order of hosts
and of image/native rotates between repeats. Each cell of the matrix (host MPI x
benchmark) is the geometric mean over repeats of the image/native time ratio (a rate's
inverse), averaged over message sizes in each repeat, with its interval (bench.stats).
NetCDF-Bench runs in the image on every host; the files they write are compared variable
by variable (bench.bitwise): the same data whichever MPI wrote them (one host: not
compared). A program that fails, prints no results or writes no file is a ToolFailure.
"""

import dataclasses
import json
import tarfile
from pathlib import Path

from climstack import pins
from climstack.bench.model import bitwise
from climstack.bench.report import stats
from climstack.bench.results import formats
from climstack.bind import loader, plan as plans
from climstack.check import verify
from climstack.common import atomic, process, progress
from climstack.errors import ClimstackError, ToolFailure
from climstack.inputs import sites
from climstack.bench.abi import abi_hosts
from climstack.launch import launch, launchers, runtimes
from climstack.stack.sources import git_sources

VIEW = "/opt/views/view"
PROBE = f"{VIEW}/bin/mpi-probe"
OSU_IN_IMAGE = f"{VIEW}/libexec/osu-micro-benchmarks/mpi"
#: benchmark -> its source under OSU's c/mpi/ (installed as <first directory>/<benchmark>)
OSU = {
    "osu_latency": "pt2pt/standard/osu_latency.c",
    "osu_bw": "pt2pt/standard/osu_bw.c",
    "osu_allreduce": "collective/blocking/osu_allreduce.c",
    "osu_allgather": "collective/blocking/osu_allgather.c",
    "osu_alltoall": "collective/blocking/osu_alltoall.c",
}
#: OSU's shared sources every benchmark links (c/util/)
OSU_UTIL = ("osu_util.c", "osu_util_mpi.c", "osu_util_graph.c", "osu_util_papi.c")
OSU_ARGS = ("-m", "1:65536", "-i", "200", "-x", "20")
#: what `make local` runs of the C side (the probe, two OSU benchmarks, NetCDF-Bench)
SMALL = ("osu_latency", "osu_allreduce")
NETCDF_ARGS = ("-n=1", "-p=2", "-w", "-d=8:64:64:8", "-f=bench.nc")
RANKS = 2
RUNTIME = "charliecloud"


def image_program(bench: str) -> str:
    """Where the image's OSU build installed `bench` (pt2pt/osu_latency)."""
    return f"{OSU_IN_IMAGE}/{OSU[bench].split('/')[0]}/{bench}"


def osu_tarball() -> Path:
    """OSU's source tarball in the source mirror (the image's build filled it)."""
    found = sorted((git_sources.local_mirror() / "osu-micro-benchmarks").glob("*.tar.gz"))
    if not found:
        raise ClimstackError(
            f"no OSU source tarball in {git_sources.local_mirror()}/osu-micro-benchmarks",
            fix="build the image first (bin/climstack image container-mpi-abi fills the mirror)",
        )
    return found[-1]


def osu_tree(tarball: Path, work: Path) -> Path:
    """OSU's sources, unpacked from the source mirror's tarball (the image's own)."""
    with tarfile.open(tarball) as archive:
        archive.extractall(work, filter="data")
    found = [p for p in work.iterdir() if (p / "c" / "util").is_dir()]
    if len(found) != 1:
        raise ToolFailure(
            f"{tarball} unpacked into {work} holds {len(found)} OSU source trees (c/util/)",
            fix="empty the directory, or rebuild the image to fill the source mirror again",
        )
    return found[0]


def native_programs(host: abi_hosts.Host, tree: Path, out: Path, names) -> dict[str, Path]:
    """The OSU benchmarks built with the host MPI's own wrapper (its own ABI)."""
    util = tree / "c" / "util"
    built = {}
    for name in names:
        sources = [tree / "c" / "mpi" / OSU[name], *(util / f for f in OSU_UTIL)]
        flags = [f"-I{util}", '-DPACKAGE_VERSION="7.4"']
        built[name] = abi_hosts.compile_c(host, sources, out / host.name / name, flags, ["-lm"])
    return built


def host_plan(host: abi_hosts.Host, out: Path, image: Path, kind="standard") -> plans.Plan:
    """The host's bind plan for the ABI `kind` (site local's site.yaml), written, and the
    image's mount points made for it."""
    made = plans.make(
        sites.get("local"),
        "bind",
        out=out / "plans" / (host.name if kind == "standard" else f"{host.name}-{kind}"),
        view=loader.View(host.root),
        prefix=host.prefix,
        runtime=RUNTIME,
        abi=kind,
        wrapper=host.wrapper if kind == "standard" else None,
    )
    runtimes.get(RUNTIME).prepare_image(made, image)
    return made


def command(plan, host, image: Path, argv, cwd: Path | None = None, ranks=RANKS) -> list[str]:
    """The command line of `argv` in the image on the host's launcher under the plan (on
    `ranks` ranks); with `cwd`, that run directory is bound at /mnt (every image has it) and
    started in."""
    if cwd:
        plan = dataclasses.replace(plan, binds=[*plan.binds, [str(Path(cwd).resolve()), "/mnt"]])
    return launch.command(
        plan,
        runtimes.get(RUNTIME),
        launchers.given(host.launch(ranks)),
        image,
        list(argv),
        join=ranks,  # one container for the node's ranks, as `bench local`: shared memory
        cwd="/mnt" if cwd else None,
    )


def in_image(plan, host, image: Path, argv, cwd: Path | None = None, timeout=600) -> str:
    """Run `argv` in the image on the host's launcher under the plan; its output."""
    what = f"{argv[0]} in {image} on {host.title}"
    run = command(plan, host, image, argv, cwd)
    return process.run(run, what, env=host.environment, timeout=timeout).stdout


def checked_probe(plan, host, image: Path) -> str:
    """The probe's output on the host, verified first (as `bench local` does), and refused
    unless the host's library answered: a run on the image's own MPI would compare nothing."""
    report = verify.check(PROBE, plan, image, runtime_image=image)
    if why := report.refusal():
        raise ToolFailure(
            f"verify refuses {PROBE} on {host.title}: {why}",
            fix="see `climstack verify` (docs/mpi-abi.md)",
        )
    output = in_image(plan, host, image, [PROBE])
    loaded = _probe_value(output, "loaded")
    if loaded != f"{plans.LINKS_DIR}/libmpi_abi.so.1":
        raise ToolFailure(
            f"{PROBE} on {host.title} loaded {loaded or 'no MPI'}, not the host's library "
            f"bound at {plans.LINKS_DIR}:\n{output}",
            fix="check the plan's LD_LIBRARY_PATH and the image's RUNPATH (climstack verify)",
        )
    return output


def natively(host, argv, timeout=600) -> str:
    command = [*host.launch(RANKS), *map(str, argv)]
    what = f"{argv[0]} on {host.title}"
    return process.run(command, what, env=host.environment, timeout=timeout).stdout


def _by_size(output: str, name: str) -> tuple[dict, bool]:
    """size -> value of an OSU output, and whether the metric is a rate."""
    lines = list(enumerate(output.splitlines(), 1))
    found = list(formats.osu(lines, lambda n, why: None, name))
    if not found:
        raise ToolFailure(
            f"{name} printed no results:\n{output[-2000:]}", fix="run it by hand on that host"
        )
    return {m.bytes: m.value for m in found}, found[0].unit.endswith("/s")


#: the message sizes whose own ratios are kept besides the mean: the wrapper's cost is a
#: per-call overhead (latency at 1 B) and a per-byte one (64 KiB)
SIZES = (1, 65536)


def size_ratios(image_out: str, native_out: str, name: str) -> dict[int, float]:
    """image/native (native/image for a rate) at each message size both printed."""
    image, rate = _by_size(image_out, name)
    native, _ = _by_size(native_out, name)
    sizes = sorted(s for s in image.keys() & native.keys() if image[s] > 0 and native[s] > 0)
    return {s: native[s] / image[s] if rate else image[s] / native[s] for s in sizes}


def compare(image: Path, out: Path, tarball: Path, names=SMALL, hosts=abi_hosts.NAMES,
            repeats: int = 3) -> dict:  # fmt: skip
    """Run the comparison; the results (also written to out/abi.json)."""
    if repeats < 1:
        raise ClimstackError(f"--repeats {repeats}", fix="1 or more")
    out.mkdir(parents=True, exist_ok=True)
    chosen = {name: abi_hosts.host(name, visible=(out, image)) for name in hosts}
    tree = osu_tree(tarball, out / "osu-source")
    probes, programs, planned = {}, {}, {}
    for name, host in chosen.items():
        with progress.step(f"{host.title}: its bind plan, the probe, the native OSU build"):
            planned[name] = host_plan(host, out, image)
            probes[name] = checked_probe(planned[name], host, image)
            programs[name] = native_programs(host, tree, out / "native", names)
    ratios: dict[tuple[str, str], list[float]] = {}
    sized: dict[str, list[float]] = {}  # host/benchmark/size -> the ratio at SIZES, per repeat
    latency: dict[str, list[float]] = {}  # host -> native osu_latency at 1 B, us, per repeat
    order = list(chosen)
    for repeat in range(repeats):
        with progress.step(f"repeat {repeat + 1} of {repeats}: {', '.join(names)} on each host"):
            for name in order[repeat % len(order) :] + order[: repeat % len(order)]:
                host = chosen[name]
                for bench in names:
                    argv = [image_program(bench), *OSU_ARGS]
                    native_argv = [programs[name][bench], *OSU_ARGS]
                    if repeat % 2:
                        native_out = natively(host, native_argv)
                        image_out = in_image(planned[name], host, image, argv)
                    else:
                        image_out = in_image(planned[name], host, image, argv)
                        native_out = natively(host, native_argv)
                    by_size = size_ratios(image_out, native_out, bench)
                    one_byte = _by_size(native_out, bench)[0].get(1)
                    if bench == "osu_latency" and one_byte:
                        latency.setdefault(name, []).append(one_byte)
                    ratios.setdefault((name, bench), []).append(stats.geomean(by_size.values()))
                    for size in (s for s in SIZES if s in by_size):
                        sized.setdefault(f"{name}/{bench}/{size}", []).append(by_size[size])
    written = {}
    for name, host in chosen.items():
        written[name] = netcdf_file(out, name)
        run_dir = written[name].parent
        run_dir.mkdir(parents=True, exist_ok=True)
        with progress.step(f"NetCDF-Bench in the image on {host.title}"):
            in_image(planned[name], host, image, [f"{VIEW}/bin/benchtool", *NETCDF_ARGS], run_dir)
        if not written[name].is_file():
            raise ToolFailure(
                f"NetCDF-Bench in {image} on {host.title} wrote no {written[name]}",
                fix="run it by hand there (benchtool -f=bench.nc)",
            )
    results = {
        "image": str(image),
        "repeats": repeats,
        "method": stats.METHOD,
        "hosts": {
            name: {
                "title": host.title,
                "library": abi_hosts.library_version(probes[name]),
                "abi": _probe_value(probes[name], "abi"),
                "loaded": _probe_value(probes[name], "loaded"),
                "route": host.route,
            }
            for name, host in chosen.items()
        },
        "ratios": {f"{h}/{b}": r for (h, b), r in ratios.items()},
        "sizes": sized,
        "latency_1b_us": latency,
        "netcdf": same_data(written),
    }
    atomic.write_text(out / "abi.json", json.dumps(results, indent=2) + "\n")
    return results


def netcdf_file(out: Path, name: str) -> Path:
    """The file NetCDF-Bench wrote on host `name` in a comparison's directory `out`."""
    return out / "netcdf" / name / "bench.nc"


def recorded(image_key: str) -> dict | None:
    """The newest `bench abi` record in the cache (bench/abi-*/abi.json) made on the image
    of inputs `image_key` with every host, its model lane included, whose outputs are kept
    beside it; None if there is none. The tests read `make local`'s instead of running the
    lane again. Its bit-for-bit verdicts are made again by this code from those outputs
    (recompared), not read: the record's key covers the image's inputs, not this code."""
    for path in sorted((pins.cache_dir() / "bench").glob("abi-*/abi.json"), reverse=True):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        model = record.get("model", {}).get("hosts", {})
        if (
            record.get("image_key") == image_key
            and set(record.get("hosts", {})) == set(abi_hosts.NAMES)
            and set(model) == set(abi_hosts.MODEL_HOSTS)
        ):
            found = recompared(record, path.parent)
            if found is not None:
                return {**found, "directory": str(path.parent)}
    return None


def model_pairs(model: dict) -> dict[str, dict]:
    """MOM6's bit-for-bit pairs, by name: hosts, layouts, the image against native."""
    pairs = dict(model.get("across_hosts", {}))
    for name, key in (("layouts", "layout"), ("image vs native", "native")):
        if model.get(key):
            pairs[name] = model[key]
    return pairs


def recompared(record: dict, out: Path) -> dict | None:
    """`record` (abi.json in `out`), its comparisons made again from the runs' files (None
    when one is gone; one that does not read: ToolFailure)."""
    written = {name: netcdf_file(out, name) for name in record["hosts"]}
    model = record["model"]
    runs = [Path(pair[k]) for pair in model_pairs(model).values() for k in ("a", "b")]
    if not all(f.is_file() for f in written.values()) or not all(r.is_dir() for r in runs):
        return None

    def again(pair: dict) -> dict:
        return {**pair, **compared_runs(Path(pair["a"]), Path(pair["b"]))}

    across = model.get("across_hosts", {})
    model = {**model, "across_hosts": {pair: again(found) for pair, found in across.items()}}
    for key in ("layout", "native"):
        if model.get(key):
            model[key] = again(model[key])
    return {**record, "netcdf": same_data(written), "model": model}


def _probe_value(output: str, key: str) -> str:
    return next((line.split(": ", 1)[1] for line in output.splitlines()
                 if line.startswith(f"{key}: ")), "")  # fmt: skip


def same_data(files: dict[str, Path]) -> dict:
    """Each host's NetCDF-Bench file against the first host's: the variables compared and
    the differences (none: the same data), and whether the bytes are identical too; {} for
    one host (nothing compared)."""
    (first, reference), *rest = files.items()
    report = {}
    for name, path in rest:
        comparison = bitwise.Comparison(reference, path)
        bitwise.compare_netcdf(reference, path, "bench.nc", comparison)
        a, b = reference.read_bytes(), path.read_bytes()
        places = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        tail = range(min(len(a), len(b)), max(len(a), len(b)))  # bytes of one file only
        ends = [*places[:1], *places[-1:], *tail[:1], *tail[-1:]]
        report[f"{first} vs {name}"] = {
            "variables": len(comparison.compared),
            "differences": [str(d) for d in comparison.differences],
            "bytes_identical": a == b,
            # where the bytes differ (the files' own bookkeeping, when the data are the same)
            "differing_bytes": len(places) + len(tail),
            "differing_range": [min(ends), max(ends)] if ends else [],
        }
    return report


def compared_runs(a: Path, b: Path) -> dict:
    """Two runs' outputs compared bit for bit (bench.model.bitwise), as a record."""
    comparison = bitwise.compare(a, b)
    return {
        "a": str(a),
        "b": str(b),
        "compared": len(comparison.compared),
        "differences": [str(d) for d in comparison.differences],
    }
