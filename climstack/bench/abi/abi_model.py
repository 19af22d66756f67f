"""MOM6 in the MPI-5 standard ABI image (Fortran through mpif's libmpif.so.1, the image's
own), unchanged, in bind mode on each host MPI of the standard ABI (abi_hosts.MODEL_HOSTS),
each with its own launcher. First, on each host, two preflights: `mpif_info` (the
libmpi_abi the loader resolved; launcher and library belong together) and the handle round
trip every Fortran binding over the C ABI makes (handle_roundtrip.c, compiled once against
the ABI's mpi.h). A host that fails either is refused by name and keeps its row; the
others run the benchmark case (cases/mom6-benchmark), whose outputs (ocean.stats, the
NetCDF files, the restart) are compared bit for bit across hosts and between the layouts
1x2 and 2x1 on the first host (bench.model.bitwise). Each host runs once; the host paired
with the native MOM6 runs every repeat, the pairs' ratio being the wrapper's measured cost.
"""

import json
import re
import shutil
from pathlib import Path

from climstack import pins
from climstack.bench.abi import abi, abi_hosts
from climstack.bench.model import cases
from climstack.common import process, progress
from climstack.errors import ToolFailure

MODEL = f"{abi.VIEW}/bin/MOM6"
PREFLIGHT = f"{abi.VIEW}/bin/mpif_info"
ROUNDTRIP_SOURCE = Path(__file__).with_name("handle_roundtrip.c")
#: mpif_check_environment's one refusal that is no defect: an MPI older than mpif's (the
#: wrapper over MPICH 3.4 reports its MPI 3.1), whose newer calls answer an error
OLDER = re.compile(r"built against MPI (\d+\.\d+) but the loaded MPI library implements MPI "
                   r"(\d+\.\d+), which is older")  # fmt: skip
#: the lines it prints: 6 user-created handles and 2 predefined ones
ROUNDTRIP_LINES = 8
CASE = "mom6-benchmark"
#: 12 steps, as `bench local` runs it; the layouts compared on the first host
SETTINGS = {"DAYMAX": "0.125"}
LAYOUTS = ("1,2", "2,1")


def roundtrip_program(out: Path) -> Path:
    """handle_roundtrip.c built with MPICH 5.0.2's mpicc_abi: the standard ABI's mpi.h, the
    one binary every host runs in the image."""
    program = out / "handle-roundtrip"
    mpicc = abi_hosts.wheel_prefix("mpich") / "bin" / "mpicc_abi"
    out.mkdir(parents=True, exist_ok=True)
    process.run([mpicc, "-O2", "-o", program, ROUNDTRIP_SOURCE], "mpicc_abi handle_roundtrip.c")
    return program


def preflight(plan, host, image: Path, roundtrip: Path, run_dir: Path) -> dict:
    """mpif_info and the handle round trip in the image on the host: what each printed, and
    why the host is refused ('' when both passed)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(roundtrip, run_dir / roundtrip.name)
    found, reasons = {}, []
    # one rank: where mpif_check_environment aborts, no other rank's abort cuts its output
    run = abi.command(plan, host, image, [PREFLIGHT], run_dir, ranks=1)
    info = process.run(run, f"{PREFLIGHT} on {host.title}", env=host.environment,
                       timeout=300, check=False)  # fmt: skip
    found["loaded"] = _after(info.stdout, "MPI library loaded from:")
    found["implementation"] = _after(info.stdout, "MPI implementation:")
    older = OLDER.search(info.stdout + info.stderr)
    if older:  # through mpi_abi_wrapper on an MPI-3.1 host: a note, no refusal
        found["note"] = (
            f"mpif_info: the library implements MPI {older[2]}, mpif is built for "
            f"{older[1]}: calls newer than MPI {older[2]} answer MPI_ERR_UNSUPPORTED_OPERATION"
        )
    elif info.returncode:
        reasons.append(f"mpif_info failed: {_last_line(info.stdout + info.stderr)}")
    elif "mpif_check_environment: passed" not in info.stdout:
        reasons.append("mpif_info: mpif_check_environment did not pass")
    try:
        lines = abi.in_image(plan, host, image, [f"/mnt/{roundtrip.name}"], run_dir, timeout=300)
        printed = [line for line in lines.splitlines() if line.startswith("roundtrip ")]
    except ToolFailure as failure:
        printed = [f"roundtrip all: failed: {_last_line(str(failure))}"]
    failed = [line.split(": ", 1)[1] for line in printed if not line.endswith(": ok")]
    if len(printed) != ROUNDTRIP_LINES:
        failed = failed or [f"{len(printed)} lines printed, not {ROUNDTRIP_LINES}"]
    found["roundtrip"] = failed or ["ok"]
    if failed:
        more = f" (and {len(failed) - 1} more handles)" if len(failed) > 1 else ""
        reasons.append(f"the handle round trip fails: {failed[0]}{more}")
    found["reason"] = "; ".join(reasons)
    return found


def _after(text: str, heading: str) -> str:
    """The line after `heading` in mpif_info's output, stripped."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    return lines[at + 1].strip() if at is not None and at + 1 < len(lines) else ""


def _last_line(text: str) -> str:
    useful = [line.strip() for line in text.splitlines() if line.strip()]
    signal = [line for line in useful if "signal" in line.lower() or "fault" in line.lower()]
    return (signal or useful or ["(no output)"])[-1]


#: the host MPI the local site's native MOM6 is built on (Debian's MPICH 4.0.2): there the
#: image's MOM6 through mpi_abi_wrapper runs paired with the native build, rotated
NATIVE_HOST = "debian-mpich"


def native_program() -> str:
    """The native MOM6 `bench local` ran (Spack's build on the local site), newest first;
    '' when there is none (run `climstack bench local` first: `make local` does)."""
    runs = (pins.cache_dir() / "bench").glob(f"local-*/work/mom6/native.r*/{cases.RECORD}")
    for record in sorted(runs, reverse=True):
        try:
            program = json.loads(record.read_text())["argv"][-1]
        except (OSError, ValueError, KeyError, IndexError):
            continue
        if Path(program).is_file():
            return program
    return ""


def run_native(program: str, host, run_dir: Path, layout: str) -> cases.CaseRun:
    """The native MOM6 on the host's own launcher (2 ranks), as the image's runs."""
    settings = {**SETTINGS, "LAYOUT": layout}
    launch = [*host.launch(abi.RANKS)]
    return cases.run(cases.get(CASE), run_dir, program, lambda argv: [*launch, *argv], settings,
                     env=host.environment, timeout=1200)  # fmt: skip


def paired(native: str, plan, host, image: Path, run_dir: Path, out: Path, repeat: int):
    """(the image's run, the native build's) on the host, in the order the repeat rotates."""
    first, second = (
        lambda: run_model(plan, host, image, run_dir, LAYOUTS[0]),
        lambda: run_native(native, host, out / "mom6" / f"native-{repeat + 1}", LAYOUTS[0]),
    )
    if repeat % 2:
        mine = second()
        return first(), mine
    return first(), second()


def run_model(plan, host, image: Path, run_dir: Path, layout: str) -> cases.CaseRun:
    """The benchmark case in the image on the host (2 ranks, one container)."""
    settings = {**SETTINGS, "LAYOUT": layout}
    return cases.run(
        cases.get(CASE),
        run_dir,
        MODEL,
        lambda argv: abi.command(plan, host, image, argv, run_dir),
        settings,
        env=host.environment,
        timeout=1200,
    )


def mpich_abi_runs(hosts: dict, mpich_image: Path, out: Path) -> dict:
    """The MPICH-ABI image's MOM6 (containers/archer2) once on each host MPI that also has
    the MPICH ABI with Fortran (libmpi.so.12, libmpifort.so.12): name -> [main-loop time]."""
    found = {}
    for name, host in hosts.items():
        lib = host.root / host.prefix.lstrip("/") / "lib"
        if not all((lib / so).exists() for so in ("libmpi.so.12", "libmpifort.so.12")):
            continue
        plan = abi.host_plan(host, out, mpich_image, kind="mpich")
        with progress.step(f"the MPICH-ABI image's MOM6 on {host.title}"):
            found[name] = [run_model(plan, host, mpich_image, out / name, LAYOUTS[0]).main_loop_s]
    return found


def compare(image: Path, out: Path, planned: dict, repeats: int = 1, mpich_image=None) -> dict:
    """Preflight every host of `planned` (name -> (Host, Plan)), run MOM6 once on each that
    passed, and the other layout once on the first; NATIVE_HOST, paired with the native
    build, runs `repeats` times (its ratio is the wrapper's measured cost; the others'
    outputs are compared, their times only shown). With `mpich_image`, the MPICH-ABI
    image's MOM6 once where the host has that ABI too. The record: per host its preflight
    and main-loop times, and the comparisons."""
    roundtrip = roundtrip_program(out / "roundtrip")
    hosts = {}
    for name, (host, plan) in planned.items():
        with progress.step(f"{host.title}: mpif_info and the handle round trip in the image"):
            hosts[name] = {"title": host.title, **preflight(plan, host, image, roundtrip,
                                                            out / "preflight" / name)}  # fmt: skip
    running = [name for name in planned if not hosts[name]["reason"]]
    runs: dict[str, list[Path]] = {name: [] for name in running}
    native = native_program() if NATIVE_HOST in running else ""
    for repeat in range(repeats if running else 0):
        these = running if repeat == 0 else [NATIVE_HOST] if native else []
        if not these:
            break
        order = these[repeat % len(these) :] + these[: repeat % len(these)]
        with progress.step(f"MOM6 repeat {repeat + 1} of {repeats} on {', '.join(order)}"):
            for name in order:
                host, plan = planned[name]
                run_dir = out / "mom6" / f"{name}-{repeat + 1}"
                if name == NATIVE_HOST and native:  # paired with the native build, rotated
                    made, mine = paired(native, plan, host, image, run_dir, out, repeat)
                    hosts[name].setdefault("native_main_loop_s", []).append(mine.main_loop_s)
                else:
                    made = run_model(plan, host, image, run_dir, LAYOUTS[0])
                hosts[name].setdefault("main_loop_s", []).append(made.main_loop_s)
                runs[name].append(run_dir)
    record = {"case": CASE, "settings": SETTINGS, "hosts": hosts, "across_hosts": {}}
    if native:  # the image's MOM6 against the native build's, bit for bit
        compared = abi.compared_runs(out / "mom6" / "native-1", runs[NATIVE_HOST][0])
        record["native"] = {"host": NATIVE_HOST, "program": native, **compared}
    if running:
        first = running[0]
        reference = runs[first][0]
        for name in running[1:]:
            pair = f"{first} vs {name}"
            record["across_hosts"][pair] = abi.compared_runs(reference, runs[name][0])
        host, plan = planned[first]
        other = out / "mom6" / f"{first}-layout-{LAYOUTS[1].replace(',', 'x')}"
        with progress.step(f"MOM6 with layout {LAYOUTS[1]} on {host.title}"):
            run_model(plan, host, image, other, LAYOUTS[1])
        record["layout"] = {"host": first, "layouts": list(LAYOUTS),
                            **abi.compared_runs(reference, other)}  # fmt: skip
    if mpich_image is not None:
        hosts_ = {name: host for name, (host, _) in planned.items()}
        for name, times in mpich_abi_runs(hosts_, mpich_image, out / "mpich-abi").items():
            hosts[name]["mpich_abi_main_loop_s"] = times
    return record
