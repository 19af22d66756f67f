"""The field's published tables beside ours: each seed table is a publication's figures per
mode (NetCDF-Bench in ARCHER2's container guide) or per I/O layer (ARCHER2's I/O study),
and the report prints beside each figure what this run measured in the same place: the
median over repeats, and the ratio the publication's claim rests on (to native; to HDF5).
The seed figures are the project's source documents' (issue 52); no public copy of either
table was found, so they are reference values, never inputs to a verdict."""

import statistics
from dataclasses import dataclass

from climstack.bench.results.records import Record, batch_text

SOURCE_NETCDF = (
    "ARCHER2 container guide, NetCDF-Bench write (MiB/s); PrgEnv-gnu and PrgEnv-cray on "
    "cray-mpich 8.1"
)
SOURCE_LAYERS = (
    "ARCHER2 I/O study: 2048 ranks on 16 nodes, stripe count 8, stripe size 1 MiB; "
    "PrgEnv-gnu 8.0.0, cray-mpich 8.1.4, cray-hdf5-parallel 1.12.0.3"
)
#: the study's setting, as collect names a run at a stripe setting
STUDY_SETTING = " (lfs -c 8 -S 1M)"


@dataclass(frozen=True)
class SeedRow:
    label: str  # what the publication calls it
    keys: tuple[str, ...]  # our modes (NetCDF-Bench) or layer (I/O) it compares with
    figure: float | None  # the publication's (None: it gives none)


NETCDF_ROWS = (
    SeedRow("native GNU", ("native",), 1453),
    SeedRow("native CCE", ("native-cce",), 1434),
    SeedRow("container NetCDF", ("bind",), 1458),
    SeedRow("container + host GNU NetCDF", ("bind-host-netcdf", "bind-host-netcdf-gnu"), 1465),
    SeedRow("container + host CCE NetCDF", ("bind-host-netcdf-cray",), 1464),
)
#: the study's figures as it gives them, in GB/s (ours are MiB/s: the ratios compare)
LAYER_ROWS = (
    SeedRow("MPI-IO", ("MPI-IO",), None),
    SeedRow("HDF5", ("HDF5",), 3.23),
    SeedRow("ADIOS2 BP4", ("ADIOS2 BP4",), 13.3),
    SeedRow("ADIOS2 BP5", ("ADIOS2 BP5",), None),
    SeedRow("ADIOS2 HDF5 engine", ("ADIOS2 HDF5",), None),
)
LAYER_MODES = ("native", "bind", "hybrid")  # the columns of the I/O layers' table


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _number(value: float | None, digits: str = ".0f") -> str:
    return "-" if value is None else format(value, digits)


def _ratio(mine: float | None, base: float | None) -> str:
    return "-" if not mine or not base else f"{mine / base:.2f}"


def netcdf_table(records: list[Record]) -> tuple[list[str], list[list[str]]] | None:
    """The guide's five rows: its figure, ours (median MiB/s, repeats) and each to native."""
    rates = [
        r for r in records if r.benchmark == "netcdf-bench" and r.operation == "write"
        and r.metric == "rate"
    ]  # fmt: skip
    if not rates:
        return None

    def ours(keys):
        return [r.value for r in rates if r.mode in keys]

    native = _median(ours(NETCDF_ROWS[0].keys))
    head = ["published as", "mode", "seed (MiB/s)", "ours (MiB/s)", "repeats", "seed / native",
            "ours / native"]  # fmt: skip
    rows = []
    for row in NETCDF_ROWS:
        values = ours(row.keys)
        modes = sorted({r.mode for r in rates if r.mode in row.keys}) or [row.keys[0]]
        rows.append([
            row.label, ", ".join(modes), _number(row.figure), _number(_median(values)),
            str(len(values)), _ratio(row.figure, NETCDF_ROWS[0].figure),
            _ratio(_median(values), native),
        ])  # fmt: skip
    return head, rows


def _setting(operation: str, layer: str) -> bool:
    """The layer's run at the study's setting, or at no stripe setting (a local run)."""
    return operation in (layer, layer + STUDY_SETTING)


def layers_table(records: list[Record]) -> tuple[list[str], list[list[str]]] | None:
    """The study's layers: its figure, ours per mode (median MiB/s), each to HDF5's."""
    rates = [r for r in records if r.benchmark == "benchio-adios2" and r.metric == "rate"]
    if not rates:
        return None
    modes = [m for m in LAYER_MODES if any(r.mode == m for r in rates)]

    def ours(layer, mode):
        return _median([r.value for r in rates if r.mode == mode and _setting(r.operation, layer)])

    hdf5 = {m: ours("HDF5", m) for m in modes}
    head = ["layer", "seed (GB/s)", "seed / HDF5"]
    head += [f"{m} (MiB/s)" for m in modes] + [f"{m} / HDF5" for m in modes]
    rows = []
    for row in LAYER_ROWS:
        mine = {m: ours(row.keys[0], m) for m in modes}
        rows.append(
            [row.label, _number(row.figure, ".3g"), _ratio(row.figure, LAYER_ROWS[1].figure)]
            + [_number(mine[m]) for m in modes]
            + [_ratio(mine[m], hdf5[m]) for m in modes]
        )
    return head, rows


def blocks(records: list[Record]) -> list[tuple]:
    """The report's section of the field's tables (page.py blocks), for those with runs:
    per batch of runs (site, host, job), as the report pairs runs only within one."""
    batches = {}
    for r in records:
        batches.setdefault(r.batch, []).append(r)
    out = []
    for batch, mine in batches.items():
        tables = []
        if found := netcdf_table(mine):
            tables += [
                ("p", f"NetCDF-Bench write rate. Seed: {SOURCE_NETCDF}."),
                ("table", *found),
            ]
        if found := layers_table(mine):
            tables += [
                (
                    "p",
                    f"Write rate per I/O layer (benchio with ADIOS2). Seed: {SOURCE_LAYERS}. "
                    "Ours: this run's ranks and file system; a centre's job at the study's "
                    "stripe setting is compared at that setting.",
                ),  # fmt: skip
                ("table", *found),
            ]
        if tables and len(batches) > 1:
            tables.insert(0, ("p", f"Runs: {batch_text(batch)}"))
        out += tables
    return [("h2", "The field's tables"), *out] if out else []
