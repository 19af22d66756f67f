"""`climstack bench report` on outputs as centres and papers produce them (tests/data/bench):
C OSU, OMB-Py, IMB, mpiBench, NetCDF-Bench, benchio and a model's FMS clock table, some
after our header lines, some with a sidecar or --label, excerpts without their banners, an
unknown file. The headline opens report.md, summary.json and the summary plot say the
same, and the HTML report is one file that a strict parser and a real browser (Debian's
chromium) read."""

import json
import shutil
import subprocess
from pathlib import Path

import html5lib
import matplotlib.image
import pytest
from conftest import PROJECT_ROOT

from climstack.bench.report import headline, plots
from climstack.bench.results import collect, formats, headers
from climstack.bench.results.records import Failure, Record

DATA = Path(__file__).parent / "data" / "bench"
CLIMSTACK = PROJECT_ROOT / "bin" / "climstack"
#: the outputs without a header line or sidecar, as a user labels them
LABELS = [
    "omb-py-latency-bind.txt=bind",
    "omb-py-bw-bind.*=bind",
    "container-built.txt=bind",
    "container-noxpmem.txt=bind-noxpmem",
]
PNG = b"\x89PNG\r\n\x1a\n"


def report(*args, cwd=None):
    return subprocess.run(
        [CLIMSTACK, "bench", "report", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The report of every fixture output, as `climstack bench report` writes it."""
    jobs = tmp_path_factory.mktemp("mixed") / "jobs"
    shutil.copytree(DATA, jobs)
    labels = [arg for label in LABELS for arg in ("--label", label)]
    proc = report(jobs, *labels)
    return proc, jobs / "report"


def headline_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """(benchmark, operation) -> the mode cells of report.md's headline table (its first
    column names the batch of runs when there are several)."""
    table = text.split("## Headline\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    head = [cell.strip() for cell in table[0].strip("|").split("|")]
    skip = int(head[0] == "runs")
    rows = {}
    for line in table[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")][skip:]
        rows[(cells[0], cells[1])] = dict(zip(head[4 + skip :], cells[4:]))
    return rows


def test_a_mix_of_formats_gives_headline_detail_summary_plot_and_html(mixed):
    proc, out = mixed
    assert proc.returncode == 3, proc.stderr  # the fabric runs failed; one file left out
    assert (
        "osu fabric repeat ? (local, host unknown, job unknown) failed: no fabric" in proc.stderr
    )
    assert "job-notes.txt:1: output of an unknown format, left out" in proc.stderr
    assert "listed under 'Left out'" in proc.stderr
    for name in ("report.md", "report.html", "summary.json", "records.json", "records.csv"):
        assert (out / name).is_file(), name
    text = (out / "report.md").read_text()
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections[:5] == [
        "## Headline", "## The field's tables", "## Failed runs", "## Left out", "## Details"
    ]  # fmt: skip
    # NetCDF-Bench's write rates meet the guide's five rows (those without runs: "-")
    fields = text[text.index("## The field's tables") : text.index("## Failed runs")]
    assert (
        "| native GNU | native | 1453 |" in fields
        and "| native CCE | native-cce | 1434 | - |" in fields
    )
    assert {"## osu", "## omb-py", "## imb", "## mpibench", "## netcdf-bench", "## benchio"} <= (
        set(sections)
    )
    rows = headline_rows(text)
    benchmarks = {benchmark for benchmark, _ in rows}
    assert benchmarks == {
        "osu",
        "omb-py",
        "imb",
        "mpibench",
        "netcdf-bench",
        "benchio",
        "mom6",  # a model's rows are named by the model, not by its clock table's format
    }
    # three batches (site, host, job), each paired within itself; these outputs do not say
    # their mode order, so the report does not claim they alternated
    assert text.count("whether the runs were interleaved is not recorded") == 3
    assert (
        "| runs | benchmark | operation |" in text
        and "| archer2 · unknown · job unknown |" in text
    )
    # C OSU with header lines, make local's runs on a busy 2-core machine: at 3 repeats the
    # small-message latencies' intervals span 1 (the old range rule called hybrid "2.0x
    # slower" on these runs); the large messages' exclude it
    small = rows[("osu", "latency ≤ 8 KiB")]
    assert small["bind / native"] == "**inconclusive (3 repeats)**: 0.887 [0.362-2.172], n=3"
    assert small["hybrid / native"] == "**inconclusive (3 repeats)**: 1.872 [0.744-4.708], n=3"
    assert small["fabric / native"] == "failed"  # every run failed, with the reason listed
    assert rows[("osu", "latency > 8 KiB")]["hybrid / native"] == (
        "**1.5x faster**: 0.656 [0.498-0.864], n=3"
    )
    assert rows[("osu", "allreduce")]["hybrid / native"].startswith("**1.9x faster**")
    # mpiBench excerpts (sidecars naming the site, --label the modes): one run each, so no
    # interval and no verdict, only the ratio
    assert (
        rows[("mpibench", "Bcast")]["bind / native"] == "**inconclusive (1 repeat)**: 1.016, n=1"
    )
    assert rows[("mpibench", "Bcast")]["bind-noxpmem / native"].endswith(": 1.237, n=1")
    # OMB-Py without header lines; IMB's two repeats disagree (a loaded machine), and its
    # Allreduce goes opposite ways at two sizes: flagged, not averaged away
    assert ("omb-py", "bandwidth") in rows and ("omb-py", "latency > 8 KiB") in rows
    imb = rows[("imb", "Allreduce")]["bind / native"]
    assert imb.startswith("**inconclusive (2 repeats)**")
    assert imb.endswith("; opposite effects: slower at 2048 B, faster at 8 B")
    # the I/O layers and the model
    assert rows[("netcdf-bench", "write rate")]["bind-host-netcdf-gnu / native"] == (
        "**inconclusive (2 repeats)**: 1.001 [0.877-1.144], n=2"
    )
    assert [op for b, op in rows if b == "benchio"] == [
        "Serial rate", "MPI-IO rate", "HDF5 rate", "NetCDF rate"
    ]  # fmt: skip
    assert rows[("mom6", "Total runtime (model)")]["bind / native"] == (
        "**inconclusive (1 repeat)**: 1.008, n=1"
    )
    # the legend knows every mode the centres' scripts emit (it printed "-" for these)
    legend = "| bind-host-netcdf-gnu | bind, plus the host's PrgEnv-gnu NetCDF and HDF5 bound"
    assert legend in text and "| container + host GNU NetCDF |" in text
    left_out = text.split("## Left out\n\n", 1)[1].split("\n\n", 1)[0]
    assert "job-notes.txt` line 1: output of an unknown format" in left_out
    assert "omb-py (OSU micro-benchmarks for Python (OMB-Py))" in left_out
    assert "fms-clocks (a model's FMS clock table (MOM6))" in left_out


def test_summary_json_is_the_headline(mixed):
    _, out = mixed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["baseline"] == "native"
    # in catalogue order: the emitted bind-host-netcdf-gnu is a known mode, not an extra
    modes = ["bind", "bind-noxpmem", "bind-host-netcdf-gnu", "hybrid", "fabric"]
    assert summary["modes"] == modes
    rows = {(r["benchmark"], r["operation"]): r for r in summary["rows"]}
    assert summary["within"] == 0.02 and "t-interval" in summary["method"]
    hybrid = rows[("osu", "latency ≤ 8 KiB")]["modes"]["hybrid"]
    assert hybrid["verdict"] == "inconclusive (3 repeats)" and hybrid["repeats"] == 3
    assert hybrid["low"] <= hybrid["ratio"] <= hybrid["high"] and hybrid["sizes"] == 14
    assert rows[("osu", "latency ≤ 8 KiB")]["sizes"][:3] == [1, 2, 4]
    assert rows[("osu", "latency ≤ 8 KiB")]["modes"]["fabric"]["verdict"] == "failed"
    assert rows[("benchio", "Serial rate")]["modes"]["hybrid"]["verdict"] == "-"
    assert {f["mode"] for f in summary["failures"]} == {"fabric"}
    assert rows[("mpibench", "Alltoall")]["ranks"] == [128]
    assert [p["path"].rsplit("/", 1)[1] for p in summary["left_out"]] == ["job-notes.txt"]
    assert "osu (OSU micro-benchmarks (C))" in summary["left_out"][0]["fix"]


def test_summary_plot_and_the_details_plots(mixed):
    _, out = mixed
    plot = out / "plots" / "summary.png"
    assert plot.read_bytes()[:8] == PNG
    pixels = matplotlib.image.imread(plot)
    assert pixels.shape[0] > 600  # a row per benchmark and operation group
    assert "![time ratio to native per mode and benchmark](plots/summary.png)" in (
        (out / "report.md").read_text()
    )
    names = {p.name for p in (out / "plots").glob("*.png")}
    # a plot per batch: three batches here, each plot named by its own
    local = "local-unknown-unknown"
    assert {f"omb-py-latency-latency-{local}.png", f"osu-latency-latency-{local}.png",
            f"benchio-rate-{local}.png", "mpibench-Bcast-latency-archer2-unknown-unknown.png"
            } <= names  # fmt: skip


def test_html_report_is_one_valid_self_contained_file(mixed):
    _, out = mixed
    page = (out / "report.html").read_text()
    html5lib.HTMLParser(strict=True).parse(page)  # raises on any parse error
    document = html5lib.parse(page, namespaceHTMLElements=False)
    images = document.findall(".//img")
    assert len(images) == len(list((out / "plots").glob("*.png")))
    assert all(img.get("src").startswith("data:image/png;base64,") for img in images)
    assert all(img.get("alt") for img in images)
    assert not [e for e in document.iter() if e.get("href") or e.tag in ("script", "link")]
    tables = document.findall(".//table")
    head = [th.text for th in tables[0].findall(".//th")]
    assert head[:5] == ["runs", "benchmark", "operation", "ranks", "sizes"]  # three batches
    assert document.find(".//h2").text == "Headline"


def chromium(*args) -> subprocess.CompletedProcess:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("needs Debian's chromium (bin/setup installs it)")
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_html_report_renders_in_chromium(mixed, tmp_path):
    """Debian's chromium, headless: the DOM it builds has the tables and the inline plots,
    and its screenshot shows them (the plots' mode colours are nowhere else on the page)."""
    _, out = mixed
    url = (out / "report.html").as_uri()
    dom = chromium("--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h2>Headline</h2>" in dom.stdout and "<strong>1.9x faster</strong>" in dom.stdout
    assert dom.stdout.count('<img src="data:image/png;base64,') == len(
        list((out / "plots").glob("*.png"))
    )
    shot = tmp_path / "report.png"
    proc = chromium(f"--screenshot={shot}", "--window-size=1280,2600", url)
    assert proc.returncode == 0 and shot.read_bytes()[:8] == PNG, proc.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2600, 1280)
    hybrid = plots.colour("hybrid")  # the hybrid mode's markers in the summary plot
    close = (abs(pixels - hybrid) < 0.04).all(axis=-1)
    assert close.sum() > 50, "the summary plot did not render"
    rows = (pixels < 0.5).all(axis=-1).any(axis=1)  # rows of the page with dark text
    assert rows[:300].sum() > 50  # the title and the headline table


@pytest.mark.parametrize(
    "fixture, name, excerpt",
    [
        ("osu-latency.out", "osu", "osu_latency.txt"),
        ("osu-allreduce.out", "osu", "osu_allreduce.txt"),
        ("omb-py-latency-native.txt", "omb-py", "omb-py-latency.txt"),
        ("omb-py-bw-native.txt", "omb-py", "omb-py-bw.txt"),
        ("imb.out", "imb", "imb-excerpt.txt"),
        ("netcdf-bench.out", "netcdf-bench", "netcdf.txt"),
        ("benchio.out", "benchio", "benchio.txt"),
        ("mom6-native.out", "fms-clocks", "mom6.txt"),
    ],
)
def test_an_excerpt_without_its_banner_is_read_by_its_data_lines(fixture, name, excerpt, tmp_path):
    """The first run of each output, pasted without its banner lines (and without our
    header line) after a free-text label, reads as the whole output does."""
    form = formats.FORMATS[name]
    lines = (DATA / fixture).read_text().splitlines()
    first = [n for n, line in enumerate(lines) if line.startswith(headers.HEADER)][:2] or [-1]
    run = lines[first[0] + 1 : first[1] if len(first) > 1 else None]
    (tmp_path / "whole.out").write_text("\n".join(run) + "\n")
    kept = ["Cray built"] + [line for line in run if not form.banner.search(line)]
    assert len(kept) < len(run) + 1
    (tmp_path / excerpt).write_text("\n".join(kept) + "\n")
    assert formats.detect(list(enumerate(kept, 1))) == name
    (tmp_path / f"{excerpt}.yaml").write_text("mode: native\nranks: 2\n")
    whole, _, problems = collect.read_paths([tmp_path / "whole.out"], {"whole.out": "native"})
    assert not problems
    part, _, problems = collect.read_paths([tmp_path / excerpt])
    assert not problems, [str(p) for p in problems]
    assert part and [(r.benchmark, r.operation, r.bytes, r.metric, r.value) for r in part] == [
        (r.benchmark, r.operation, r.bytes, r.metric, r.value) for r in whole
    ]


def test_mpibench_excerpt_reads_as_the_whole_output(tmp_path):
    """The ARCHER2 guide's way: a label line ("Cray built") and mpiBench's rows, no
    START/END lines; the same rows inside a whole output read the same."""
    excerpt = (DATA / "cray-built.txt").read_text()
    whole = "START mpiBench v1.5\n0 : nid001001\n" + excerpt.split("\n", 1)[1] + "END mpiBench\n"
    (tmp_path / "whole.out").write_text(whole)
    records = {}
    for path in (DATA / "cray-built.txt", tmp_path / "whole.out"):
        found, _, problems = collect.read_paths([path], {path.name: "native"})
        assert not problems
        records[path.name] = [(r.operation, r.bytes, r.value, r.ranks) for r in found]
    assert records["cray-built.txt"] == records["whole.out"]
    assert len(records["whole.out"]) == 30 and records["whole.out"][0] == ("Bcast", 0, 2.0774, 128)


def test_omb_py_titles_name_the_programs():
    """OMB-Py (OSU 7.4 python/) titles its tests by the Options name, not as the C ones."""
    titles = {
        "# OMB Python MPI Latency Test": "latency",
        "# OMB-Py MPI Bandwidth Test": "bw",
        "# OMB-Py MPI Bi-Directional Bandwidth Test": "bibw",
        "# OMB Python MPI Multi Latency Test": "multi_lat",
        "# OMB Python MPI Allgather Test": "allgather",
        "# OMB Python MPI Bcast Test": "bcast",
        "# OMB Python MPI Reduce_scatter Test": "reduce_scatter",
        "# OSU MPI All-to-All Personalized Exchange Latency Test v7.4": "alltoall",
        "# OSU MPI Broadcast Latency Test v7.4": "bcast",
        "# OSU MPI Non-blocking Allreduce Latency Test v7.4": "iallreduce",
    }
    for title, operation in titles.items():
        lines = [(1, title), (2, "# Size (B)      Latency (us)"), (3, "8          1.25")]
        found = list(formats.osu(lines, lambda *a: pytest.fail(str(a))))
        assert [m.operation for m in found] == [operation], title


def test_barrier_without_sizes_and_non_blocking_overall_times_read():
    lines = ["# OSU MPI Barrier Latency Test v7.4", "# Avg Latency(us)", "              1.43"]
    found = list(formats.osu(list(enumerate(lines, 1)), lambda *a: pytest.fail(str(a))))
    assert [(m.operation, m.bytes, m.value) for m in found] == [("barrier", None, 1.43)]
    nbc = [
        "# OSU MPI Non-blocking Allreduce Latency Test v7.4",
        "# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait",
        "",
        "# Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)",
        "4                     12.10              6.01              5.90              0.00",
    ]
    assert formats.detect(list(enumerate(nbc[1:], 2))) == "osu"  # without its title, too
    found = list(formats.osu(list(enumerate(nbc, 1)), lambda *a: pytest.fail(str(a))))
    assert [(m.operation, m.bytes, m.metric, m.value) for m in found] == [
        ("iallreduce", 4, "latency", 12.10)
    ]


def without_failures(name: str, to: Path) -> Path:
    """A copy of DATA/name without its failed runs' lines."""
    lines = (DATA / name).read_text().splitlines(keepends=True)
    (to / name).write_text("".join(line for line in lines if " failed " not in line))
    return to / name


def test_exit_status_0_when_everything_is_read(tmp_path):
    without_failures("osu-latency.out", tmp_path)
    shutil.copy(DATA / "imb.out", tmp_path)
    proc = report(tmp_path, "--out", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    assert "## Left out" not in (tmp_path / "r" / "report.md").read_text()


def test_what_cannot_be_read_is_left_out_with_the_fix(tmp_path):
    without_failures("osu-latency.out", tmp_path)
    shutil.copy(DATA / "container-built.txt", tmp_path)  # no header, sidecar or label
    (tmp_path / "binary.log").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "omb.txt").write_text((DATA / "omb-py-bw-native.txt").read_text())
    (tmp_path / "omb.txt.yaml").write_text("mode: native\nnodes: [1, 2]\ncolour: red\n")
    proc = report(tmp_path, "--out", tmp_path / "r")
    assert proc.returncode == 1
    err = proc.stderr
    assert "container-built.txt:1: mpibench output with no mode" in err
    assert "--label container-built.txt=MODE" in err
    assert "binary.log:1: output of an unknown format, left out" in err
    assert "omb.txt.yaml:1: sidecar omb.txt.yaml: unknown key(s) colour; omb.txt left out" in err
    assert "Traceback" not in err
    text = (tmp_path / "r" / "report.md").read_text()
    assert text.count("\n- `") == 3 and "## osu" in text


def test_bad_arguments_exit_2_naming_the_fix(tmp_path):
    shutil.copy(DATA / "cray-built.txt", tmp_path)
    for args, message in (
        (["--label", "cray-built.txt"], "--label cray-built.txt: not FILE=MODE"),
        (["--label", "nothing-*.txt=bind"], "no output file matches nothing-*.txt"),
    ):
        proc = report(tmp_path, *args)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert "fix:" in proc.stderr and "Traceback" not in proc.stderr
    proc = report(tmp_path / "missing")
    assert proc.returncode == 2 and "no such file or directory" in proc.stderr
    assert not (tmp_path / "report").exists()


def test_sidecar_and_label_order_and_repeats_without_headers(tmp_path):
    """A header line wins over --label, --label over the sidecar; outputs without a repeat
    count up per benchmark, mode and operations, so the i-th native pairs the i-th bind."""
    body = (DATA / "omb-py-latency-native.txt").read_text()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (tmp_path / name).write_text(body)
    (tmp_path / "a.txt.yaml").write_text("mode: native\n")
    (tmp_path / "b.txt.yaml").write_text("mode: native\n")
    (tmp_path / "c.txt.yaml").write_text("mode: native\n")  # --label says bind
    (tmp_path / "d.txt").write_text("climstack-bench: mode=hybrid ranks=2\n" + body)
    records, _, problems = collect.read_paths([tmp_path], {"c.txt": "bind", "d.txt": "bind"})
    assert not problems
    runs = sorted({(r.mode, r.repeat, r.ranks) for r in records})
    # ranks: d.txt's header says 2, which the others, saying none, take (fill_ranks)
    assert runs == [("bind", 1, 2), ("hybrid", 1, 2), ("native", 1, 2), ("native", 2, 2)]


def test_ranks_of_a_labelled_excerpt_come_from_its_peers():
    def record(mode, ranks):
        return Record("osu", "latency", 8, ranks, 1, mode, "none", "x", "latency", 1.0, "us", 1)

    filled = collect.fill_ranks([record("native", 2), record("bind", 0)])
    assert [r.ranks for r in filled] == [2, 2]
    mixed = collect.fill_ranks([record("native", 2), record("native", 4), record("bind", 0)])
    assert [r.ranks for r in mixed] == [2, 4, 0]  # ambiguous: left unknown


def test_headline_cells_pair_repeats_and_invert_rates():
    def rec(mode, repeat, value, metric="rate", size=None, operation="write"):
        unit = "MiB/s" if metric == "rate" else "us"
        return Record("netcdf-bench", operation, size, 2, 1, mode, "none", "x", metric, value,
                      unit, repeat)  # fmt: skip

    # repeat 2 of native is a slow outlier, and so is repeat 2 of bind: pairs cancel it
    records = [rec("native", 1, 400), rec("native", 2, 200), rec("bind", 1, 380),
               rec("bind", 2, 190)]  # fmt: skip
    rows = headline.rows(records, [Failure("netcdf-bench", "hybrid", "not in the image", "x")])
    [row] = rows
    assert row.group.name == "write rate"
    bind = row.cells["bind"]
    assert bind.ratio == pytest.approx(400 / 380) and bind.verdict == "5% slower"
    assert bind.low == bind.high == pytest.approx(400 / 380)  # both pairs agree exactly
    assert row.cells["hybrid"].verdict == "failed"
    # latency over sizes: the geometric mean of the per-size ratios
    sized = [rec(m, 1, v, "latency", s, "latency") for m, s, v in
             (("native", 1, 1.0), ("native", 16384, 10.0), ("bind", 1, 2.0),
              ("bind", 16384, 10.0))]  # fmt: skip
    cells = {r.group.name: r.cells["bind"] for r in headline.rows(sized, [])}
    assert cells["latency ≤ 8 KiB"].ratio == 2.0 and cells["latency > 8 KiB"].ratio == 1.0


def test_left_out_lists_a_few_lines_per_file():
    from climstack.bench.report import report
    from climstack.bench.results.records import Problem

    problems = [Problem("a.out", n, "garbled") for n in range(1, 6)]
    items = report._left_out_items(problems + [Problem("b.out", 1, "unknown", "fix it")])
    assert items[3:] == ["`a.out`: 2 more lines left out", "`b.out` line 1: unknown. Fix: fix it"]
