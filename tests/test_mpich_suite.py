"""MPICH's own test suite (repo/packages/mpich-testsuite, climstack.bench.suite): its smoke
slice (33 C tests of at most 4 ranks: point-to-point, collectives, datatypes, communicators,
one-sided, attributes; 10 Fortran ones through mpif.h and `use mpi`, since Debian's MPICH
has Fortran) built by Spack against Debian's MPICH, run by MPICH's runner natively and in
the ARCHER2-style image through the bind plan, judged both ways against the expected
failures; and a route that loses the plan is caught test by test."""

import json
import os
import re
import subprocess
from dataclasses import replace

import pytest
from conftest import PROJECT_ROOT

from climstack.bench import host_builds
from climstack.bench.abi.abi import VIEW
from climstack.bench.suite import command, judged, suite_builds, suite_lanes, suite_run
from climstack.bench.suite.suite_run import Outcome
from climstack.bind import elf
from climstack.errors import ClimstackError, ToolFailure
from climstack.image import image
from climstack.launch.runtimes.charliecloud import HERE

HOST = "debian-mpich"  # the local site's host MPI
RECORDS = PROJECT_ROOT / "docs" / "records"


@pytest.fixture(scope="module")
def suite():
    """The smoke slice's install against Debian's MPICH (built once per set of inputs)."""
    return suite_builds.prefixes("smoke", [HOST])[HOST]


@pytest.fixture(scope="module")
def image_dir():
    return image.build(command.IMAGE, image.default_destination(command.IMAGE))


def test_the_slice_is_built_against_the_host_mpi_with_a_runpath(suite):
    """Each test links the MPI by RUNPATH (a bind plan's LD_LIBRARY_PATH wins over it);
    the runner and the testlists are installed beside them."""
    programs = sorted(
        p for p in suite.glob("*/*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"
    )
    assert len(programs) == 33
    info = elf.read(programs[0])
    assert "libmpich.so.12" in info.needed and info.runpath and not info.rpath
    listed = (suite / "coll" / "testlist").read_text().split()
    assert "allred2" in listed and "allred" not in listed  # the slice's testlist alone
    # the Fortran ones: MPICH's Fortran library, which the bind plan swaps too
    fortran = sorted(p for p in suite.glob("f*/*/*") if p.is_file() and p.name != "testlist")
    assert [p.relative_to(suite).parts[0] for p in fortran] == ["f77"] * 5 + ["f90"] * 5
    info = elf.read(suite / "f90" / "pt2pt" / "isendf90")
    assert "libmpichfort.so.12" in info.needed and not info.rpath
    assert (suite / "testlist").read_text().split()[-2:] == ["f77", "f90"]
    assert (suite / "f77" / "testlist").read_text().split() == [
        "pt2pt", "coll", "datatype", "rma", "attr"
    ]  # fmt: skip


def test_the_suite_passes_natively_and_through_the_bind_plan(image_dir, tmp_path):
    """`climstack bench suite`: every test of the slice, C and Fortran, passes on Debian's
    MPICH natively and in the image under the bind plan, as expected.yaml says (no failure
    listed)."""
    out = tmp_path / "report"
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "bench", "suite", "--hosts", HOST,
         "--routes", "native,bind", "--image", image_dir, "--out", out],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lanes = {
        (lane["host"], lane["route"]): lane
        for lane in json.loads((out / "suite.json").read_text())["lanes"]
    }
    assert set(lanes) == {(HOST, "native"), (HOST, "bind")}
    for lane in lanes.values():
        assert len(lane["outcomes"]) == 43 and all(o["passed"] for o in lane["outcomes"])
    assert "| Debian's MPICH 4.0.2 | bind | 43 | 43 | 0 | 0 | 0 | 0 | 0 |" in proc.stdout
    ran = [o["test"] for o in lanes[(HOST, "bind")]["outcomes"]]
    assert "f77/rma/winfencef 4" in ran and "f90/pt2pt/isendf90 2" in ran
    assert [o["test"] for o in lanes[(HOST, "bind")]["outcomes"]][:2] == [
        "pt2pt/sendrecv2 2",
        "pt2pt/sendall 4",
    ]


def test_the_standard_abi_suite_passes_natively_and_through_the_bind_plan(abi_image, tmp_path):
    """The MPI-5 standard ABI: the slice built once by MPICH 5.0.2's mpicc_abi (its programs
    link libmpi_abi.so.1; mprobe, which calls the Fortran handle conversions the ABI's C
    header lacks, is not built and is counted so), run on MPICH 5.0.2 natively and in
    containers/mpi-abi through its bind plan: one container per rank, as runtests starts
    them (MPICH's own CMA path between user namespaces is what the plan switches off)."""
    programs = [p for p in suite_builds.standard_prefix().glob("*/*") if p.name == "allred2"]
    assert elf.read(programs[0]).needed[0] == "libmpi_abi.so.1"
    out = tmp_path / "report"
    proc = subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "bench", "suite", "--hosts", "mpich",
         "--routes", "native-abi,bind-abi", "--abi-image", abi_image, "--out", out],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| MPICH 5.0.2 | bind-abi | 32 | 32 | 0 | 0 | 0 | 1 | 0 |" in proc.stdout
    # each rank's libraries: the plan's links, then the image's own (its %environment's),
    # where a program built outside the image (mpif's Fortran tests) finds libmpif.so.1
    made = suite_lanes.lane("mpich", "bind-abi", "smoke", tmp_path / "lane", abi_image)
    [path] = re.findall(r"--set-env=LD_LIBRARY_PATH=(\S+)", made.wrapper)
    *links, last = path.split(":")
    assert links and last == suite_lanes.IMAGE_LIBRARIES == "/opt/views/view/lib"
    view = os.readlink(abi_image / VIEW.lstrip("/"))  # links within the image: absolute
    assert os.path.lexists(abi_image / view.lstrip("/") / "lib" / elf.MPIF_SONAME)


def test_the_standard_abis_fortran_is_built_by_mpif_and_leaves_the_other_builds_alone():
    """Fortran over the standard ABI: mpif's mpifort over MPICH 5.0.2's `+abi` (the overlay
    recipes of the MPI-5 image), so a lane exists on every host of that ABI; the C builds'
    environments keep their manifests, so their cached builds stay."""
    fortran = suite_builds.builds("fortran", suite_builds.STANDARD).manifest()["spack"]
    [root] = fortran["specs"]
    assert root.startswith("mpich-testsuite tests=fortran abi=standard +fortran ^mpif ")
    assert fortran["packages"]["mpi"] == {"require": ["mpif"]}
    [external] = fortran["packages"]["mpich"]["externals"]
    assert "+abi" in external["spec"].split() and not fortran["packages"]["mpich"]["buildable"]
    assert fortran["repos"]["climstack_mpi_abi"] == str(suite_builds.ABI_REPO)
    for tests in ("smoke", "all"):
        other = suite_builds.builds(tests, suite_builds.STANDARD).manifest()["spack"]
        assert list(other["repos"]) == ["climstack"] and "mpi" not in other["packages"]
    assert suite_lanes.hosts_of("bind-abi", "fortran") == suite_lanes.STANDARD_ABI_HOSTS


def test_a_build_is_found_by_the_host_mpi_under_its_mpi():
    """Which host MPI a root was built against: its `mpi` itself, or the MPI that mpif (its
    `mpi`) is built over; a lock without one of the hosts is refused."""

    def node(name, version, *deps):
        return {"name": name, "version": version, "dependencies": [{"hash": d} for d in deps]}

    lock = {
        "concrete_specs": {
            "suite": node("mpich-testsuite", "4.0.2.debian", "perl", "mpif"),
            "perl": node("perl", "5.36.0"),
            "mpif": node("mpif", "1.0.0", "mpich"),
            "mpich": node("mpich", "5.0.2"),
        }
    }
    assert host_builds._host_of(lock, "suite", ("mpich-3.4.3", "mpich-5")) == "mpich-5"
    with pytest.raises(ToolFailure, match="no host MPI of mpich-3.4.3 under mpich-testsuite"):
        host_builds._host_of(lock, "suite", ("mpich-3.4.3",))


def test_a_route_without_the_plan_fails_test_by_test(suite, image_dir, tmp_path):
    """The negative control: ranks in the image without the plan (no host MPI bound in)
    cannot load libmpich: every test fails, each named, and the judgement says so."""
    bare = f'ch-run "--bind=$PWD:{HERE}" "--cd={HERE}" {image_dir} --'
    mpiexec = suite_lanes.lane(HOST, "native", "smoke", tmp_path, None).mpiexec
    outcomes = suite_run.run(suite, mpiexec, tmp_path / "bare", bare)
    assert len(outcomes) == 43 and not any(o.passed for o in outcomes)
    assert "libmpich.so.12" in outcomes[0].output
    fortran = next(o for o in outcomes if o.test.startswith("f90/pt2pt/"))
    assert "libmpichfort.so.12" in fortran.output
    native = judged.Lane(HOST, "native", [Outcome(o.test, True, 0.1) for o in outcomes], {})
    lane = judged.Lane(HOST, "bind", outcomes, {})
    assert not lane.ok and len(lane.failed) == 43
    assert len(judged.container_only([native, lane])) == 43


def test_expected_failures_are_gated_both_ways(tmp_path):
    """A listed failure that passes is as unexpected as an unlisted one that fails; every
    listed failure needs its reason, and a lane without a list is refused."""
    outcomes = [Outcome("rma/test1 2", True, 0.2), Outcome("coll/coll4 4", False, 9.0, "x")]
    lane = judged.Lane(HOST, "bind", outcomes, {"rma/test1 2": "said to fail"})
    assert lane.unexpected_passes == ["rma/test1 2"] and lane.failed == ["coll/coll4 4"]
    assert not lane.ok
    listed = judged.Lane(HOST, "bind", outcomes[1:], {"coll/coll4 4": "a known bug"})
    assert listed.ok and listed.expected_failures == ["coll/coll4 4"]
    marked = [Outcome("errors/coll/ireducelength 4 xfail=ticket3655", False, 1.0, "x"),
              Outcome("errors/coll/iscatterlength 4 xfail=ticket3655", True, 1.0)]  # fmt: skip
    by_mpich = judged.Lane(HOST, "bind", marked, {})  # MPICH's testlist expects them to fail
    assert by_mpich.ok and by_mpich.expected_failures == [marked[0].test]
    # a pattern lists every test it matches: each must fail
    runs = [Outcome("part/parrived 2 arg=-spart=8", False, 1.0, "x"),
            Outcome("part/no_start 2", False, 1.0, "x"),
            Outcome("pt2pt/sendall 4", True, 1.0)]  # fmt: skip
    by_pattern = judged.Lane(HOST, "bind", runs, {"part/*": "MPI-4's partitioned calls"})
    assert by_pattern.ok and by_pattern.expected_failures == [r.test for r in runs[:2]]
    runs[1] = Outcome("part/no_start 2", True, 1.0)
    by_pattern = judged.Lane(HOST, "bind", runs, {"part/*": "MPI-4's partitioned calls"})
    assert by_pattern.unexpected_passes == ["part/no_start 2"] and not by_pattern.ok
    # an intermittent test (its own race, measured) is expected to fail, and may pass; in
    # the image alone it is a container-only failure with a named cause, not an unexplained
    racy = {"pt2pt/irsendf90 2": f"{judged.INTERMITTENT} the test's completion order"}
    native = judged.Lane(HOST, "native", [Outcome("pt2pt/irsendf90 2", True, 1.0)], racy)
    bind = judged.Lane(HOST, "bind", [Outcome("pt2pt/irsendf90 2", False, 1.0, "x")], racy)
    assert native.ok and bind.ok and bind.expected_failures == ["pt2pt/irsendf90 2"]
    assert judged.container_only([native, bind]) == [(HOST, "bind", "pt2pt/irsendf90 2")]
    assert not judged.unexplained([native, bind])
    unnamed = judged.Lane(HOST, "bind", bind.outcomes, {})
    assert judged.unexplained([native, unnamed]) == [(HOST, "bind", "pt2pt/irsendf90 2")]
    # a stop at the time limit in the image is the machine's if the native run was already
    # near it (3 or 4 ranks on 2 cores), a hang of ours if it was quick
    stopped = Outcome("rma/get_accumulate_double_derived 4", False, 60.4,
                      "[mpiexec@vm] APPLICATION TIMED OUT, TIMEOUT = 60s")  # fmt: skip
    for seconds, cause in ((59.3, "at its time limit: natively 59.3 s of 60 s"), (9.0, "")):
        slow = judged.Lane(HOST, "native", [replace(stopped, passed=True, seconds=seconds)], {})
        image = judged.Lane(HOST, "bind", [stopped], {})
        assert judged.causes([slow, image]) == {(HOST, "bind", stopped.test): cause}
    assert suite_run.time_limit("comm/ctxsplit 4 timeLimit=300") == 300
    lists = tmp_path / "expected.yaml"
    lists.write_text("debian-mpich:\n  bind:\n    rma/test1 2: ''\n")
    with pytest.raises(ClimstackError, match="without a reason"):
        judged.expected(HOST, "bind", lists)
    with pytest.raises(ClimstackError, match="no list for host debian-mpich, route native"):
        judged.expected(HOST, "native", lists)
    assert judged.expected(HOST, "bind") == {}  # the committed list: every test passes


def test_the_runner_names_a_test_as_its_testlist_does(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase name="3 - ./coll/allred2 4  " time="1.5">'
        '<failure message="Timeout">hung</failure></testcase>'
        '<testcase name="4 - ./rma/test1 2  " time="0.2"></testcase></testsuite></testsuites>'
    )
    assert suite_run.read_junit(junit) == [
        Outcome("coll/allred2 4", False, 1.5, "hung"),
        Outcome("rma/test1 2", True, 0.2),
    ]
    # runtests copies a test's output as it is: Open MPI's abort message ends in a NUL,
    # which XML cannot hold; it is read as its escape (and a stray byte as its own)
    junit.write_bytes(
        b'<testsuites><testsuite><testcase name="5 - ./errors/coll/noalias 2  " time="1.2">'
        b"<failure><![CDATA[## calling abort\n## \x00\x1b \xff]]></failure></testcase>"
        b"</testsuite></testsuites>"
    )
    assert suite_run.read_junit(junit)[0].output == "## calling abort\n## \\x00\\x1b \\xff"


def test_a_run_lists_each_test_once_with_no_more_ranks_than_it_has(tmp_path):
    """runtests would run a test of 10 ranks on -maxnp's 4 (and it fails, asking for 10):
    such tests are left out and counted, as are those the MPI could not compile; a line
    naming a directory is that directory's list."""
    (tmp_path / "testlist").write_text("coll\n# rma\n")
    (tmp_path / "coll" / "sub").mkdir(parents=True)
    (tmp_path / "coll" / "testlist").write_text("allred 4\nbig 10\nnew_in_mpi4 2\nsub\n")
    (tmp_path / "coll" / "sub" / "testlist").write_text("one\n")
    for program in ("coll/allred", "coll/big", "coll/sub/one"):
        (tmp_path / program).write_text("")
    plan = suite_run.planned(tmp_path)
    assert plan.lines == ["coll/allred 4", "coll/sub/one"]
    assert plan.too_many_ranks == ["coll/big 10"] and plan.not_built == ["coll/new_in_mpi4 2"]
    reported = [Outcome("allred 4", True, 1.0), Outcome("coll/sub/one", False, 0.1, "x")]
    assert [o.test for o in suite_run.named(reported, plan.lines)] == plan.lines
    with pytest.raises(ClimstackError, match="the list does not hold next"):
        suite_run.named([Outcome("other 2", True, 1.0)], plan.lines)


def test_shards_split_every_list_and_their_records_merge_into_one_report(tmp_path):
    """`--shard K/N` takes every N-th test from the K-th (of the tests run, the ones left
    out and the ones not built alike), so the shards together are the slice, each once;
    `--report` judges the shards' records as one run, and refuses a mixture of slices."""
    plan = suite_run.Planned([f"coll/t{i} 2" for i in range(7)], ["coll/big 10"], ["a/x 2"])
    shards = [plan.shard(k, 3) for k in (1, 2, 3)]
    assert shards[1].lines == ["coll/t1 2", "coll/t4 2"]
    for part in ("lines", "too_many_ranks", "not_built"):
        together = sorted(t for s in shards for t in getattr(s, part))
        assert together == sorted(getattr(plan, part))
    paths = []
    for k, shard in enumerate(shards, start=1):
        outcomes = [Outcome(t, t != "coll/t4 2", 1.0) for t in shard.lines]
        lane = judged.Lane(HOST, "native", outcomes, {}, len(shard.not_built),
                           len(shard.too_many_ranks), "Debian's MPICH 4.0.2")  # fmt: skip
        paths.append(tmp_path / f"{k}.json")
        paths[-1].write_text(json.dumps(command.record([lane], "all", (k, 3))))
    lanes, what = command.merged(paths)
    assert what == "all, shards 1,2,3 of 3" and len(lanes) == 1
    assert lanes[0].passed == 6 and lanes[0].failed == ["coll/t4 2"] and not lanes[0].ok
    assert (lanes[0].not_built, lanes[0].too_many_ranks) == (1, 1)
    proc = subprocess.run([PROJECT_ROOT / "bin" / "climstack", "bench", "suite", "--report",
                           *paths], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 1 and "| 7 | 6 | 1 | 0 | 0 | 1 | 1 |" in proc.stdout, proc.stdout
    other = tmp_path / "smoke.json"
    other.write_text(json.dumps(command.record([lanes[0]], "smoke")))
    with pytest.raises(ClimstackError, match="different slices"):
        command.merged([paths[0], other])
    with pytest.raises(ClimstackError, match="repeated shards"):
        command.merged([paths[0], paths[0]])
    bad = subprocess.run([PROJECT_ROOT / "bin" / "climstack", "bench", "suite", "--shard",
                          "4/3"], capture_output=True, text=True)  # fmt: skip
    assert bad.returncode != 0 and "--shard 4/3: not K/N" in bad.stderr


def test_a_record_keeps_both_ends_of_a_long_output():
    """A failure that prints thousands of lines (isendrecv_replace: one per element) is
    kept by its first and last characters, with the count left out between them."""
    long = "error in MPI_Irecv\n" + "buf mismatch\n" * 5000 + "APPLICATION TIMED OUT\n"
    kept = suite_run.kept(long)
    assert kept.startswith("error in MPI_Irecv") and kept.endswith("APPLICATION TIMED OUT\n")
    assert f"[... {len(long) - 2 * suite_run.KEPT_ENDS} characters left out ...]" in kept
    assert Outcome("x 1", False, 1.0, kept).timed_out and suite_run.kept("short") == "short"


def test_a_failure_at_the_time_limit_is_named_as_such():
    """A test Hydra stopped at its limit (a hang, or too slow on 2 cores) is marked in the
    report apart from one that printed a wrong result; both stay unexpected."""
    stopped = "## [mpiexec@vm] APPLICATION TIMED OUT, TIMEOUT = 60s\n"
    outcomes = [Outcome("rma/put_flush_get 3", False, 60.4, stopped),
                Outcome("rma/get_acc_local 1", False, 0.1, "Found 1 errors")]  # fmt: skip
    lane = judged.Lane(HOST, "native", outcomes, {}, title="Debian's MPICH 4.0.2")
    report = command.markdown([lane], "all")
    assert "- failed: `rma/put_flush_get 3` (timed out)" in report
    assert "- failed: `rma/get_acc_local 1`\n" in report
    assert not lane.ok
    # Hydra's words can be lost with the ranks it kills (MPICH 3.4.3, "No Errors" printed,
    # exit 255 at 60.6 s): a failure at the limit is a stop; a quick one or a pass is not
    silent = Outcome("rma/get_accumulate_int_derived 4", False, 60.6, "## No Errors")
    assert silent.timed_out
    assert not replace(silent, seconds=59.0).timed_out
    assert not replace(silent, passed=True).timed_out
    assert not replace(silent, test="comm/ctxsplit 4 timeLimit=300").timed_out


@pytest.mark.parametrize(
    "records",
    [  # each committed run: one record, or a directory of one run's shards
        pytest.param(
            sorted(path.glob("shard-*.json")) if path.is_dir() else [path],
            id=path.name.removesuffix(".json"),
        )
        for path in sorted(RECORDS.glob("suite-*"))
    ],
)
def test_the_pages_suite_tables_are_what_the_committed_records_print(records):
    """docs/benchmarks.md shows each measured lane's row as `bench suite --report` prints it
    from the committed records, judged against today's expected.yaml: a change of the
    lists or of the judgement that moves a number shows here."""
    lanes, what = command.merged(records)
    rows = [line for line in command.markdown(lanes, what).splitlines() if line.startswith("| ")]
    page = [
        line.strip() for line in (PROJECT_ROOT / "docs" / "benchmarks.md").read_text().split("\n")
    ]
    assert rows[0].startswith("| host MPI |") and len(rows) == 1 + len(lanes)
    for row in rows[1:]:  # past the header (its rule, |---|, is not a "| " line)
        assert row in page, f"docs/benchmarks.md lacks {row}"
    assert not judged.unexplained(lanes)  # each container-only failure has its named cause
