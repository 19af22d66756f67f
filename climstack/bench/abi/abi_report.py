"""The MPI-5 standard ABI comparison's report (climstack.bench.abi.abi runs it): the matrix of
image/native ratios per host MPI and benchmark, and the compatibility table, image ABI x host
MPI, whose verdicts `bind` and `verify` compute here on the real libraries."""

import itertools
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from climstack.bench.report import stats
from climstack.bench.abi.abi import PROBE
from climstack.bench.abi.abi_model import MODEL
from climstack.bind import loader, plan as plans
from climstack.check import verify
from climstack.common import wheels
from climstack.errors import NEGATIVE, OK, ClimstackError
from climstack.inputs import sites
from climstack.bench.abi import abi_hosts


@dataclass(frozen=True)
class Cell:
    host: str
    benchmark: str
    estimate: stats.Estimate | None


def cells(results: dict) -> list[Cell]:
    return [
        Cell(*key.split("/"), stats.estimate(values)) for key, values in results["ratios"].items()
    ]


def matrix_table(results: dict) -> str:
    """Markdown: one row per benchmark, one column per host MPI, image/native ratios."""
    hosts = list(results["hosts"])
    by = {(c.host, c.benchmark): c.estimate for c in cells(results)}
    benches = list(dict.fromkeys(c.benchmark for c in cells(results)))
    titles = [results["hosts"][h]["title"] for h in hosts]
    lines = [
        "| benchmark | " + " | ".join(titles) + " |",
        "|---|" + "---|" * len(hosts),
    ]
    for bench in benches:
        row = [stats.interval_text(by[(h, bench)]) if by.get((h, bench)) else "-" for h in hosts]
        lines.append(f"| {bench} | " + " | ".join(row) + " |")
    probe = [
        f"{results['hosts'][h]['library'].split(',')[0]} (abi {results['hosts'][h]['abi']})"
        for h in hosts
    ]
    lines.append("| mpi-probe in the image | " + " | ".join(probe) + " |")
    netcdf = results["netcdf"]
    lines.append(
        "\nImage/native time ratio (a rate's inverse), geometric mean over message sizes and "
        f"repeats, {stats.METHOD}. NetCDF-Bench in the image on every host: "
        + data_verdict(netcdf)
        + (" (" if netcdf else "")
        + "; ".join(
            f"{k}: {v['variables']} variables, "
            + (
                "bytes identical"
                if v["bytes_identical"]
                else f"{v['differing_bytes']} bytes differ, at offsets "
                f"{v['differing_range'][0]}-{v['differing_range'][1]}"
            )
            for k, v in netcdf.items()
        )
        + (")." if netcdf else ".")
    )
    return "\n".join(lines)


def data_verdict(netcdf: dict) -> str:
    """What NetCDF-Bench's files say across the hosts (abi.same_data's comparisons)."""
    if not netcdf:
        return "not compared (one host: nothing to compare its file with)"
    return "the same data" if status(netcdf) == OK else "DIFFERENT data"


def status(netcdf: dict) -> int:
    """The comparison's exit status: 1 when NetCDF-Bench's data differ between hosts."""
    return NEGATIVE if any(v["differences"] for v in netcdf.values()) else OK


#: hosts verify is asked about without running anything: MPICH-ABI only (no libmpi_abi)
MPICH_ONLY = {"mpich-3.4.3": ("MPICH 3.4.3 (Cray MPICH 8.1's base)", ("mpich", "3.4.3")),
              "debian-mpich": ("Debian's MPICH 4.0.2", None)}  # fmt: skip
#: the images of each ABI: their environments
IMAGES = {"standard": "container-mpi-abi", "mpich": "container-archer2"}
#: each language's program in both images: the probe (C) and the model (Fortran: MOM6)
PROGRAMS = {"C": PROBE, "Fortran": MODEL}
#: verify passed on a host's tree without its runtime: climstack's model alone says so
MODEL_OK = "verify ok by the model"


def _verdict(kind: str, image_dir: Path, root: Path, prefix: str, work: Path, program) -> str:
    """What `bind` then `verify` say of `program` in the image of ABI `kind` on a host MPI."""
    try:
        made = plans.make(
            sites.get("local"),
            "bind",
            out=work,
            view=loader.View(root),
            prefix=prefix,
            abi=kind,
            environ={},
        )
    except ClimstackError as err:
        return f"refused by bind: {_reason(str(err))}"
    report = verify.check(program, made, image_dir)
    if report.passed:  # on a host tree, with no runtime: the run column is ld.so's word
        return MODEL_OK
    return f"refused by verify: {_reason((report.problems + report.unchecked)[0])}"


def _reason(message: str) -> str:
    """A refusal's first clause, without this machine's paths (a library keeps its name)."""
    text = re.sub(r"(?<![\w.])/\S*/(lib[^/\s]*\.so[^/\s]*)", r"\1", message.splitlines()[0])
    text = re.sub(r"(?<![\w.])/[^\s),;]+|\(--prefix\)", "", text)
    text = re.sub(r"\bat\s+(?=is|has)|^\W+|\s*\((?:RUNPATH|RPATH) of \)", "", text)
    return re.sub(r"\s+", " ", text.split(";")[0].split(": an ")[0]).strip()


def compatibility(
    results: dict, out: Path, mpich_image: Path | None, languages=tuple(PROGRAMS)
) -> list[dict]:
    """Image ABI x host MPI x language (of `languages`): how it launches, what bind and
    verify say (computed here), and what ran: the osu_latency ratio (C), the model's
    preflight and outputs (Fortran, the standard ABI image)."""
    model = results.get("model", {})
    names = dict.fromkeys([*results["hosts"], *model.get("hosts", {})])
    hosts = {name: abi_hosts.host(name, visible=(out,)) for name in names}
    rows = []
    targets = [(n, h.title, h.root, h.prefix, h.launch(1)[len(h.wrap)]) for n, h in hosts.items()]
    for name, (title, wheel) in MPICH_ONLY.items():
        prefix = str(wheels.installed(*wheel)) if wheel else "/usr"
        targets.append((name, title, Path("/"), prefix, "-"))
    images = {"standard": Path(results["image"]), "mpich": mpich_image}
    for kind, image_dir in images.items():
        if image_dir is None:
            continue
        for (name, title, root, prefix, launcher), language in itertools.product(
            targets, languages
        ):
            work = out / "compatibility" / f"{kind}-{name}-{language}"
            rows.append(
                {
                    "image": IMAGES[kind],
                    "host": title,
                    "language": language,
                    "launcher": Path(launcher).name if launcher != "-" else "-",
                    "verdict": _verdict(kind, image_dir, root, prefix, work, PROGRAMS[language]),
                    "ran": _ran(results, kind, name, language),
                }
            )
    return rows


def _ran(results: dict, kind: str, name: str, language: str) -> str:
    """What ran of the standard ABI image on host `name`: osu_latency's image/native ratio
    (C), MOM6's preflight refusal or its outputs against the first host's (Fortran)."""
    if kind != "standard":
        return "-"
    if language == "C":
        ratio = results["ratios"].get(f"{name}/osu_latency")
        return stats.interval_text(stats.estimate(ratio)) if ratio else "-"
    host = results.get("model", {}).get("hosts", {}).get(name)
    if host is None:
        return "-"
    if host["reason"]:
        return f"refused by preflight: {host['reason']}"
    return f"MOM6 {model_verdict(results['model'], name)}"


def compatibility_table(rows: list[dict]) -> str:
    lines = ["| image | host MPI | language | launcher | bind + verify | ran |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    lines += [
        f"| {r['image']} | {r['host']} | {r['language']} | {r['launcher']} | {r['verdict']} "
        f"| {r['ran']} |"
        for r in rows
    ]
    return "\n".join(lines)


def model_verdict(model: dict, name: str) -> str:
    """A host's MOM6 outputs against the first running host's: bit-identical or not."""
    for pair, found in model.get("across_hosts", {}).items():
        if pair.endswith(f" vs {name}"):
            return (
                f"bit-identical to {pair.split(' vs ')[0]} ({found['compared']} compared)"
                if not found["differences"]
                else f"DIFFERS from {pair.split(' vs ')[0]}: {found['differences'][0]}"
            )
    return "ran (the reference of the comparison)"


def model_table(model: dict) -> str:
    """Markdown: per host, the preflight and MOM6's main-loop time (median over repeats),
    its outputs against the first host's; then the layout comparison."""
    lines = [
        "| host MPI | libmpi_abi loaded | preflight | MOM6 main loop s (median, n) | outputs "
        "| the MPICH-ABI image's MOM6 on it |",
        "|---|---|---|---|---|---|",
    ]
    for name, host in model["hosts"].items():
        median, other = (
            _median(host.get(k, [])) for k in ("main_loop_s", "mpich_abi_main_loop_s")
        )
        outputs = "-" if host["reason"] else model_verdict(model, name)
        verdict = f"refused: {host['reason']}" if host["reason"] else "passed"
        lines.append(
            f"| {host['title']} | {host.get('loaded') or '-'} | {verdict} | {median} | "
            f"{outputs} | {other} |"
        )
    layout = model.get("layout")
    if layout:
        same = "bit-identical" if not layout["differences"] else "DIFFERENT"
        title = model["hosts"][layout["host"]]["title"]
        lines.append(
            f"\nLayouts {' and '.join(layout['layouts'])} on {title}: {same} "
            f"({layout['compared']} outputs and variables compared)."
        )
    return "\n".join(lines)


def _median(times: list[float]) -> str:
    return f"{statistics.median(times):.3f} (n={len(times)})" if times else "-"


def model_status(model: dict) -> int:
    """1 when MOM6's outputs differ between hosts or layouts (a refused host is a row)."""
    pairs = [*model.get("across_hosts", {}).values(), *filter(None, [model.get("layout")])]
    return NEGATIVE if any(p["differences"] for p in pairs) else OK
