"""The MPI-5 standard ABI comparison's report (climstack.bench.abi.abi runs it): the matrix of
image/native ratios per host MPI and benchmark, and the compatibility table, image ABI x host
MPI, whose verdicts `bind` and `verify` compute here on the real libraries."""

import itertools
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from climstack.bench.report import stats
from climstack.bench.abi.abi import PROBE, SIZES, model_pairs
from climstack.bench.abi.abi_model import MODEL
from climstack.bind import loader, plan as plans
from climstack.check import verify
from climstack.errors import NEGATIVE, OK, ClimstackError
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack.bench.abi import abi_hosts, call_cost


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
    routes = [results["hosts"][h].get("route", "native ABI") for h in hosts]
    lines.append("| the standard ABI by | " + " | ".join(routes) + " |")
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


def cost_table(results: dict) -> str:
    """Markdown: per host, how the standard ABI reaches it and what the image costs against
    the same MPI's native build: osu_latency at 1 B and 64 KiB, osu_allreduce over its
    sizes, MOM6's main loop (where a native MOM6 runs beside it)."""
    model = results.get("model", {}).get("hosts", {})
    lines = [
        "| host MPI | the standard ABI by | osu_latency 1 B | osu_latency 64 KiB | "
        "osu_allreduce | MOM6 main loop |",
        "|---|---|---|---|---|---|",
    ]
    for name, host in results["hosts"].items():
        cells_ = [results.get("sizes", {}).get(f"{name}/osu_latency/{size}") for size in SIZES]
        cells_.append(results["ratios"].get(f"{name}/osu_allreduce"))
        mom6 = model.get(name, {})
        pairs = zip(mom6.get("main_loop_s", []), mom6.get("native_main_loop_s", []))
        cells_.append([image / native for image, native in pairs])
        text = [stats.interval_text(stats.estimate(c)) if c else "-" for c in cells_]
        lines.append(
            f"| {host['title']} | {host.get('route', 'native ABI')} | {' | '.join(text)} |"
        )
    lines.append(
        "\nThe image through its route against the same MPI's native build, time ratio, "
        f"{stats.METHOD}; MOM6: paired with the native build in each repeat, order rotated."
    )
    return "\n".join(lines)


#: the images of each ABI: their environments
IMAGES = {"standard": "container-mpi-abi", "mpich": "container-archer2"}
#: each language's program in both images: the probe (C) and the model (Fortran: MOM6)
PROGRAMS = {"C": PROBE, "Fortran": MODEL}
#: verify's ok under the plan, the model's link map confirmed by the image's own ld.so
CONFIRMED = "ok, confirmed by the image's ld.so"


def _verdict(kind: str, image_dir: Path, host, work: Path, program) -> str:
    """What `bind` then `verify` say of `program` in the image of ABI `kind` on a host MPI
    (the standard ABI through the host's mpi_abi_wrapper where it has one): `ok` only when
    the image's own ld.so, run under the plan, confirms the model's link map (the
    wrapper's too), as the gate asks before anything runs (climstack.check.gate)."""
    try:
        made = plans.make(
            sites.get("local"),
            "bind",
            out=work,
            view=loader.View(host.root),
            prefix=host.prefix,
            abi=kind,
            environ={},
            wrapper=host.wrapper if kind == "standard" else None,
        )
    except ClimstackError as err:
        return f"refused by bind: {_reason(str(err))}"
    runtimes.get(made.runtime).prepare_image(made, image_dir)  # the mount points ch-run lacks
    report = verify.check(program, made, image_dir, runtime_image=image_dir)
    if report.passed:
        return CONFIRMED if report.ok else report.verdict
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
    images = {"standard": Path(results["image"]), "mpich": mpich_image}
    for kind, image_dir in images.items():
        if image_dir is None:
            continue
        for (name, host), language in itertools.product(hosts.items(), languages):
            work = out / "compatibility" / f"{kind}-{name}-{language}"
            rows.append(
                {
                    "image": IMAGES[kind],
                    "host": host.title,
                    "language": language,
                    "launcher": Path(host.launch(1)[len(host.wrap)]).name,
                    "route": host.route if kind == "standard" else "MPICH ABI",
                    "verdict": _verdict(kind, image_dir, host, work, PROGRAMS[language]),
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


def markdown(results: dict) -> str:
    """abi.md: every table of the record `results` (abi.json), the compatibility rows
    included; what `bench abi` prints and `bench abi --report` prints again."""
    tables = [matrix_table(results), model_table(results["model"]), cost_table(results)]
    if priced := results.get("call_cost"):
        measured = {h: results["sizes"].get(f"{h}/osu_latency/1") for h in priced}
        tables.append(call_cost.table(priced, results.get("latency_1b_us"), measured))
    if rows := results.get("compatibility"):
        tables.append(compatibility_table(rows))
    return "\n\n".join(tables)


def compatibility_table(rows: list[dict]) -> str:
    lines = ["| image | host MPI | language | launcher | ABI by | bind + verify | ran |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    lines += [
        f"| {r['image']} | {r['host']} | {r['language']} | {r['launcher']} | {r['route']} "
        f"| {r['verdict']} | {r['ran']} |"
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
        verdict += f" ({host['note']})" if host.get("note") else ""
        lines.append(
            f"| {host['title']} | {host.get('loaded') or '-'} | {verdict} | {median} | "
            f"{outputs} | {other} |"
        )
    if native := model.get("native"):
        same = "bit-identical" if not native["differences"] else "DIFFERENT"
        title = model["hosts"][native["host"]]["title"]
        lines.append(
            f"\nThe image's MOM6 on {title} against the native MOM6 built there (Spack's, "
            f"the local site): {same} ({native['compared']} outputs and variables compared)."
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
    """1 when MOM6's outputs differ between hosts, layouts, or the image and the native
    build (abi.model_pairs; a refused host is a row)."""
    return NEGATIVE if any(p["differences"] for p in model_pairs(model).values()) else OK
