"""What mpi_abi_wrapper costs per MPI call, in ns: the calls a halo exchange makes
(call_cost.c: MPI_Comm_rank, MPI_Type_size, MPI_Irecv + MPI_Isend + MPI_Waitall to itself,
an MPI_Iprobe that finds nothing, a one-rank MPI_Allreduce) in loops on one rank, built
with the host MPI's own mpicc and with MPICH 5.0.2's mpicc_abi, the latter run on the host
MPI through mpi_abi_wrapper (on MPICH 5.0.2 itself: its own standard-ABI layer). Both run
natively, alternating, the order flipped each repeat; per host and call the medians, their
difference and the ratio's interval (bench.report.stats). With the native osu_latency at
1 B of the same hosts, the table gives the floor the per-call cost sets on the 1 B latency
ratio: the four send and receive calls of a round trip each pay it, two per one-way time.
"""

import statistics
from pathlib import Path

from climstack.bench.abi import abi_hosts
from climstack.bench.report import stats
from climstack.common import process, progress
from climstack.errors import ClimstackError, ToolFailure

SOURCE = Path(__file__).with_name("call_cost.c")
#: the hosts priced: MPICH 5.0.2's own standard ABI and the wrapped ones
HOSTS = ("mpich", *abi_hosts.WRAPPED)
#: the call whose added cost a send or a receive pays (per call of the exchange's three)
EXCHANGE = "irecv_isend_waitall"
#: iterations per run in `bench abi` (benchmarks/abi_call_cost.py takes more)
ITERATIONS = 200_000


def builds(host: abi_hosts.Host, work: Path) -> tuple[Path, Path]:
    """(the host's own build, the standard-ABI build by MPICH 5.0.2's mpicc_abi)."""
    own = abi_hosts.compile_c(host, [SOURCE], work / host.name / "own")
    standard = work / "standard" / "call_cost"
    if not standard.is_file():
        standard.parent.mkdir(parents=True, exist_ok=True)
        mpicc_abi = abi_hosts.wheel_prefix("mpich") / "bin" / "mpicc_abi"
        process.run([mpicc_abi, "-O2", "-o", standard, SOURCE], "mpicc_abi call_cost.c")
    return own, standard


def parsed(output: str, what: str) -> dict[str, float | str]:
    """call -> ns per call, from what call_cost.c printed ("call calls ns-per-iteration"),
    and "library" -> the first line of the version of the MPI that ran it."""
    found: dict[str, float | str] = {}
    for line in output.splitlines():
        words = line.split()
        if line.startswith("library: "):
            found["library"] = line.split(": ", 1)[1].strip()
        elif line.startswith("wrong"):
            raise ToolFailure(f"{what}: {line}", fix="run it by hand on that host")
        if len(words) == 3 and words[1].isdigit():
            found[words[0]] = float(words[2]) / int(words[1])
    if EXCHANGE not in found or "library" not in found:
        raise ToolFailure(
            f"{what} printed no timings:\n{output[-1000:]}", fix="run it by hand on that host"
        )
    return found


def run(host: abi_hosts.Host, program: Path, env: dict, iterations: int) -> dict:
    """call -> ns per call, and the library that ran it: one run on one rank."""
    argv = host.launch(1) + [str(program), str(iterations)]
    what = f"{program} on {host.title}"
    return parsed(process.run(argv, what, env=env, timeout=600).stdout, what)


def measure(hosts: list[str], work: Path, repeats: int, iterations=ITERATIONS) -> dict:
    """host -> its route and, per call, the ns per call of each build over `repeats` runs."""
    if repeats < 1 or iterations < 1:
        raise ClimstackError(f"{repeats} repeats of {iterations} iterations", fix="1 or more")
    record = {}
    for name in hosts:
        host = abi_hosts.host(name, visible=(work,))
        with progress.step(f"{host.title}: ns per call, own ABI and standard ABI"):
            own, standard = builds(host, work)
            base = host.environment
            through = dict(base, LD_LIBRARY_PATH=str(abi_hosts.abi_libraries(host, work)))
            if host.wrapper:
                through["MPI_ABI_WRAPPER_LIB"] = f"{host.wrapper}/lib/libmpiwrapper.so"
            times: dict[str, dict[str, list[float]]] = {}
            libraries = {}
            for repeat in range(repeats):
                pairs = [("own", own, base), ("standard", standard, through)]
                for label, program, env in pairs[:: 1 if repeat % 2 else -1]:
                    found = run(host, program, env, iterations)
                    libraries[label] = found.pop("library")
                    for call, ns in found.items():
                        times.setdefault(call, {}).setdefault(label, []).append(ns)
        if libraries["own"] != libraries["standard"]:  # the route missed the host's MPI
            raise ToolFailure(
                f"on {host.title} the standard-ABI build ran on {libraries['standard']!r}, "
                f"the own build on {libraries['own']!r}: it priced another MPI",
                fix="check LD_LIBRARY_PATH and MPI_ABI_WRAPPER_LIB (abi_hosts.abi_libraries)",
            )
        record[name] = {
            "title": host.title,
            "route": host.route,
            "library": libraries["own"],
            "calls": times,
        }
    return record


def added(calls: dict) -> tuple[float, float, stats.Estimate | None]:
    """(own median, standard median, the ratio standard/own) of one call's runs."""
    own, standard = calls["own"], calls["standard"]
    ratio = stats.estimate(s / o for s, o in zip(standard, own))
    return statistics.median(own), statistics.median(standard), ratio


def floor(added_ns: float, latency_us: float) -> float:
    """The 1 B latency ratio the added ns per call alone sets: two calls per one-way time."""
    return 1 + 2 * added_ns / (latency_us * 1000)


def table(record: dict, latency_us: dict | None = None, measured: dict | None = None) -> str:
    """Markdown: ns per call per host and call (own ABI, standard ABI, added, ratio), then
    per host the 1 B latency floor against the measured ratio (given `latency_us`: host ->
    native osu_latency at 1 B per repeat; `measured`: host -> its image/native ratios)."""
    lines = [
        "| host MPI | standard ABI through | call | own ABI ns | standard ABI ns | + ns "
        "| ratio [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in record.values():
        for call, runs in entry["calls"].items():
            mine, theirs, ratio = added(runs)
            interval = f" [{ratio.low:.2f}-{ratio.high:.2f}]" if ratio and ratio.low else ""
            lines.append(
                f"| {entry['title']} | {entry['route']} | {call} | {mine:.1f} | {theirs:.1f} "
                f"| {theirs - mine:+.1f} | {ratio.ratio:.2f}{interval} |"
            )
    repeats = len(next(iter(next(iter(record.values()))["calls"].values()))["own"])
    lines.append(f"\nns per call on one rank, medians of {repeats} alternating runs.")
    if latency_us:
        lines += [
            "",
            "| host MPI | + ns per send or receive | native osu_latency 1 B, us | floor it "
            "sets on the 1 B ratio | measured 1 B ratio |",
            "|---|---|---|---|---|",
        ]
        for name, entry in record.items():
            if name not in latency_us:
                continue
            mine, theirs, _ = added(entry["calls"][EXCHANGE])
            native = statistics.median(latency_us[name])
            seen = (measured or {}).get(name)
            shown = stats.interval_text(stats.estimate(seen)) if seen else "-"
            lines.append(
                f"| {entry['title']} | {theirs - mine:+.1f} | {native:.2f} "
                f"| {floor(theirs - mine, native):.3f} | {shown} |"
            )
        lines.append(
            "\nThe floor: 1 + 2 x (added ns per call) / (native one-way latency); a measured "
            "ratio above it is noise or a cost outside the calls (the loader, the launch)."
        )
    return "\n".join(lines)
