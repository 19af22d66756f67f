"""Images straight from a buildcache: `climstack buildcache push --base-image` makes every
pushed spec an OCI image (the base plus one layer per Spack prefix, at the building
centre's install paths, PATH set). This pulls one with each runtime, as a user would:
`ch-image pull` into an image directory, `apptainer pull docker://` into a SIF.

TLS and credentials come from the registry client environment (climstack.stack.registry):
SSL_CERT_FILE (Go: Apptainer), REQUESTS_CA_BUNDLE (Python: ch-image), and
CLIMSTACK_OCI_USER / CLIMSTACK_OCI_TOKEN, handed to each tool under its own names (podman's
in an auth file: never on a command line, which `ps` shows).
"""

import base64
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from climstack.common import process, progress
from climstack.errors import ClimstackError
from climstack.stack.registry import credentials


def _environ(user_var: str, password_var: str) -> dict:
    env = dict(os.environ)
    if os.environ.get("SSL_CERT_FILE"):
        env["REQUESTS_CA_BUNDLE"] = os.environ["SSL_CERT_FILE"]
    if login := credentials():
        env[user_var], env[password_var] = login
    # ch-image runs on `python3` from PATH and needs Debian's python3-lark
    env["PATH"] = "/usr/bin:" + env.get("PATH", "")
    return env


def pull_charliecloud(reference: str, storage: Path) -> Path:
    """`ch-image pull` the image into a ch-image storage; its image directory. The image is
    named without its registry host, so that pulls from a registry on another port replace
    it (and hit ch-image's build cache) rather than add a copy per port."""
    if not shutil.which("ch-image"):
        raise ClimstackError(
            "`ch-image` not found", fix="apt-get install charliecloud (bin/setup)"
        )
    env = _environ("CH_IMAGE_USERNAME", "CH_IMAGE_PASSWORD")
    auth = ["--auth"] if env.get("CH_IMAGE_USERNAME") else []
    with progress.step(f"ch-image pull {reference}"):
        process.run(
            ["ch-image", "-s", storage, "pull", *auth, reference, local_name(reference)],
            f"ch-image pull {reference}",
            env=env,
            fix="check the reference (`climstack buildcache list oci://...`), the registry's "
            "certificate (SSL_CERT_FILE) and credentials",
        )
    return charliecloud_image_dir(storage, reference)


def local_name(reference: str) -> str:
    """REPOSITORY:TAG of HOST[:PORT]/REPOSITORY:TAG."""
    host, _, rest = reference.partition("/")
    if not rest or (host != "localhost" and not any(c in host for c in ".:")):
        return reference  # no registry host in it
    return rest


def registry_host(reference: str) -> str:
    """HOST[:PORT] of HOST[:PORT]/REPOSITORY:TAG; docker.io without a registry host."""
    return reference.partition("/")[0] if local_name(reference) != reference else "docker.io"


def charliecloud_image_dir(storage: Path, reference: str) -> Path:
    """Where `pull_charliecloud` puts `reference` in a ch-image storage."""
    return storage / "img" / local_name(reference).replace("/", "%").replace(":", "+")


def pull_apptainer(apptainer: str, reference: str, sif: Path) -> Path:
    """`apptainer pull` (the command `apptainer`) the image into a SIF."""
    env = _environ("APPTAINER_DOCKER_USERNAME", "APPTAINER_DOCKER_PASSWORD")
    sif.unlink(missing_ok=True)
    with progress.step(f"apptainer pull docker://{reference}"):
        process.run(
            [apptainer, "pull", sif, f"docker://{reference}"],
            f"apptainer pull docker://{reference}",
            env=env,
            timeout=1800,
            fix="check the reference, the registry's certificate and credentials",
        )
    return sif


def pull_podman(podman: list[str], reference: str, work: Path) -> str:
    """`podman pull` the image into podman's storage (the registry's CA from SSL_CERT_FILE
    as a --cert-dir, its credentials in an --authfile); the reference a `podman run` names."""
    argv = [*podman, "pull", "--quiet"]
    if ca := os.environ.get("SSL_CERT_FILE"):
        certs = work / "podman-certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ca, certs / "ca.crt")
        argv += ["--cert-dir", str(certs)]
    with progress.step(f"podman pull {reference}"), authfile(reference, work) as auth:
        argv += ["--authfile", str(auth)] if auth else []
        fix = "check the reference, the registry's certificate and credentials"
        process.run([*argv, reference], f"podman pull {reference}", timeout=1800, fix=fix)
    return reference


@contextmanager
def authfile(reference: str, work: Path):
    """The credentials (climstack.stack.registry) for the registry of `reference` as a
    podman auth file in `work` ({"auths": {HOST: {"auth": base64 of USER:PASSWORD}}}),
    readable by its owner only and removed on leaving; None without credentials."""
    if not (login := credentials()):
        yield None
        return
    work.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix="podman-auth-", suffix=".json", dir=work)  # 0600
    try:
        token = base64.b64encode(":".join(login).encode()).decode()
        with os.fdopen(handle, "w") as file:
            json.dump({"auths": {registry_host(reference): {"auth": token}}}, file)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)
