"""`climstack concretize`, `named-env`: the project's Spack environments concretized (through
the lock cache) and made named environments (climstack.stack.environments); `climstack check`
is cli/check.py."""

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import yaml

from climstack import pins, spack
from climstack.errors import ClimstackError
from climstack.stack import lock_cache
from climstack.stack.environments import absolute_manifest, concretize, find_environments, resolve


def concretize_all(names: list[str], reuse: bool = True, jobs: int = 0):
    """Concretize environments side by side, `jobs` at a time (default: one per CPU; each
    Spack solve uses one core); yields (name, seconds) as each finishes. An environment
    that fails does not stop the others; the first failure is raised once all are done."""
    if jobs < 0:
        raise ClimstackError(f"--jobs {jobs}: expected 0 (one per CPU) or more", fix="-j 2")
    dirs = {name: resolve(name) for name in names}  # unknown names refused before any solve
    failed = []
    with ThreadPoolExecutor(max_workers=jobs or min(len(dirs), os.cpu_count() or 1)) as pool:
        futures = {pool.submit(concretize, env_dir, reuse): name for name, env_dir in dirs.items()}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except ClimstackError as err:
                failed.append(err)
    if failed:
        raise failed[0]


def save_locks(names: list[str], prune: bool) -> None:
    """Commit the lockfiles of the host-independent environments (lock_cache.COMMITTED);
    `prune`: remove the committed ones no environment's inputs name any more."""
    saved = {path for name in names if (path := lock_cache.save(resolve(name)))}
    for path in sorted(saved):
        print(f"saved {path.relative_to(pins.PROJECT_ROOT)}")
    for stale in sorted(set(lock_cache.COMMITTED.glob("*.lock")) - saved) if prune else ():
        stale.unlink()
        print(f"removed {stale.relative_to(pins.PROJECT_ROOT)} (inputs changed)")


def create_named(name: str, env_dir: Path) -> None:
    """`spack env create NAME` from a project environment, its includes made absolute
    (Spack 1.1 copies the manifest verbatim, so relative includes would break)."""
    data = absolute_manifest(env_dir)
    with tempfile.TemporaryDirectory() as tmp:
        absolute = Path(tmp) / "spack.yaml"
        absolute.write_text(yaml.safe_dump(data, sort_keys=False))
        spack.run("env", "create", name, str(absolute))


def register(commands) -> None:
    def run_concretize(args):
        names = args.environments or list(find_environments())
        for name, seconds in concretize_all(names, not args.no_reuse, args.jobs):
            print(f"{name}: concretized --fresh in {seconds:.1f} s", flush=True)
        if args.save_locks:
            save_locks(names, prune=not args.environments)

    def run_named(args):
        create_named(args.name, resolve(args.environment or args.name))
        print(f"created: spack env activate {args.name} && spack install")

    sub = commands.add_parser(
        "named-env",
        help="create a named Spack environment from one "
        "of ours (e.g. archer2), usable as `spack env activate archer2`",
    )
    sub.add_argument("name")
    sub.add_argument("environment", nargs="?", help="default: the environment called NAME")
    sub.set_defaults(run=run_named)

    sub = commands.add_parser("concretize", help="concretize environments --fresh")
    sub.add_argument("environments", nargs="*", help="names or directories (default: all)")
    sub.add_argument(
        "--no-reuse",
        action="store_true",
        help="solve even when an earlier concretization had the same inputs",
    )
    sub.add_argument(
        "--save-locks",
        action="store_true",
        help="then commit the host-independent environments' lockfiles under "
        "environments/locks/<key>.lock (a developer's step: it writes tracked files)",
    )
    sub.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=0,
        help="environments solved at once (default: one per CPU)",
    )
    sub.set_defaults(run=run_concretize)
