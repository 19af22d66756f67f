"""The bench room on real runs: the local environment's benchmarks (built by Spack from the
offline sources) run on 2 ranks by `climstack bench local` natively and in the image of
`climstack image` in every container mode, parsed into tidy records and reported; Intel's
IMB; bad input (garbled, truncated, unknown, failed runs)."""

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT, cpus_alone

from climstack import setup as climstack_setup
from climstack.bench.report import report
from climstack.bench.results import collect
from climstack.bench.run import catalogue, local, modes, runner
from climstack.bench.results.records import COLUMNS
from climstack.bind import elf
from climstack.check import verify
from climstack.errors import ClimstackError
from climstack.image import image, image_check, sif
from climstack.inputs import sites
from climstack.stack import environments
from climstack.stack.sources import bench_sources, git_sources
from climstack_dev import io_libraries, programs

MODES = tuple(catalogue.names(local=True))
HOST_IO = ("bind-host-netcdf", "bind-host-netcdf-cray")
CDI = "bind-cdi"  # the plan as a CDI spec, under podman

OSU_OPERATIONS = {"latency", "bw", "bibw", "allgather", "bcast", "allreduce", "alltoall"}


@pytest.fixture(scope="module")
def local_run():
    """`climstack bench local --reuse` as `make local` runs it (installs what is missing,
    builds or reuses the image, 3 repeats, every mode; fabric on the local site's libfabric
    external): right after `make local` (CI's order) its report, measured by the same
    code on the same image, build and host MPI (the reuse key); otherwise measured here."""
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "bench", "local", "--reuse"],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = Path(re.search(r"report in (\S+)", proc.stdout).group(1))
    return out, json.loads((out / "records.json").read_text())


@cpus_alone
def test_every_benchmark_runs_and_parses(local_run):
    out, data = local_run
    records, failures = data["records"], data["failures"]
    by, modes_of = {}, {}
    for r in records:
        by.setdefault(r["benchmark"], set()).add(r["operation"])
        modes_of.setdefault(r["benchmark"], set()).add((r["mode"], r["runtime"]))
        # no 0: a clock the case never enters (ALE, KPP) is no measurement, and a value
        # printed as 0.00 (OSU's 1 B bandwidth on a loaded machine) is left out, named
        assert r["value"] > 0 and r["ranks"] == 2, r
        assert r["site"] == "local" and r["repeat"] in (1, 2, 3) and r["order"] >= 1
        assert r["host"] != "unknown" and r["job"] == out.name and r["start"]
    # bind-cdi: under podman, OSU latency and allreduce and MOM6 only
    cdi = {(CDI, "podman")}
    in_image = {(m, "charliecloud") for m in MODES if catalogue.get(m).container and m != CDI}
    host_io = {("bind-host-netcdf", "charliecloud"), ("bind-host-netcdf-cray", "charliecloud")}
    mpi_only = in_image - host_io
    assert modes_of["osu"] == {("native", "none"), *mpi_only, *cdi}
    assert modes_of["mpibench"] == {("native", "none"), *mpi_only}
    # NetCDF-Bench runs in every mode, with the host's GNU and CCE stand-in NetCDF bound in,
    # and natively as the CCE stand-in (clang) built it
    assert modes_of["netcdf-bench"] == {("native", "none"), ("native-cce", "none"), *in_image}
    # the Fortran side too (benchio, MOM6): the image's MPICH has its Fortran bindings; the
    # CCE stand-in builds C only (verify would refuse the image's libnetcdff beside its
    # libnetcdf), so its modes run NetCDF-Bench alone
    fortran = in_image - {("bind-host-netcdf-cray", "charliecloud")}
    assert modes_of["mom6"] == {("native", "none"), *fortran, *cdi}
    # benchio links HDF5 itself: the image's is the host's release (Debian 12's 1.10.8), so
    # verify lets it run on the host's HDF5 bound in
    assert modes_of["benchio"] == {("native", "none"), *fortran}
    # the I/O layers: in the image only (bind, hybrid), the host has no ADIOS2
    layers = {("bind", "charliecloud"), ("hybrid", "charliecloud")}
    assert modes_of["benchio-adios2"] == layers
    assert by["benchio-adios2"] == {"MPI-IO", "HDF5", "ADIOS2 BP4", "ADIOS2 BP5", "ADIOS2 HDF5"}
    assert failures == []
    assert by["osu"] == OSU_OPERATIONS
    assert by["mpibench"] == {"Bcast", "Allreduce", "Alltoall"}
    assert by["netcdf-bench"] == {"write", "read"}
    assert by["benchio"] == {"Serial", "MPI-IO", "HDF5", "NetCDF"}
    assert "Main loop" in by["mom6"]  # MOM6's benchmark case
    latency = [r for r in records if r["operation"] == "latency" and r["repeat"] == 1]
    latency = [r for r in latency if r["mode"] == "native"]
    assert sorted(r["bytes"] for r in latency) == [2**k for k in range(17)]
    assert {r["unit"] for r in records if r["operation"] in ("bw", "bibw")} == {"MB/s"}


@cpus_alone
def test_install_lists_what_bench_local_runs_on(local_run):
    """`climstack install` (make local's native build): already installed, it lists every
    package of the environment with its prefix."""
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "install", "local"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    prefixes = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    for name in ("mom6", "fms", "netcdf-c", "netcdf-fortran", "benchio", "netcdf-bench"):
        assert Path(prefixes[name]).is_dir(), name
    assert prefixes["hdf5"] == "/usr/lib/x86_64-linux-gnu/hdf5/mpich"  # the site's external


@cpus_alone
def test_csv_matches_json_and_the_tidy_columns(local_run):
    out, data = local_run
    with open(out / "records.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == COLUMNS == [
        "benchmark", "operation", "bytes", "ranks", "nodes", "mode", "runtime", "site",
        "metric", "value", "unit", "repeat", "host", "job", "start", "order", "resolution",
        "hung",
    ]  # fmt: skip
    assert len(rows) == len(data["records"])
    assert float(rows[0]["value"]) == data["records"][0]["value"]


@cpus_alone
def test_report_tables_and_plots(local_run):
    out, _ = local_run
    text = (out / "report.md").read_text()

    def columns(modes):
        return " | ".join(modes) + " | " + " | ".join(f"{m} / native" for m in modes[1:])

    # bind-cdi (podman) runs OSU latency and allreduce and MOM6 only
    mpi_only = [m for m in MODES if m not in ("native-cce", *HOST_IO)]
    for benchmark, its in (("osu", mpi_only), ("mpibench", [m for m in mpi_only if m != CDI])):
        head = f"| operation | bytes | ranks | metric | {columns(its)} |"
        assert f"## {benchmark}\n\n{head}" in text
    io = [m for m in MODES if m != CDI]
    assert f"## netcdf-bench\n\n| operation | bytes | ranks | metric | {columns(io)} |" in text
    fortran = [m for m in io if m not in ("native-cce", "bind-host-netcdf-cray")]
    assert f"## benchio\n\n| operation | bytes | ranks | metric | {columns(fortran)} |" in text
    assert "failed in" not in text
    # the field's tables: NetCDF-Bench's five rows and the I/O layers, seed beside ours
    fields = text[text.index("## The field's tables") : text.index("## Details")]
    for row in ("| native GNU | native | 1453 |", "| native CCE | native-cce | 1434 |",
                "| container + host CCE NetCDF | bind-host-netcdf-cray | 1464 |",
                "| ADIOS2 BP4 | 13.3 | 4.12 |", "| MPI-IO | - | - |"):  # fmt: skip
        assert row in fields, (row, fields)
    plots = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert {
        f"osu-{op}-{'bandwidth' if 'bw' in op else 'latency'}.png" for op in OSU_OPERATIONS
    } <= set(plots)
    assert {"benchio-rate.png", "netcdf-bench-rate.png"} <= set(plots)
    for plot in (out / "plots").glob("*.png"):
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the headline first: a row per benchmark and operation group, a column per mode
    assert text.split("\n## ")[1].startswith("Headline\n\n| benchmark | operation |")
    # native-cce runs NetCDF-Bench only: "-" in OSU's row, then bind's verdict
    assert "| osu | latency ≤ 8 KiB | 2 | 1 B-8 KiB (14) | - | **" in text
    serial = next(line for line in text.splitlines() if line.startswith("| benchio | Serial"))
    assert serial.count("| **") == 5 and "failed" not in serial, serial  # bind-host-netcdf too
    # the model's row: its main loop in every mode, each bit-identical to native's
    model = next(line for line in text.splitlines() if line.startswith("| mom6 |"))
    assert "main loop (model)" in model and model.count("bit-identical (3 runs)") == 6, model
    checks = json.loads((out / "records.json").read_text())["bitwise"]
    verdicts = {(c["mode"], c["repeat"]): c["verdict"] for c in checks}
    containers = [m for m in MODES if catalogue.get(m).container and m != "bind-host-netcdf-cray"]
    assert verdicts == {(m, r): "bit-identical" for m in containers for r in (1, 2, 3)}, checks
    assert "runs interleaved" not in text and "the mode order rotated per repeat" in text
    assert "## Failed runs" not in text  # none failed: no section
    assert text.index("## Headline") < text.index("## Details") < text.index("## osu")
    assert "summary.png" in plots and (out / "report.html").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["modes"] == list(MODES[1:])


@cpus_alone
def test_report_from_slurm_outs_with_garbled_and_truncated_files(local_run, tmp_path):
    """A directory of .out files as copied back from a centre: several runs per file, one
    line garbled, one file truncated; both warned with name and line, the rest reported."""
    out, data = local_run
    raw = sorted((out / "raw").glob("osu_latency.*"))
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "slurm-1001.out").write_text("".join(p.read_text() for p in raw))
    lines = raw[0].read_text().splitlines()
    # another job's run (the same run again would collide with slurm-1001's: left out)
    lines[0] = re.sub(r" job=\S+", " job=1002", lines[0])
    garbled_at = next(i for i, line in enumerate(lines) if line.startswith("64 "))
    lines[garbled_at] = "64     0.5x7"
    (jobs / "slurm-1002.out").write_text("\n".join(lines) + "\n")
    (jobs / "slurm-1003.out").write_text("\n".join(lines[:4]) + "\n")  # header + titles only
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "bench", "report", jobs],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr  # lines were left out
    assert (
        f"slurm-1002.out:{garbled_at + 1}: expected 2 numbers, read '64     0.5x7'" in proc.stderr
    )
    assert "slurm-1003.out:4: osu output with no results (truncated?); left out" in proc.stderr
    text = (jobs / "report" / "report.md").read_text()
    assert "## Left out" in text and "slurm-1002.out" in text
    records = json.loads((jobs / "report" / "records.json").read_text())["records"]
    # eighteen runs (three repeats of six modes, bind-cdi's among them) of 17 sizes, then
    # one without 64 B
    assert len(records) == 18 * 17 + 16


def test_unknown_format_is_left_out_naming_the_formats(tmp_path):
    (tmp_path / "slurm-7.out").write_text("hello\nthis is no benchmark\n")
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "bench", "report", tmp_path],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr
    assert "slurm-7.out:1: output of an unknown format, left out" in proc.stderr
    assert "osu (OSU micro-benchmarks (C)); omb-py (" in proc.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Left out" in text and "No results to compare" in text


def test_a_failed_mode_is_reported_failed_with_its_reason(tmp_path):
    env = {**os.environ, "USER": os.environ.get("USER", "root")}
    hybrid = modes.Mode(
        "hybrid",
        "charliecloud",
        lambda p, cwd=None: ["ch-run", "/no/such/image", "--", *p],
        lambda b: f"{image.VIEW}/{b.argv[0]}",
        env,
    )
    bench = [b for b in runner.LOCAL if b.name == "osu_latency"]
    runner.run_all(bench, [hybrid], tmp_path / "run", repeats=1, ranks=2)
    records, failures, problems = collect.read_paths([tmp_path / "run" / "raw"])
    assert records == [] and problems == []
    assert [(f.benchmark, f.mode) for f in failures] == [("osu", "hybrid")]
    assert "exit 1" in failures[0].reason and "/no/such/image" in failures[0].reason
    assert "- **hybrid: failed**: exit 1" in report.markdown(records, failures, problems)
    assert report.markdown(records, failures, problems).count("hybrid: failed") == 1


@cpus_alone
def test_container_modes_run_the_host_or_the_images_mpi(local_run):
    """Each container mode as the comparison launches it, on mpi-probe: bind and
    bind-noxpmem load the host MPI from the plan, hybrid and fabric the image's; the
    bind-noxpmem executable is the bind one without libxpmem.so.0 in DT_NEEDED."""
    image_dir = image.default_destination(local.IMAGE)
    launcher = ["mpiexec", "-n", "2"]
    env = {**os.environ, "USER": os.environ.get("USER", "root")}
    probe = runner.Benchmark("mpi-probe", "mpi-probe", ("bin/mpi-probe",))
    loaded = {}
    for name in (m for m in MODES if catalogue.get(m).container and m not in HOST_IO):
        mode = modes.container(name, image_dir, launcher, 2, env=env)
        program = mode.locate(probe)
        argv = mode.wrap([program])
        assert "--join-ct=2" in argv  # the node's ranks share one ch-run container
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "ranks: 2" in proc.stdout
        loaded[name] = proc.stdout.split("loaded: ")[1].split()[0]
        needed = elf.read(image_check.resolve_in(image_dir, Path(program))).needed
        assert (image_check.XPMEM_SONAME in needed) == (name != "bind-noxpmem"), name
    assert loaded["bind"].startswith("/opt/climstack/bind/lib/") and loaded["bind"] == (
        loaded["bind-noxpmem"]
    )
    assert (
        loaded["hybrid"] == loaded["fabric"] == f"/opt/mpich-{image.WHEEL_MPICH}/lib/libmpi.so.12"
    )


@cpus_alone
def test_fabric_mode_maps_the_hosts_libfabric(local_run):
    """fabric: the image's MPICH over the local site's libfabric external (setup's host
    libfabric); hybrid maps the image's own copy. mpi-probe lists what each rank mapped."""
    image_dir = image.default_destination(local.IMAGE)
    env = {**os.environ, "USER": os.environ.get("USER", "root"), "MPI_PROBE_MAPS": "1"}
    probe = runner.Benchmark("mpi-probe", "mpi-probe", ("bin/mpi-probe",))
    own = f"/opt/mpich-{image.WHEEL_MPICH}/lib/mpich/libfabric.so.1"
    host = str(climstack_setup.libfabric_external()["externals"][0]["prefix"])
    mapped = {}
    for name in ("hybrid", "fabric"):
        mode = modes.container(name, image_dir, ["mpiexec", "-n", "2"], 2, env=env)
        assert not mode.unavailable, mode.unavailable
        proc = subprocess.run(
            mode.wrap([mode.locate(probe)]), capture_output=True, text=True, env=env, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = [line.split() for line in proc.stdout.splitlines() if line.startswith("mapped:")]
        mapped[name] = {path for _, rank, path in lines if "libfabric.so" in path}
    assert mapped["hybrid"] == {own}
    assert len(mapped["fabric"]) == 1 and own not in mapped["fabric"], mapped
    # the plan binds the host's file: same bytes as the external's libfabric.so.1
    (path,) = mapped["fabric"]
    assert path.startswith((host, "/opt/climstack/bind/")), path


def test_bind_mode_under_apptainer_runs_the_sif_on_the_host_mpi():
    """--runtime apptainer: the SIF of the same image (climstack sif), one container per
    rank (so the plan's separate_env is set), the host MPI loaded from the plan."""
    image_dir = image.build(local.IMAGE, image.default_destination(local.IMAGE))
    target = sif.build(local.IMAGE, image_dir.with_suffix(".sif"), image_dir)
    env = {**os.environ, "USER": os.environ.get("USER", "root"), "APPTAINER_NO_HOME": "1"}
    mode = modes.container(
        "bind", image_dir, ["mpiexec", "-n", "2"], 2, "apptainer", str(target), env=env
    )
    argv = mode.wrap([mode.locate(runner.Benchmark("probe", "mpi-probe", ("bin/mpi-probe",)))])
    separate = sites.get("local").bind["separate_env"]
    assert "exec" in argv and str(target) in argv and f"UCX_TLS={separate['UCX_TLS']}" in argv
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ranks: 2" in proc.stdout and "loaded: /opt/climstack/bind/lib/" in proc.stdout


@cpus_alone
def test_modes_that_cannot_run_say_why(local_run, tmp_path):
    image_dir = image.default_destination(local.IMAGE)
    # a libfabric prefix without libfabric: the fabric mode names the fix, every run reports it
    without = modes.container(
        "fabric", image_dir, ["mpiexec", "-n", "2"], 2, fabric_prefix=str(tmp_path)
    )
    assert f"no libfabric.so.1 under {tmp_path}" in without.unavailable
    assert "fix: give the libfabric prefix" in without.unavailable
    bench = [b for b in runner.LOCAL if b.name == "mpibench"]
    runner.run_all(bench, [without], tmp_path, repeats=1, ranks=2)
    _, failures, _ = collect.read_paths([tmp_path / "raw"])
    assert [f.mode for f in failures] == ["fabric"] and "libfabric" in failures[0].reason
    with pytest.raises(ClimstackError, match="unknown mode.*bnid") as refused:
        local.mode_names("native,bnid")
    assert ",".join(MODES) in refused.value.fix


@cpus_alone
def test_a_mismatched_host_netcdf_is_refused_before_it_runs(local_run, tmp_path, monkeypatch):
    """bind-host-netcdf with Debian 11's NetCDF 4.7.4 (libnetcdf.so.18; the image's
    NetCDF-Bench needs libnetcdf.so.22) as the host's: verify refuses it before any run,
    and each run's record says why. verify runs once for the mode's repeats (the same file
    of the same image under the same plan)."""
    image_dir = image.default_destination(local.IMAGE)
    host = {"netcdf": f"{io_libraries.bullseye_host()}/usr", "hdf5": None}
    launcher = ["mpiexec", "-n", "2"]
    mode = modes.container("bind-host-netcdf", image_dir, launcher, 2, host_netcdf=host)
    bench = [b for b in runner.LOCAL if b.name == "netcdf-bench"]
    checked, check = [], verify.check

    def counted(path, *args, **kwargs):  # the real check, counted
        checked.append(path)
        return check(path, *args, **kwargs)

    monkeypatch.setattr(verify, "check", counted)
    runner.run_all(bench, [mode], tmp_path, repeats=2, ranks=2)
    assert not (tmp_path / "work" / "netcdf-bench" / "bench.nc").exists()  # nothing ran
    records, failures, _ = collect.read_paths([tmp_path / "raw"])
    assert records == [] and [f.mode for f in failures] == ["bind-host-netcdf"] * 2
    assert sorted(f.repeat for f in failures) == [1, 2] and len(checked) == 1, checked
    for failure in failures:
        assert "verify refuses" in failure.reason, failure.reason
        assert "SONAME mismatch: libnetcdf" in failure.reason, failure.reason


def test_imb_output_parses(tmp_path):
    """Intel's IMB-MPI1 (PyPI impi-rt) on Intel MPI, 2 ranks."""
    impi = programs.impi()
    proc = subprocess.run(
        [impi.bin / "mpiexec", "-n", "2", impi.bin / "IMB-MPI1", "PingPong", "Allgather",
         "-msglog", "0:4", "-npmin", "2"],
        capture_output=True, text=True, env=impi.env(), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "imb.out").write_text(proc.stdout)  # no header line: --label gives the mode
    records, failures, problems = collect.read_paths([tmp_path / "imb.out"], {"imb.out": "bind"})
    assert not failures and not problems
    pingpong = [r for r in records if r.operation == "PingPong" and r.metric == "latency"]
    assert [r.bytes for r in pingpong] == [0, 1, 2, 4, 8, 16]
    assert all(r.ranks == 2 and r.benchmark == "imb" and r.value > 0 for r in pingpong)
    assert {r.operation for r in records} == {"PingPong", "Allgather"}


def test_sources_are_offline_routes_not_vendored(tmp_path, monkeypatch):
    """Nothing fetched is tracked; an override maps the upstream URL through git's
    insteadOf, so a filled mirror holds each archive where Spack looks for the upstream URL
    (here copied from the site's mirror, which already has them)."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True
    ).stdout
    assert not [p for p in tracked.split() if p.endswith((".tar.gz", ".tar.xz", ".tgz"))]
    monkeypatch.setenv("CLIMSTACK_MPIBENCH_GIT", str(tmp_path / "no-such-clone"))
    env = git_sources.git_environ()
    assert env["GIT_CONFIG_VALUE_0"] == "https://github.com/LLNL/mpiBench.git"
    assert env["GIT_CONFIG_KEY_0"] == f"url.{tmp_path / 'no-such-clone'}.insteadOf"
    bench_sources.fill_git(environments.resolve("local"), tmp_path / "mirror")
    digest = tmp_path / "mirror" / "_source-cache" / "git" / "LLNL" / "mpiBench.git"
    assert [p.name for p in digest.iterdir()] == [
        "4c855b8d4d192b67dff1fbc37ec4bc82333f3c0b.tar.gz"
    ]
    osu = tmp_path / "mirror" / "_source-cache" / "git" / "sherrywong1220"
    assert list(osu.rglob("bed60f564c2908a6123315f49f6dd0c0ff5440a3.tar.gz"))


@cpus_alone
def test_a_header_that_does_not_read_leaves_its_run_out(local_run, tmp_path):
    out, _ = local_run
    real = (out / "raw" / "mpibench.native.r1.out").read_text().replace("ranks=2", "ranks=two")
    (tmp_path / "slurm-9.out").write_text(real)
    records, _, problems = collect.read_paths([tmp_path])
    assert records == []
    assert [str(p) for p in problems] == [
        f"{tmp_path / 'slurm-9.out'}:1: header ranks='two' is no count; run left out"
    ]
