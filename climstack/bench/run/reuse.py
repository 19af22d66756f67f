"""A local comparison's report reused while nothing it measures has changed (`bench local
--reuse`, what a warm `make local` runs): the key digests the image's inputs, the native
environment's lockfile, the host's MPI library, the site's site.yaml (the plans the modes
run on), the models' cases (their inputs and settings), the harness (the climstack package)
and the arguments; each finished report directory keeps its key and exit status. `climstack
bench local` without --reuse always measures again."""

from pathlib import Path

from climstack import pins
from climstack.bench.model import cases
from climstack.bench.run import runner
from climstack.bench.run.local import CCE_ENV
from climstack.bind import discover, loader
from climstack.common import atomic, stamp
from climstack.image import image
from climstack.inputs import sites

KEY_FILE = "measured.key"
STATUS_FILE = "exit-status"
#: what a reused report is made of: a report whose files are gone is measured again
KEPT = ("report.md", "raw")


def key(
    env_dir: Path,
    image_name: str,
    image_dir: Path | None,
    repeats: int,
    ranks: int,
    modes: str | None,
    runtime: str,
    fabric_prefix: str | None,
    model_only: bool = False,
) -> str:
    """What the comparison measures, digested: the local environment `env_dir`, the image
    (`image_dir`, else `image_name`'s inputs) and the arguments the modes run with."""
    site = sites.get("local")
    host = discover.discover(loader.View(), None, site, None)
    mpi = Path(host.libraries["libmpi.so.12"]).resolve()
    facts = f"{mpi} {mpi.stat().st_size} {mpi.stat().st_mtime_ns}"
    pictured = (
        stamp.digest(image.inputs_stamp(Path(image_dir)))
        if image_dir
        else image.inputs_key(image_name)
    )
    arguments = f"{repeats} {ranks} {modes} {runtime} {fabric_prefix}"
    arguments += " --model-only" if model_only else ""  # a report on the model's word alone
    cce = env_dir.parent / CCE_ENV / "spack.lock"  # the CCE stand-in's build
    models = sorted({b.case for b in runner.LOCAL if b.case})
    return stamp.digest(
        pictured,
        env_dir / "spack.lock",
        *([cce] if cce.is_file() else []),
        facts,
        site.path / sites.SITE_FILE,
        *(f"{name}\0{stamp.tree(cases.get(name).directory)}" for name in models),
        stamp.tree(pins.PROJECT_ROOT / "climstack"),
        arguments,
        length=32,
    )


def earlier(digest: str) -> tuple[Path, int] | None:
    """The newest finished report directory of the same key, and its exit status."""
    found = [
        path.parent
        for path in (pins.cache_dir() / "bench").glob(f"local-*/{KEY_FILE}")
        if path.read_text().strip() == digest
        and all((path.parent / kept).exists() for kept in (STATUS_FILE, *KEPT))
    ]
    if not found:
        return None
    newest = max(found, key=lambda p: (p / KEY_FILE).stat().st_mtime)
    return newest, int((newest / STATUS_FILE).read_text())


def keep(out: Path, digest: str, status: int) -> None:
    """Mark `out` finished: its key and exit status (the status first, the key last)."""
    atomic.write_text(out / STATUS_FILE, f"{status}\n")
    atomic.write_text(out / KEY_FILE, f"{digest}\n")
