"""Build at centre A from source vs install from A's buildcache at centre B.

Both centres are new Spack instances in a temporary directory (nothing reused but the
offline source mirror, the develop trees and the repo index), on this machine. By default
the whole local environment (stack + benchmarks + probes), --runs times:
  A: `spack install -j2` from source (timed), push signed;
  B: trust A's key, add the cache and fetch its index, `spack install --cache-only -p 2`
     of A's lockfile (each timed).
It prints the times per run, then the medians and the ratio build / install (goal >= 30x
in every run). With --registry the slice of three packages goes through a loopback OCI
registry (Debian's docker-registry, HTTPS, basic auth): it also prints the bytes pushed, a
second push of the unchanged slice, and mpi-probe's runnable image (`--base-image`) pulled
by ch-image and Apptainer, with sizes.

    .venv/bin/python benchmarks/buildcache_speedup.py [--runs 3] [--keep DIR] [--registry]
"""

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from climstack.common import process
from climstack.image import base_image
from climstack.launch import oci_images
from climstack.launch.runtimes import apptainer
from climstack.stack.sources import bench_sources, git_sources
from climstack.stack import buildcache as bc
from climstack.stack import environments, lock_cache, oci_cache, signing
from climstack.stack.registry import Registry
from climstack_dev.centre import Centre, fill_slice_mirror, slice_env


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
    parser.add_argument("--registry", action="store_true", help="through an OCI registry")
    parser.add_argument("--runs", type=int, default=3, help="whole environment: repeats")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="climstack-bench-"))
    registry = Registry(work / "registry") if args.registry else None
    try:
        with registry or contextlib.nullcontext():
            if registry:
                os.environ.update(registry.environ())
            measure(work, registry) if registry else whole_environment(work, args.runs)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def mb(blobs: dict) -> str:
    return f"{len(blobs)} blobs, {sum(blobs.values()) / 1e6:.1f} MB"


def measure(work: Path, registry: Registry | None) -> None:
    a = Centre(work / "a").setup()
    b_root = work / "b" / "a-longer-install-root-than-centre-a-has" / "opt"
    b = Centre(work / "b", install_root=b_root).setup()
    env = work / "a" / "slice"
    timed("A: concretize the slice --fresh", lambda: slice_env(env, spack=a))
    timed(
        "A: fill source mirror from Debian",
        lambda: fill_slice_mirror(env, work / "a" / "source-mirror", spack=a),
    )
    build, _ = timed(
        "A: build from source (spack install -j2)",
        lambda: a.run("install", "-j2", env=env, timeout=7200),
    )
    timed(
        "A: create signing key",
        lambda: signing.gpg_create(
            "bench centre A", "bench-a@climstack.invalid", work / "a.pub", spack=a
        ),
    )
    cache = work / "cache"
    url, kind = (registry.url(), oci_cache) if registry else (cache.as_uri(), bc)
    timed("A: push signed, update index", lambda: kind.push(env, url, spack=a))
    if registry:
        pushed = registry.stored_blobs()
        print(f"{'  pushed to the registry':<42} {mb(pushed):>20}")
        timed("A: push again, unchanged", lambda: kind.push(env, url, spack=a))
        again = {d: n for d, n in registry.stored_blobs().items() if d not in pushed}
        print(f"{'  new blobs on the second push':<42} {mb(again):>20}")
    timed("B: trust A's public key", lambda: signing.gpg_trust(work / "a.pub", spack=b))
    b_env = bc.env_from_lock(env / "spack.lock", work / "b" / "env")
    install, _ = timed(
        "B: install cache-only (A's lockfile)",
        lambda: kind.install(b_env, url, spack=b),
    )
    print(f"{'speed-up (build / cache install)':<42} {build / install:8.1f} x   (goal >= 20 x)")
    print(f"{'buildcache size':<42} {size(registry.storage if registry else cache):>8}")
    print(f"{'installed at B':<42} {size(b_root):>8}")
    print(f"{'source mirror (Debian-filled)':<42} {size(work / 'a' / 'source-mirror'):>8}")
    if registry:
        images(work, registry, env, a)


SHARED = ("local-externals", "local-sources", "source-mirror")
PHASES = ("A: build from source", "B: trust A's key", "B: add cache, fetch index", "B: install")


def whole_environment(work: Path, runs: int) -> None:
    """The local environment built at A and installed from A's cache at B, `runs` times."""
    local = environments.resolve("local")
    environments.concretize(local)
    bench_sources.fill(local, git_sources.local_mirror())
    times = {phase: [] for phase in PHASES}
    for run in range(1, runs + 1):
        print(f"-- run {run} of {runs}", flush=True)
        top = work / f"run-{run}"
        a = Centre(top / "a", shared=SHARED).setup()
        b_root = top / "b" / "a-longer-install-root-than-centre-a-has" / "opt"
        b = Centre(top / "b", install_root=b_root, shared=SHARED).setup()
        env = top / "a" / "local"
        env.mkdir(parents=True)
        (env / "spack.yaml").write_text(yaml.safe_dump(environments.absolute_manifest(local)))
        lock_cache.concretize(env, spack=a)
        build, _ = timed(PHASES[0], lambda: a.run("install", "-j2", env=env, timeout=7200))
        signing.gpg_create("bench A", "bench-a@climstack.invalid", top / "a.pub", spack=a)
        url = (top / "cache").as_uri()
        timed("A: push signed, update index", lambda: bc.push(env, url, spack=a))
        b_env = bc.env_from_lock(env / "spack.lock", top / "b" / "env")
        trust, _ = timed(PHASES[1], lambda: signing.gpg_trust(top / "a.pub", spack=b))

        def index():
            bc.mirror_add(url, env=b_env, spack=b)
            b.run("buildcache", "list", "--allarch", env=b_env)

        fetch, _ = timed(PHASES[2], index)
        install, _ = timed(
            PHASES[3],
            lambda: bc.install(b_env, url, spack=b, options=["-p", "2"], added=True),
        )
        for phase, seconds in zip(PHASES, (build, trust, fetch, install)):
            times[phase].append(seconds)
        print(f"{'  ratio build / install':<42} {build / install:8.1f} x", flush=True)
        print(f"{'  installed at B':<42} {size(b_root):>8}")
        shutil.rmtree(top / "a" / "cache" / "installs", ignore_errors=True)
    print(f"-- medians over {runs} runs (whole local environment)")
    for phase in PHASES:
        print(f"{phase:<42} {statistics.median(times[phase]):8.1f} s")
    ratios = [b / i for b, i in zip(times[PHASES[0]], times[PHASES[3]])]
    print(
        f"{'ratio build / install, median [min-max]':<42} {statistics.median(ratios):8.1f} x"
        f" [{min(ratios):.1f}-{max(ratios):.1f}]   (goal >= 30 x in every run)"
    )
    b_total = [sum(times[p][i] for p in PHASES[1:]) for i in range(runs)]
    print(
        f"{'ratio build / all of B (trust+index+install)':<42} "
        f"{statistics.median(times[PHASES[0]]) / statistics.median(b_total):8.1f} x"
    )


def images(work: Path, registry: Registry, env: Path, a: Centre) -> None:
    """mpi-probe's runnable image: pushed on our base, pulled by each runtime."""
    base = base_image.push(f"{registry.host}/climstack/debian")
    url = registry.url("climstack/images")
    timed(
        "A: push on the base image (--base-image)",
        lambda: oci_cache.push(env, url, base_image=base, spack=a),
    )
    probe = next(s for s in oci_cache.contents(url, spack=a) if s["name"] == "mpi-probe")
    ref = f"{registry.host}/climstack/images:mpi-probe-{probe['version']}-{probe['hash']}.spack"
    _, image_dir = timed(
        "ch-image pull of mpi-probe's image",
        lambda: oci_images.pull_charliecloud(ref, work / "ch"),
    )
    print(f"{'  image directory':<42} {size(image_dir):>8}")
    _, sif = timed(
        "apptainer pull of mpi-probe's image",
        lambda: oci_images.pull_apptainer(apptainer.on_this_machine(), ref, work / "probe.sif"),
    )
    print(f"{'  SIF':<42} {size(sif):>8}")


if __name__ == "__main__":
    sys.exit(process.script(main))
