"""Print, per host MPI, the libraries of the static bind plan against those traced natively
and in the container (`climstack parity`), then what a lost network provider costs.

1. For Debian's MPICH 4.0.2 (ch4:ucx), PyPI's MPICH 3.4.3 (ch4:ofi) and Intel MPI
   (libfabric, I_MPI_FABRICS=ofi): the library files the static plan links, the plugins it
   closed over, the libraries the ranks mapped natively and in ch-run (a rank maps only
   what this machine's hardware lets load), the container's providers, the verdict.
2. IMB-MPI1 PingPong at 8 B and 1 MiB on 2 ranks with Debian's MPICH, UCX's modules
   present vs lost: natively (UCX_MODULE_DIR pointed at an empty directory) and in the
   container (the plan without its `ucx` link). Runs alternate A B A B, REPEAT times;
   medians and the ratio lost/present.
Run: `.venv/bin/python benchmarks/plugin_parity.py [REPEAT]`.
"""

import os
import statistics
import sys
import tempfile
from pathlib import Path

from bind_vs_native import run

from climstack.bind import plan as plans
from climstack.bind import network_plugins
from climstack.check import parity
from climstack.common import process
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

PROBE = "/opt/probe/bin/mpi-probe"
IMB = ["PingPong", "-msglog", "3:20", "-iter", "1000", "-time", "2"]
SIZES = (8, 1 << 20)


def plan_for(prefix, image, directory) -> plans.Plan:
    plan = plans.make(sites.get("local"), out=directory, prefix=prefix, environ={})
    CHARLIECLOUD.prepare_image(plan, image)
    return plan


def parity_table(image: Path, tmp: Path) -> None:
    native = helpers.compile_probe(helpers.mpich("3.4.3"), tmp / "native-343" / "mpi-probe")
    debian_native = helpers.compile_probe(helpers.debian_mpich(), tmp / "native-402" / "probe")
    cases = {
        "Debian MPICH 4.0.2": (helpers.debian_mpich(), None, debian_native, {}),
        "PyPI MPICH 3.4.3": (helpers.mpich("3.4.3"), "3.4.3", native, {}),
        "Intel MPI 2021.18": (helpers.impi(), "impi", native, {"I_MPI_FABRICS": "ofi"}),
    }
    print(
        f"{'host MPI':<20} {'plan':>5} {'plugins':>9} {'native':>7} {'container':>9} "
        f"{'providers (container)':<40} parity"
    )
    for name, (mpi, key, probe, extra) in cases.items():
        prefix = str(mpi.prefix) if key else None
        plan = plan_for(prefix, image, tmp / f"plan-{key}")
        libraries = {e["host"] for e in plan.closure if not network_plugins.identify(e["name"])}
        launcher = [str(mpi.bin / "mpiexec"), "-n", "2"]
        report = parity.run(plan, image, [str(probe)], PROBE, launcher, env=mpi.env(**extra))
        print(
            f"{name:<20} {len(libraries):>5} {len(plan.plugins):>9} "
            f"{len(report.native.libraries()):>7} {len(report.container.libraries()):>9} "
            f"{' '.join(report.container.providers) or '-':<40} "
            f"{'ok' if report.ok else 'FAILED'}"
        )


def lost_provider_cost(image: Path, tmp: Path, repeat: int) -> None:
    plan = plan_for(None, image, tmp / "present")
    lost_plan = plans.make_plan(sites.get("local"), environ={})
    del lost_plan.links["ucx"]
    lost_plan = plans.write(lost_plan, tmp / "lost")
    alias = tmp / "alias"
    alias.mkdir()
    (alias / "libmpi.so.12").symlink_to("/usr/lib/x86_64-linux-gnu/libmpich.so.12")
    empty = tmp / "no-modules"
    empty.mkdir()
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}
    native_env = {**env, "LD_LIBRARY_PATH": str(alias)}
    imb = str(helpers.impi().bin / "IMB-MPI1")
    launcher = ["mpiexec.mpich", "-n", "2"]

    def contained(p):
        return [
            *launcher,
            *runtimes.get("charliecloud").exec_args(
                p, str(image), ["/opt/probe/bin/IMB-MPI1", *IMB]
            ),
        ]

    runs = {
        ("native", "present"): ([*launcher, imb, *IMB], native_env),
        ("native", "lost"): ([*launcher, imb, *IMB], {**native_env, "UCX_MODULE_DIR": str(empty)}),
        ("container", "present"): (contained(plan), env),
        ("container", "lost"): (contained(lost_plan), env),
    }
    samples = {case: [] for case in runs}
    for index in range(repeat):
        for case, (argv, case_env) in runs.items():
            print(f"  run {index + 1}/{repeat}: {case[0]}, UCX modules {case[1]}", file=sys.stderr)
            samples[case].append(run(argv, case_env)["PingPong"])
    print(
        f"\nIMB-MPI1 PingPong, Debian MPICH 4.0.2 (ch4:ucx), 2 ranks, {repeat} alternating "
        f"runs, median t[usec]; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'where':<10} {'bytes':>8} {'present':>9} {'lost':>9} {'lost/present':>13}")
    for where in ("native", "container"):
        for size in SIZES:
            present, lost = (
                statistics.median(s[size] for s in samples[(where, state)])
                for state in ("present", "lost")
            )
            print(f"{where:<10} {size:>8} {present:>9.2f} {lost:>9.2f} {lost / present:>13.2f}")


def main(repeat: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        image = helpers.probe_image_copy(Path(tmp))
        parity_table(image, Path(tmp))
        lost_provider_cost(image, Path(tmp), repeat)


if __name__ == "__main__":
    sys.exit(process.script(main, int(sys.argv[1]) if len(sys.argv) > 1 else 5))
