"""Our Debian 12 base as an OCI image in a registry, for `climstack buildcache push
--base-image`: Spack then makes every pushed spec a runnable image on it.

The cached mmdebstrap root filesystem (climstack.image.image.base_rootfs, the base of our
own images) becomes a one-layer OCI layout with umoci, kept beside the tarball, and skopeo
copies it to the registry. Both run unprivileged (measured as user nobody); buildah would
need user namespaces and ch-image a builder storage. TLS and credentials as for Spack:
SSL_CERT_FILE, CLIMSTACK_OCI_USER / CLIMSTACK_OCI_TOKEN.
"""

import shutil
from pathlib import Path

from climstack.common import process, progress
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.stack.registry import PASSWORD_VARIABLE, USERNAME_VARIABLE, credentials

TAG = "12"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def oci_layout() -> Path:
    """The base root filesystem as an OCI image layout (tag 12), made once per tarball."""
    tarball = image.base_rootfs()
    layout = tarball.with_suffix(".oci")
    if (layout / "index.json").is_file():
        return layout
    umoci = shutil.which("umoci")
    if not umoci:
        raise ClimstackError("`umoci` not found", fix="apt-get install umoci (bin/setup)")
    partial = layout.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    ref = f"{partial}:{TAG}"
    with progress.step(f"OCI layout of {tarball.name} (umoci, once)"):
        process.run([umoci, "init", "--layout", partial], "umoci init")
        process.run([umoci, "new", "--image", ref], "umoci new")
        process.run([umoci, "raw", "add-layer", "--image", ref, tarball], "umoci add-layer")
        config = ["--config.env", f"PATH={PATH}", "--config.cmd", "/bin/bash"]
        config += ["--author", "climstack", "--history.comment", f"mmdebstrap {tarball.name}"]
        process.run([umoci, "config", "--image", ref, *config], "umoci config")
        process.run([umoci, "gc", "--layout", partial], "umoci gc")
    partial.rename(layout)
    return layout


def push(reference: str) -> str:
    """Copy the base to `HOST[:PORT]/REPOSITORY:TAG` in a registry; the reference."""
    if "://" in reference or "/" not in reference:
        raise ClimstackError(
            f"base image reference {reference!r} is not HOST[:PORT]/REPOSITORY[:TAG]",
            fix="e.g. 127.0.0.1:5000/climstack/debian:12 (no scheme)",
        )
    if ":" not in reference.rsplit("/", 1)[1]:
        reference += f":{TAG}"
    skopeo = shutil.which("skopeo")
    if not skopeo:
        raise ClimstackError("`skopeo` not found", fix="apt-get install skopeo (bin/setup)")
    layout = oci_layout()
    login = credentials()
    creds = ["--dest-creds", ":".join(login)] if login else []
    with progress.step(f"skopeo copy of the Debian 12 base to {reference}"):
        process.run(
            [skopeo, "copy", "--quiet", *creds, f"oci:{layout}:{TAG}", f"docker://{reference}"],
            f"copying the base image to {reference}",
            fix="check the registry is reachable, its certificate trusted (SSL_CERT_FILE) and "
            f"{USERNAME_VARIABLE}/{PASSWORD_VARIABLE} may push",
        )
    return reference
