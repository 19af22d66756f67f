"""Where a benchmark writes at a centre: its directory of the job below
$CLIMSTACK_BENCH_DIR, the files it reads there (adios2.xml), and, where the site has Lustre
(`lustre:` in its site.yaml), the sweep of stripe settings a comparison asks for: the
site's counts x sizes, or a study's own (STUDY_SWEEP). Lines of a job script, for
climstack.bench.run.jobs."""

from climstack.inputs import sites

#: where benchio's directory goes (default: the directory the job was submitted from)
BENCH_DIR = "CLIMSTACK_BENCH_DIR"

#: ARCHER2's I/O study: stripe counts 1, 2, 4, 8 at 1 MiB, then sizes up to 4000 MiB at 8
STUDY_SWEEP = (
    *((count, "1M") for count in (1, 2, 4, 8)),
    *((8, size) for size in ("2M", "4M", "8M", "1000M", "2000M", "4000M")),
)


def stripe_settings(lustre: dict | None, comparison=None) -> list[tuple[int, str]]:
    """(count, size) of every stripe setting the sweep runs: the comparison's own, else the
    site's counts x sizes, in order; none without Lustre."""
    if not lustre:
        return []
    if comparison is not None and comparison.sweep:
        return list(comparison.sweep)
    return [(c, size) for size in lustre["stripe_sizes"] for c in lustre["stripe_counts"]]


def work_directory(site: sites.Site, comparison, benchmark) -> tuple[list[str], list[str]]:
    """(comment lines, commands) making the directory the benchmark writes in, for one
    that needs a subdirectory there (benchio: benchio_files), the job's working directory."""
    if not benchmark.workdir:
        return [], []
    commands = [
        bench_dir(comparison),
        f'mkdir -p "$bench_dir/{benchmark.workdir}"',
        'cd "$bench_dir"',
    ]
    for name, text in benchmark.files:  # what it reads where it starts (adios2.xml)
        commands += [f"cat > {name} <<'CLIMSTACK_EOF'", *text.splitlines(), "CLIMSTACK_EOF"]
    lustre = site.lustre
    if not comparison.stripes:
        return [], commands
    if not lustre:
        return [
            f"# no Lustre at {site.name} (no lustre: in its site.yaml): {comparison.name} runs "
            "without the stripe sweep, on the file system's default layout"
        ], commands
    settings = stripe_settings(lustre, comparison)
    shown = " ".join(f"{c}:{size}" for c, size in settings)
    comments = [
        f"# Lustre ({lustre['path']}): before each set of runs, `lfs setstripe -c COUNT -S SIZE "
        f"{benchmark.workdir}` in {comparison.name}'s directory, {len(settings)} settings "
        f"(COUNT:SIZE): {shown}; every header says its stripe_count and stripe_size",
    ]
    stop = (
        f'echo "climstack bench: $bench_dir is not on Lustre ({lustre["path"]}): the stripe '
        f"sweep needs it; submit from a directory there or set {BENCH_DIR} to one "
        f'(a site without Lustre: no lustre: in its site.yaml)" >&2; exit 2; }}'
    )
    commands.append(f"lfs getstripe -d {benchmark.workdir} >/dev/null 2>&1 || {{ {stop}")
    return comments, commands


def bench_dir(comparison) -> str:
    """The line setting $bench_dir: the comparison's directory of this job, below
    $CLIMSTACK_BENCH_DIR (default: the directory the job was submitted from)."""
    where = f"${{{BENCH_DIR}:-${{SLURM_SUBMIT_DIR:-$PWD}}}}"
    return f'bench_dir="{where}/{comparison.name}-${{SLURM_JOB_ID:-$$}}"'
