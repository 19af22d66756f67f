"""`climstack parity`: prove by trace that the container loads what a native run loads.

The probe (mpi-probe, MPI_PROBE_MAPS=1) runs twice with the same launcher: natively (a host
build of it) and in the image under the bind plan. Each rank reports the shared objects it
mapped (/proc/self/maps); libfabric (FI_LOG_LEVEL=info) and UCX (UCX_LOG_LEVEL=info) log
the providers they registered and the transports they chose. The report names:
- lost: libraries loaded natively but not in the container, and the providers among them;
- shadowed: libraries the container loaded from the image where the native run loaded the
  host's;
- the libfabric providers and UCX transports of each side.
A lost expected provider (the site's `providers:`, or --expect; by default every provider
the native run loaded) fails with exit 1. The static side of the same question is the
plan's plugin closure (run.plugins): parity is its proof on the running system.
"""

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from climstack.bind import loader
from climstack.bind import network_plugins as plugins
from climstack.bind.plan import Plan
from climstack.check import container_smoke, verify
from climstack.common import process

TRACE_ENV = {"MPI_PROBE_MAPS": "1", "FI_LOG_LEVEL": "info", "UCX_LOG_LEVEL": "info"}
DEFAULT_PROBE = container_smoke.PROBE  # the view's mpi-probe in our images
REGISTERED = re.compile(r"registering provider: (\S+)")
UCX_LANES = re.compile(r"ep_cfg\[\d+\]: (.*)")
UCX_TRANSPORT = re.compile(r"(\w+)/[\w:.-]+")


def key(path: str) -> str:
    """A library's identity across sides: its file name up to the SONAME's major."""
    name = Path(path).name
    match = re.match(r"(.+?\.so(?:\.\d+)?)(?:\.|$)", name)
    return match.group(1) if match else name


@dataclass
class Trace:
    side: str
    returncode: int
    mapped: dict[int, list[str]] = field(default_factory=dict)  # rank -> paths
    providers: list[str] = field(default_factory=list)  # the probe's plugins (rank 0)
    registered: list[str] = field(default_factory=list)  # libfabric providers registered
    transports: list[str] = field(default_factory=list)  # UCX transports of the lanes
    tail: str = ""  # the end of stderr, when the run failed

    def libraries(self) -> dict[str, str]:
        """key -> path, over all ranks."""
        return {key(p): p for paths in self.mapped.values() for p in paths}


def parse(side: str, proc: process.CompletedProcess) -> Trace:
    trace = Trace(side, proc.returncode)
    for line in proc.stdout.splitlines():
        if line.startswith("mapped: "):
            rank, _, path = line[len("mapped: ") :].partition(" ")
            trace.mapped.setdefault(int(rank), []).append(path)
        elif line.startswith("providers: "):
            trace.providers = [p for p in line.split()[1:] if p != "none"]
    log = proc.stdout + proc.stderr
    trace.registered = sorted(set(REGISTERED.findall(log)))
    trace.transports = sorted(
        {t for lanes in UCX_LANES.findall(log) for t in UCX_TRANSPORT.findall(lanes)}
    )
    if proc.returncode or not trace.mapped:
        trace.tail = proc.stderr.strip()[-2000:]
    return trace


@dataclass
class Report:
    native: Trace
    container: Trace
    expected: list[str]  # provider keys or names whose loss fails the check
    lost: list[str] = field(default_factory=list)  # native paths with no container match
    lost_providers: list[str] = field(default_factory=list)
    shadowed: list[str] = field(default_factory=list)  # "image path (native: host path)"
    unlinked: dict[str, list[str]] = field(default_factory=dict)  # provider -> its needs
    # that the plan does not link (why it was lost, when the plan knows)

    @property
    def failed(self) -> list[str]:
        return [p for p in self.lost_providers if not self.expected or _named(p, self.expected)]

    @property
    def ok(self) -> bool:
        return not self.native.returncode and not self.container.returncode and not self.failed


def _named(provider: str, names: list[str]) -> bool:
    return any(plugins.matches(n, provider) for n in names)


def compare(native: Trace, container: Trace, plan: Plan, expected: list[str]) -> Report:
    report = Report(native, container, expected)
    inside = container.libraries()
    host_side = [dst for _, dst in plan.binds]
    for name, path in sorted(native.libraries().items()):
        if name not in inside:
            report.lost.append(path)
        elif name not in loader.GLIBC and not any(
            inside[name] == d or inside[name].startswith(d.rstrip("/") + "/") for d in host_side
        ):
            report.shadowed.append(f"{inside[name]} (native: {path})")
    report.lost_providers = sorted(set(native.providers) - set(container.providers))
    for provider in report.lost_providers:
        for plugin in plan.plugins:
            if plugin["key"] == provider:
                needs = [n for n in plugin["needs"] if n not in plan.links]
                report.unlinked[provider] = sorted(
                    set(report.unlinked.get(provider, [])) | set(needs)
                )
    return report


def render(report: Report) -> str:
    lines = []
    for trace in (report.native, report.container):
        counts = sorted({len(paths) for paths in trace.mapped.values()})
        lines += [
            f"{trace.side}: exit {trace.returncode}, {len(trace.mapped)} ranks, "
            f"{len(trace.libraries())} libraries mapped (per rank: "
            f"{', '.join(map(str, counts)) or '-'})",
            f"  providers loaded: {' '.join(trace.providers) or '-'}",
            f"  libfabric registered: {' '.join(trace.registered) or '-'}",
            f"  UCX transports: {' '.join(trace.transports) or '-'}",
        ]
        if trace.tail:
            lines.append("  stderr: " + trace.tail.replace("\n", "\n    "))
    lines += [f"lost: {path}" for path in report.lost]
    lines += [f"shadowed: {entry}" for entry in report.shadowed]
    for provider in report.failed:
        needs = report.unlinked.get(provider)
        reason = f": its plugin needs {', '.join(needs)}, not in the plan" if needs else ""
        lines.append(f"LOST PROVIDER: {provider}{reason}")
    lines += [
        f"lost provider (not expected): {p}"
        for p in report.lost_providers
        if p not in report.failed
    ]
    lines.append("parity: " + ("ok" if report.ok else "FAILED"))
    return "\n".join(lines)


def run(
    plan: Plan,
    image: Path,
    native: list[str],
    probe: str = DEFAULT_PROBE,
    launcher: list[str] = ("mpiexec", "-n", "2"),
    expected: list[str] | None = None,
    env: dict | None = None,
    timeout: int = 300,
) -> Report:
    """Trace `native` (a host build of the probe) and `probe` in `image`, then compare."""
    env = {**(env or {}), **TRACE_ENV}
    fix = "give --launcher and --native as paths on this host"
    container = verify.run_probe(plan, image, probe, list(launcher), timeout, env)
    native_run = process.run(
        [*launcher, *native],
        "the native probe",
        env={**os.environ, **env},
        timeout=timeout,
        check=False,
        fix=fix,
    )
    chosen = plan.providers if expected is None else expected
    return compare(parse("native", native_run), parse("container", container), plan, list(chosen))
