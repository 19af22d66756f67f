"""The registry leg of `make local`: a loopback OCI registry (climstack.stack.registry)
receives our Debian 12 base and the environment's probes (installed by `climstack dev smoke`)
as runnable images
(`buildcache push --base-image`), signed when this Spack has a signing key; the registry is
listed, and mpi-probe's image is pulled with ch-image and run on 2 ranks in bind mode. The
registry stops at the end; its storage stays in the cache, so a second run moves no blob."""

import os

from climstack import pins
from climstack.check import container_smoke
from climstack.image import base_image
from climstack.stack import environments, oci_cache, signing
from climstack.stack.registry import Registry


def run(environment: str = "local", runtime: str = "charliecloud") -> None:
    env_dir = environments.resolve(environment)
    work = pins.cache_dir() / "registry-smoke"
    with Registry(work / "registry", user="climstack") as registry:
        os.environ.update(registry.environ())  # this process's clients: Spack, skopeo, ...
        base = base_image.push(f"{registry.host}/climstack/debian")
        url = registry.url(f"climstack/{environment}")
        unsigned = not signing.gpg_fingerprints()
        before = registry.stored_blobs()
        probes = tuple(environments.definition("probes"))  # what `climstack dev smoke` installs
        oci_cache.push(env_dir, url, unsigned=unsigned, base_image=base, specs=probes)
        moved = {d: n for d, n in registry.stored_blobs().items() if d not in before}
        print(f"pushed {len(moved)} new blobs, {sum(moved.values()) / 1e6:.1f} MB", end="")
        print(" (unsigned: no signing key, see `climstack buildcache key create`)" * unsigned)
        specs = oci_cache.contents(url)
        for s in sorted(specs, key=lambda s: s["name"]):
            print(f"  {s['os']}-{s['target']}  {s['name']}@{s['version']}/{s['hash'][:7]}")
        probe = next(s for s in specs if s["name"] == "mpi-probe")
        tag = f"{probe['name']}-{probe['version']}-{probe['hash']}.spack"
        output = container_smoke.run_pulled(
            f"{registry.host}/climstack/{environment}:{tag}", runtime
        )
        print(container_smoke.summary(runtime, output))
