"""Build the slice from source at centre A vs install it from A's buildcache at centre B.

Both centres are new Spack instances in a temporary directory (nothing reused but the
Debian-filled source mirror and the repo index), on this machine, in one run:
  A: concretize, `spack install` from source (timed), push signed (timed);
  B: trust A's key, `spack install --cache-only` of A's lockfile (timed).
Prints the times, the ratio (goal >= 20x) and the sizes. Takes a few minutes (2 cores).

    .venv/bin/python benchmarks/buildcache_speedup.py [--keep DIR]
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from climstack.build import buildcache as bc
from climstack.build import debian_sources as ds
from climstack.build import signing
from climstack.build import source_mirror as sm
from climstack.testing.centre import SLICE_SUITES, Centre, slice_env


def size(path: Path) -> str:
    out = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout
    return out.split()[0]


def timed(what: str, action):
    start = time.monotonic()
    result = action()
    seconds = time.monotonic() - start
    print(f"{what:<42} {seconds:8.1f} s", flush=True)
    return seconds, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="work here and keep it (default: a temporary dir)")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="climstack-bench-"))
    try:
        a = Centre(work / "a").setup()
        b_root = work / "b" / "a-longer-install-root-than-centre-a-has" / "opt"
        b = Centre(work / "b", install_root=b_root).setup()
        env = work / "a" / "slice"
        timed("A: concretize the slice --fresh", lambda: slice_env(env, run=a.run))
        timed(
            "A: fill source mirror from Debian",
            lambda: sm.fill_from_debian(
                env, work / "a" / "source-mirror", ds.DebianSources(suites=SLICE_SUITES), run=a.run
            ),
        )
        build, _ = timed(
            "A: build from source (spack install -j2)",
            lambda: a.run("install", "-j2", env=env, timeout=7200),
        )
        timed(
            "A: create signing key",
            lambda: signing.gpg_create(
                "bench centre A", "bench-a@climstack.invalid", work / "a.pub", run=a.run
            ),
        )
        cache = work / "cache"
        timed("A: push signed, update index", lambda: bc.push(env, cache.as_uri(), run=a.run))
        timed("B: trust A's public key", lambda: signing.gpg_trust(work / "a.pub", run=b.run))
        b_env = bc.env_from_lock(env / "spack.lock", work / "b" / "env")
        install, _ = timed(
            "B: install cache-only (A's lockfile)",
            lambda: bc.install(b_env, cache.as_uri(), run=b.run),
        )
        print(
            f"{'speed-up (build / cache install)':<42} {build / install:8.1f} x   (goal >= 20 x)"
        )
        print(f"{'buildcache size':<42} {size(cache):>8}")
        print(f"{'installed at B':<42} {size(b_root):>8}")
        print(f"{'source mirror (Debian-filled)':<42} {size(work / 'a' / 'source-mirror'):>8}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
