"""`climstack bench SITE --emit`: the centres' job scripts of the field's comparisons (one per
comparison, rendering its run matrix: the modes interleaved, their order rotated per
repeat, the same list the local runner runs), benchio's Lustre stripe sweep where the site
has Lustre (`lustre:` in its site.yaml), and the local site's scripts run for real through a local
Slurm (two virtual nodes on loopback)."""

import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import slurm_cluster
from conftest import PROJECT_ROOT, cpus_alone

from climstack.bench.results import collect
from climstack.bench.run import jobs, matrix, runner, stripes
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.inputs import sites
from climstack.stack import environments, install
from climstack_dev import cray_tree

CLIMSTACK = PROJECT_ROOT / "bin" / "climstack"
IO_LAYERS = {"io-layers-bp4", "io-layers-bp5", "io-layers-hdf5"}
SEEDS = {"mpibench-xpmem", "osu-latency", "osu-allgather", "netcdf-bench", "benchio", "mom6"}
SEEDS |= IO_LAYERS


def bash_n(path: Path) -> None:
    syntax = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    assert syntax.returncode == 0, (path.name, syntax.stderr)


def headers(text: str) -> list[dict[str, str]]:
    """The header lines a script prints (`echo "climstack-bench: ..."`), as key -> value."""
    found = re.findall(r'echo "(climstack-bench: benchmark=[^"]*)"', text)
    return [dict(w.split("=", 1) for w in line.split()[1:]) for line in found]


def runs(text: str) -> list[tuple[str, int, int]]:
    """The runs a script makes, in order: (mode, repeat, place in the repeat's order)."""
    found = re.findall(r"^bench (\S+) (\d+) (\d+)$", text, re.MULTILINE)
    return [(mode, int(repeat), int(order)) for mode, repeat, order in found]


def modes_of(text: str, repeat: int = 1) -> list[str]:
    """The modes of one repeat, in the order they run (the first repeat: the given order)."""
    return list(dict.fromkeys(m for m, r, _ in runs(text) if r == repeat))


@pytest.fixture(scope="module")
def archer2_jobs(tmp_path_factory):
    """`climstack bench archer2 --emit` on a copy of a Cray host tree, as on a login node."""
    tmp = tmp_path_factory.mktemp("archer2")
    root = cray_tree.cray_tree(tmp / "cray")
    out = tmp / "jobs"
    proc = subprocess.run(
        [CLIMSTACK, "bench", "archer2", "--emit", out, "--root", root]
        + ["--image", "/work/me/archer2.sif", "--repeats", "5", "--no-verify"],
        capture_output=True,
        text=True,
        env={**os.environ, "LD_LIBRARY_PATH": "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "--no-verify: no program verified in the image" in proc.stderr  # the centre's image
    return out, {p.stem: p.read_text() for p in out.glob("*.sh")}


def test_archer2_job_scripts_reproduce_the_seed_comparisons(archer2_jobs):
    """One script per seed comparison, valid bash, the plans beside them, one header line
    (site, host, job, start, repeat, order) for the report, the run matrix rendered."""
    out, scripts = archer2_jobs
    assert set(scripts) == SEEDS
    for name, text in scripts.items():
        bash_n(out / f"{name}.sh")
        assert "--mpi=cray_shasta" in text and {r for _, r, _ in runs(text)} == set(range(1, 6))
        (head,) = headers(text)  # one, in the function every run goes through
        assert head["site"] == "archer2" and head["host"] == "$host" and head["job"] == "$job"
        assert head["start"] == "$start" and head["order"] == "$order"
    mpibench = scripts["mpibench-xpmem"]
    assert "#SBATCH --nodes=1 --ntasks=128" in mpibench
    assert modes_of(mpibench) == ["native", "bind-noxpmem", "bind"]
    # the order rotates: native runs first, second and last, not always first
    assert [modes_of(mpibench, r)[0] for r in (1, 2, 3)] == ["native", "bind-noxpmem", "bind"]
    assert f"{image.NOXPMEM}$(readlink -f" in mpibench and "singularity exec" in mpibench
    assert "$(native_prefix mpibench)/bin/mpiBench" in mpibench
    assert "#SBATCH --nodes=2 --ntasks=2" in scripts["osu-latency"]
    assert modes_of(scripts["osu-latency"]) == ["native", "bind", "hybrid"]
    netcdf = scripts["netcdf-bench"]
    assert "-d=200:1024:768:85" in netcdf and "# pending: native-cce" in netcdf
    assert "bench bind-host-netcdf-gnu 1 " in netcdf
    plan = json.loads((out / "plans" / "bind-host-netcdf-gnu" / "plan.json").read_text())
    assert set(plan["families"]) == {"netcdf", "hdf5"}
    # a plan this host cannot make is not emitted; the script says why
    for io in ("netcdf-bench", "benchio"):
        for mode in ("bind-host-netcdf-cray", "hybrid", "fabric"):
            text = scripts[io]
            assert mode in modes_of(text) or f"# not emitted: {mode}:" in text, (io, mode)
    # the copied Cray tree has the libfabric external: fabric's plan is made, and run
    assert json.loads((out / "plans" / "fabric" / "plan.json").read_text())["mode"] == "fabric"
    assert modes_of(netcdf)[-2:] == ["hybrid", "fabric"]
    # the model: each run in a fresh copy of the case prepared beside the scripts, the
    # ranks starting there (in the container too), then every mode against native, each
    # verdict a header line the report reads
    mom6 = scripts["mom6"]
    assert modes_of(mom6) == ["native", "bind", "hybrid", "fabric"]
    assert {h["benchmark"] for h in headers(mom6)} == {"mom6"}
    assert f"case_dir={out / 'cases' / 'mom6'}" in mom6
    assert mom6.count('cp -r "$case_dir" "$run_dir" && cd "$run_dir"') == 4  # per mode
    assert mom6.count('singularity exec "--pwd=$PWD"') == 3
    assert "#override DAYMAX = 1.0" in (out / "cases" / "mom6" / "MOM_override").read_text()
    assert 'compare-runs "$bench_dir/native.r$2" "$bench_dir/$1.r$2"' in mom6
    assert "|| true" not in mom6 and "climstack-bench: bitwise benchmark=mom6" in mom6
    compared = re.findall(r"^compare (\S+) (\d+)$", mom6, re.MULTILINE)
    assert len(compared) == 3 * 5 and ("fabric", "5") in compared


def test_the_local_and_the_emitted_runs_of_a_comparison_are_one_list(tmp_path):
    """The run matrix, rendered twice: `bench local`'s runs of NetCDF-Bench (runner.plan)
    and its emitted job script's are the same list, mode, repeat and place."""
    paths = jobs.emit(sites.get("local"), tmp_path, str(tmp_path / "no-image"), repeats=4, ranks=2,
                      verify=False)  # fmt: skip
    script = next(p for p in paths if p.stem == "netcdf-bench").read_text()
    emitted = runs(script)
    modes = modes_of(script)
    benchmark = [b for b in runner.LOCAL if b.name == "netcdf-bench"]
    local_runs = [(r.mode, r.repeat, r.order) for r in runner.plan(benchmark, modes, 4)]
    assert emitted == local_runs and len(emitted) == 4 * len(modes)
    # and both are the matrix's: over as many repeats as modes, each mode in each place once
    square = matrix.runs([("x", ["a", "b", "c", "d"])], 4)
    assert {(r.mode, r.order) for r in square} == {(m, o) for m in "abcd" for o in range(1, 5)}


def test_archer2_benchio_sweeps_the_lustre_stripe_settings(archer2_jobs):
    """benchio's script: before each set of runs (every mode, rotated) `lfs setstripe`
    with each configured count and size on its directory; every header says the setting."""
    out, scripts = archer2_jobs
    lustre = sites.get("archer2").lustre
    assert lustre["path"] == "/work"
    assert lustre["stripe_counts"] == [1, 4, 8, -1] and lustre["stripe_sizes"] == ["1M", "4M"]
    text = scripts["benchio"]
    settings = [f"{c} {s}" for s in lustre["stripe_sizes"] for c in lustre["stripe_counts"]]
    sets = re.findall(r"^stripe (\S+ \S+)$", text, re.MULTILINE)
    assert sets == settings * 5  # per repeat, every setting in order
    first_set, first_run = text.index("\nstripe 1 1M\n"), text.index("\nbench ")
    assert first_set < first_run  # the setting comes before its set of runs
    function = text[text.index("stripe() {") :]
    assert function.index("rm -rf benchio_files/*") < function.index('lfs setstripe -c "$count"')
    assert text.count('lfs setstripe -c "$count"') == 1  # one call, in the function
    # it checks the directory is on Lustre before any run, naming the fix
    check = text.index("lfs getstripe -d benchio_files")
    assert check < first_run and "CLIMSTACK_BENCH_DIR" in text[check:first_run]
    assert 'mkdir -p "$bench_dir/benchio_files"' in text and 'cd "$bench_dir"' in text
    emitted = [m for m in jobs.IO_MODES if f"# not emitted: {m}:" not in text]
    assert modes_of(text) == emitted
    per_set = len(emitted)
    assert len(runs(text)) == per_set * len(settings) * 5
    (head,) = headers(text)
    assert head["stripe_count"] == "$count" and head["stripe_size"] == "$size"
    assert head["benchmark"] == "benchio" and head["ranks"] == "128"
    failed = re.findall(r'echo "(climstack-bench: failed [^"]*)"', text)
    assert len(failed) == 1 and "stripe_count=$count stripe_size=$size" in failed[0]
    assert '"$(native_prefix benchio)/bin/benchio.x"' in text
    # its ranks start in its directory, in the container too
    exe = 'singularity exec "--pwd=$PWD" /work/me/archer2.sif /opt/views/view/bin/benchio.x'
    assert exe in text
    # netcdf-bench writes where the job runs: no sweep there
    assert "lfs" not in scripts["netcdf-bench"]


def test_archer2_io_layers_sweep_the_studys_stripe_counts_and_sizes(archer2_jobs):
    """The I/O study's comparison: 2048 ranks on 16 nodes, natively (the site
    environment's benchio with ADIOS2) and in the image, each engine's adios2.xml written
    where the job starts, over the study's settings: counts 1-8 at 1 MiB, sizes to 4000 MiB
    at 8 stripes, each before its set of runs."""
    _, scripts = archer2_jobs
    assert set(scripts) >= IO_LAYERS
    for engine in ("bp4", "bp5", "hdf5"):
        text = scripts[f"io-layers-{engine}"]
        assert "#SBATCH --nodes=16 --ntasks=2048" in text
        assert modes_of(text) == ["native", "bind", "hybrid"] or "# not emitted:" in text
        sets = re.findall(r"^stripe (\S+ \S+)$", text, re.MULTILINE)
        study = ["1 1M", "2 1M", "4 1M", "8 1M", "8 2M", "8 4M", "8 8M", "8 1000M", "8 2000M",
                 "8 4000M"]  # fmt: skip
        assert sets == study * 5
        xml = text[
            text.index("cat > adios2.xml <<'CLIMSTACK_EOF'") : text.index("\nCLIMSTACK_EOF")
        ]
        assert f'<engine type="{engine.upper()}"/>' in xml and '<io name="Output">' in xml
        assert text.index('cd "$bench_dir"') < text.index("cat > adios2.xml")
        assert "lfs getstripe -d striped" in text and "rm -rf striped/*" in text
        (head,) = headers(text)
        assert head["benchmark"] == "benchio-adios2" and head["stripe_size"] == "$size"
    bp4 = scripts["io-layers-bp4"]
    native = '"$(native_prefix benchio-adios2)/bin/benchio" 128 128 128 local mpiio hdf5 adios'
    assert native in bp4
    assert "local adios striped" in scripts["io-layers-bp5"]


def test_a_site_without_lustre_runs_benchio_without_the_sweep(tmp_path):
    """The local site has no Lustre: benchio's script never calls lfs and says why."""
    assert sites.get("local").lustre is None
    out = tmp_path / "jobs"
    paths = jobs.emit(sites.get("local"), out, str(tmp_path / "no-image"), repeats=2, ranks=2,
                      verify=False)  # fmt: skip
    assert {p.stem for p in paths} == SEEDS
    for path in paths:
        bash_n(path)
        assert "lfs " not in path.read_text(), path.name
    text = (out / "benchio.sh").read_text()
    assert "# no Lustre at local (no lustre: in its site.yaml): benchio runs without" in text
    assert all("stripe_count" not in h for h in headers(text)) and "\nstripe " not in text
    # a directory of its own below the submit directory, unless CLIMSTACK_BENCH_DIR says
    assert 'bench_dir="${CLIMSTACK_BENCH_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}/benchio-' in text
    # the local scripts keep the local run's sizes, not the centre's 50 GB write
    assert "-d=8:128:128:32" in (out / "netcdf-bench.sh").read_text()
    # and the modes the local run runs: the host has no ADIOS2, so no native I/O layers
    layers = (out / "io-layers-bp4.sh").read_text()
    assert "# no Lustre at local (no lustre: in its site.yaml): io-layers-bp4" in layers
    assert "native" not in modes_of(layers) and "\nstripe " not in layers


def test_emit_writes_the_chosen_modes_only_and_refuses_unknown_ones(tmp_path):
    """--modes with --emit: each script keeps the chosen modes it compares, a comparison
    left with none is not written; an unknown mode is refused before anything is written."""
    root = cray_tree.cray_tree(tmp_path / "cray")
    out = tmp_path / "jobs"
    base = [CLIMSTACK, "bench", "archer2", "--emit", out, "--root", root, "--repeats", "1",
            "--no-verify"]  # fmt: skip
    env = {**os.environ, "LD_LIBRARY_PATH": "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"}
    bad = subprocess.run(base + ["--modes", "native,bnd"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--emit --modes 'native,bnd': unknown mode(s) bnd" in bad.stderr
    assert "fix: comma-separated, from native,bind," in bad.stderr and not out.exists()
    chosen = base + ["--modes", "native,bind-noxpmem"]
    proc = subprocess.run(chosen, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    scripts = {p.stem: p.read_text() for p in out.glob("*.sh")}
    # osu-latency compares native, bind, hybrid: native stays; mpiBench's xpmem pair both
    assert modes_of(scripts["mpibench-xpmem"]) == ["native", "bind-noxpmem"]
    assert {m for text in scripts.values() for m in modes_of(text)} == {"native", "bind-noxpmem"}


def test_lustre_defaults_and_a_bad_stripe_count(tmp_path):
    """`lustre: {path: ...}` alone takes the schema's sweep; a count of 0 (Lustre's
    "default") is refused naming the key and the values it takes."""
    site = tmp_path / "site" / "minimal"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    (site / "site.yaml").write_text(
        "format: 2\nbind: {runtime: apptainer}\nlustre: {path: /scratch}\n"
    )
    lustre = sites.get(str(site)).lustre
    assert lustre == {
        "path": "/scratch",
        "stripe_counts": [1, 4, 8, -1],
        "stripe_sizes": ["1M", "4M"],
    }
    assert stripes.stripe_settings(lustre)[:2] == [(1, "1M"), (4, "1M")]
    bad = tmp_path / "site" / "bad"
    shutil.copytree(PROJECT_ROOT / "site" / "local", bad)
    (bad / "site.yaml").write_text(
        "format: 2\nbind: {runtime: apptainer}\nlustre: {path: /s, stripe_counts: [0]}\n"
    )
    with pytest.raises(ClimstackError) as refused:
        sites.get(str(bad)).lustre
    assert "lustre.stripe_counts.0" in refused.value.message
    assert "-1 for all OSTs" in str(refused.value.fix)


def test_the_report_groups_benchio_by_stripe_setting(tmp_path):
    """Runs whose header carries a stripe setting are compared per setting."""
    body = (
        " Running on            2  process(es)\n"
        " Total amount of data =    256.0       MiB\n"
        " ------\n MPI-IO\n ------\n\n Writing to benchio_files/mpiio.dat\n"
        " avgtime =   0.1      , avgrate =    {rate}       MiB/s\n"
    )
    lines = []
    for count, rate in (("1", "2000.0"), ("-1", "3000.0")):
        for mode in ("native", "bind"):
            lines.append(
                f"climstack-bench: benchmark=benchio mode={mode} ranks=2 nodes=1 site=x "
                f"repeat=1 runtime=none stripe_count={count} stripe_size=4M"
            )
            lines.append(body.format(rate=rate))
    (tmp_path / "benchio.out").write_text("\n".join(lines))
    records, failures, problems = collect.read_paths([tmp_path])
    assert failures == [] and problems == []
    rates = {(r.operation, r.mode): r.value for r in records if r.metric == "rate"}
    assert rates == {
        ("MPI-IO (lfs -c 1 -S 4M)", "native"): 2000.0,
        ("MPI-IO (lfs -c 1 -S 4M)", "bind"): 2000.0,
        ("MPI-IO (lfs -c -1 -S 4M)", "native"): 3000.0,
        ("MPI-IO (lfs -c -1 -S 4M)", "bind"): 3000.0,
    }


# --- for real, through a local Slurm ------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = slurm_cluster.missing_binaries()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian slurm-wlm, munge: bin/setup)")
    with slurm_cluster.started(tmp_path_factory.mktemp("slurm") / "cluster") as instance:
        yield instance


@pytest.fixture(scope="module")
def local_image(archer2_image):
    """The local environment's native builds (a no-op when installed) and the image the
    container modes run, which `make local` built (its programs pass the gate before a
    script is written)."""
    install.install(environments.resolve("local"))
    return archer2_image


def emit_local(jobs_dir: Path, modes: str, local_image: Path) -> Path:
    """`climstack bench local --emit`, one repeat of `modes` on the image."""
    proc = subprocess.run(
        [CLIMSTACK, "bench", "local", "--emit", jobs_dir, "--repeats", "1"]
        + ["--modes", modes, "--image", local_image],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return jobs_dir


@cpus_alone
def test_local_io_job_scripts_run_on_the_local_cluster(cluster, local_image, tmp_path):
    """`climstack bench local --emit`: NetCDF-Bench's and MOM6's scripts, one repeat,
    native and bind, through Slurm; natively they run and parse, the bind runs run or report
    why not, and MOM6's bind run is compared with native's bit for bit. (benchio's script
    runs through Slurm in the stripe sweep's test below; every mode runs in test_bench.py.)"""
    jobs_dir = emit_local(tmp_path / "jobs", "native,bind", local_image)
    code, output = cluster.sbatch_wait(jobs_dir / "netcdf-bench.sh", timeout=300)
    assert code == 0, output[-3000:]
    records, failures, problems = collect.read_paths([jobs_dir / "netcdf-bench.out"])
    emitted = modes_of((jobs_dir / "netcdf-bench.sh").read_text())
    assert emitted == ["native", "bind"]
    assert {(r.site, r.job) for r in records} == {("local", records[0].job)} and records[0].job
    ran = {r.mode for r in records}
    assert "native" in ran and {r.benchmark for r in records} == {"netcdf-bench"}
    assert ran | {f.mode for f in failures} == set(emitted), output[-3000:]
    # a run that failed may leave a partial output ("no results"), nothing else
    assert all("no results" in p.message for p in problems), problems
    native = {r.operation for r in records if r.mode == "native" and r.metric == "rate"}
    assert native == {"write", "read"}, (failures, problems, output[-3000:])
    # the model: a run directory per mode, the main loop read back, each container mode's
    # outputs compared with native's (the local run's own short case)
    code, output = cluster.sbatch_wait(jobs_dir / "mom6.sh", timeout=900)
    assert code == 0, output[-3000:]
    records, failures, _ = collect.read_paths([jobs_dir / "mom6.out"])
    emitted = modes_of((jobs_dir / "mom6.sh").read_text())
    ran = {r.mode for r in records if r.operation == "Main loop"}
    assert "native" in ran and ran | {f.mode for f in failures} == set(emitted)
    assert {r.benchmark for r in records} == {"mom6"}
    # each mode's comparison with native is in the .out, and the report reads it
    checks = collect.read_checks([jobs_dir / "mom6.out"])
    assert {(c.mode, c.verdict) for c in checks} == {
        (m, "bit-identical") for m in ran - {"native"}
    }
    report = subprocess.run(
        [CLIMSTACK, "bench", "report", jobs_dir / "mom6.out", "--out", tmp_path / "r"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert "bit-identical (1 run)" in (tmp_path / "r" / "report.md").read_text()
    assert "#override DAYMAX = 0.125" in (jobs_dir / "cases" / "mom6" / "MOM_override").read_text()


@cpus_alone
def test_the_io_layers_job_runs_on_the_local_cluster_without_lustre(
    cluster, local_image, tmp_path
):
    """The I/O study's script for the local site (no Lustre: the fallback, one setting),
    in bind mode through Slurm: benchio writes through ADIOS2's BP5 engine in the image and
    the report reads the layer."""
    script = emit_local(tmp_path / "jobs", "bind", local_image) / "io-layers-bp5.sh"
    assert "# no Lustre at local" in script.read_text()
    work = tmp_path / "work"
    cluster.env["CLIMSTACK_BENCH_DIR"] = str(work)
    try:
        code, output = cluster.sbatch_wait(script, timeout=300)
    finally:
        cluster.env.pop("CLIMSTACK_BENCH_DIR")
    assert code == 0, output[-3000:]
    records, failures, problems = collect.read_paths([script.with_suffix(".out")])
    assert not failures and not problems, (failures, problems, output[-3000:])
    rates = {(r.operation, r.mode) for r in records if r.metric == "rate"}
    assert rates == {("ADIOS2 BP5", "bind")}
    (directory,) = work.glob("io-layers-bp5-*")
    assert (directory / "adios2.xml").is_file() and (directory / "striped").is_dir()


@cpus_alone
def test_the_stripe_sweep_calls_lfs_before_each_set_of_runs(cluster, local_image, tmp_path):
    """benchio's script for a site with Lustre, run through Slurm. Lustre cannot exist
    here, so a stand-in `lfs` on PATH (this test only) records each call with the number of
    runs the job had started by then: getstripe first, then one setstripe before each set
    of runs (native and hybrid), and every header carries its setting."""
    scope = tmp_path / "site" / "local"  # the local site, with a Lustre
    shutil.copytree(sites.get("local").path, scope)
    with open(scope / "site.yaml", "a") as site_yaml:
        site_yaml.write('lustre: {path: /lustre, stripe_counts: [1, -1], stripe_sizes: ["1M"]}\n')
    site = sites.get(str(scope))
    seed = next(c for c in jobs.SEEDS if c.name == "benchio")
    comparison = replace(seed, ranks=2, modes=("native", "hybrid"))
    plans, failed = jobs.make_plans(site, tmp_path, Path("/"), ["hybrid"])
    reasons = {m: failed[m] for m in comparison.modes if m in failed}
    script = tmp_path / "benchio.sh"
    text = jobs.script(site, comparison, plans, str(local_image), 1, reasons)
    script.write_text(text)
    bash_n(script)
    fake, log, out = tmp_path / "fake-lustre", tmp_path / "lfs.log", script.with_suffix(".out")
    fake.mkdir()
    (fake / "lfs").write_text(
        "#!/bin/sh\n# a stand-in for Lustre's lfs: logs the call and the runs started by then\n"
        f"runs=$(grep -c '^climstack-bench: benchmark=' {out} || true)\n"
        f'echo "$* [$runs runs]" >> {log}\n'
    )
    (fake / "lfs").chmod(0o755)
    given = cluster.env
    cluster.env = {**given, "PATH": f"{fake}:{given['PATH']}"}
    work = tmp_path / "benchio-work"
    cluster.env["CLIMSTACK_BENCH_DIR"] = str(work)
    try:
        code, output = cluster.sbatch_wait(script, timeout=300)
    finally:
        cluster.env = given
    assert code == 0, output[-3000:]
    per_set = len(comparison.modes) - len(reasons)
    assert log.read_text().splitlines() == [
        "getstripe -d benchio_files [0 runs]",
        "setstripe -c 1 -S 1M benchio_files [0 runs]",
        f"setstripe -c -1 -S 1M benchio_files [{per_set} runs]",
    ]
    records, failures, problems = collect.read_paths([out])
    native = {r.operation for r in records if r.mode == "native" and r.metric == "rate"}
    context = (failures, problems, output[-3000:])  # what ran, should a run fail
    assert native == {
        f"{layer} (lfs -c {count} -S 1M)"
        for layer in ("Serial", "MPI-IO", "HDF5", "NetCDF")
        for count in (1, -1)
    }, context
    assert all("no results" in p.message for p in problems), problems
    assert {f.mode for f in failures} <= {"hybrid"}
    assert all(f.reason.startswith("srun-exit-") for f in failures)
    (directory,) = work.glob("benchio-*")
    assert (directory / "benchio_files").is_dir()
