"""Buildcaches in OCI registries (`oci://host/repository`, `oci+http://` on a trusted
network): push, install and list as with a filesystem cache, through a registry.

Spack 1.1 pushes OCI images unsigned, so climstack signs what a centre pushed and checks it
before anything is installed (climstack/spack/scripts/oci_in_spack.py, run inside Spack). The
registry's TLS is Spack's (`config:ssl_certs`, by default $SSL_CERT_FILE); credentials come
from CLIMSTACK_OCI_USER / CLIMSTACK_OCI_TOKEN, named by the mirror (never written).
"""

import json
import os
from pathlib import Path

from climstack.errors import ClimstackError
from climstack.spack import DEFAULT, ScriptFailed, Spack
from climstack.stack import buildcache, environments, signing
from climstack.stack.registry import PASSWORD_VARIABLE, USERNAME_VARIABLE, credentials

CREDENTIALS = f"set {USERNAME_VARIABLE} and {PASSWORD_VARIABLE} to an account of that registry"


def is_oci(url: str) -> bool:
    return url.startswith(("oci://", "oci+http://"))


def mirror_entry(url: str) -> dict:
    """A binary mirror for the registry; Spack reads the credentials' variables itself."""
    entry = {"url": url, "binary": True, "source": False, "signed": False}
    if credentials():
        entry["access_pair"] = {
            "id_variable": USERNAME_VARIABLE,
            "secret_variable": PASSWORD_VARIABLE,
        }
    return entry


def _mirror_option(url: str) -> tuple[str, str]:
    return ("-c", "mirrors:" + json.dumps({buildcache.MIRROR_NAME: mirror_entry(url)}))


def in_spack(
    action: str, url: str, *args: str, env: Path | None = None, spack: Spack = DEFAULT
) -> dict:
    """Run an action of oci_in_spack.py; its JSON result, or the registry's refusal."""
    options = (*signing.GPG, *_mirror_option(url))
    try:
        result = spack.python(
            "oci_in_spack.py", action, url, *args, env=env, options=options, timeout=1800
        )
    except ScriptFailed as err:
        raise ClimstackError(
            f"registry {url}: `{action}` failed:\n" + err.output[-2000:],
            fix="check the registry's URL and that Spack can reach it (`spack -d`)",
        ) from None
    if "error" in result:
        raise registry_error(url, result["status"], result["error"])
    return result


def registry_error(url: str, status: int, error: str) -> ClimstackError:
    if status in (401, 403):
        user = os.environ.get(USERNAME_VARIABLE) or "no user (anonymous)"
        return ClimstackError(
            f"registry {url} refused the credentials of {user} ({error})",
            fix=f"{CREDENTIALS} that may read (and, to push, write) this repository",
        )
    if status == 0:
        return ClimstackError(
            f"registry {url} is unreachable ({error})",
            fix="check the host and port, and that its certificate is trusted "
            "(SSL_CERT_FILE or Spack's config:ssl_certs)",
        )
    return ClimstackError(f"registry {url}: {error}", fix="check the registry's URL and logs")


def check_index(url: str, spack: Spack = DEFAULT, missing_ok: bool = False) -> bool:
    """Whether the cache has its index; refuses bad credentials, and (unless missing_ok)
    a repository without an index: empty, or the cache lives at another path."""
    buildcache.check_reachable(url)
    return index_state(url, in_spack("check", url, spack=spack), missing_ok)


def index_state(url: str, result: dict, missing_ok: bool = False) -> bool:
    """check_index's verdict on the index's HTTP status in an in-Spack result."""
    if result["status"] == 200:
        return True
    if result["status"] != 404:
        raise registry_error(url, result["status"], result.get("reason", ""))
    if missing_ok:
        return False
    raise ClimstackError(
        f"buildcache {url} has no index (index.spack: HTTP 404): the cache is empty, "
        "or it lives at another repository path",
        fix="ask the building centre for the exact oci:// URL it pushed to "
        "(`climstack buildcache list URL` shows what a path holds)",
    )


def push(
    env_dir: Path,
    url: str,
    key: str | None = None,
    unsigned: bool = False,
    force: bool = False,
    base_image: str | None = None,
    spack: Spack = DEFAULT,
    specs: tuple[str, ...] = (),
) -> str:
    """Push the environment's installed specs (or only `specs` and their dependencies) as OCI
    images (on base_image, runnable), update the index, and sign each image's manifest
    unless unsigned."""
    signing.check_signing_key(unsigned, spack)
    check_index(url, spack=spack, missing_ok=True)  # reachable, and these credentials work
    args = [*signing.GPG, *_mirror_option(url), "buildcache", "push", "--update-index"]
    args += ["--fail-fast", "--unsigned"] + (["--force"] if force else [])
    args += ["--base-image", base_image] if base_image else []
    proc = spack.run(*args, buildcache.MIRROR_NAME, *specs, env=env_dir, check=False, timeout=3600)
    if proc.returncode != 0:
        raise ClimstackError(
            f"pushing {env_dir} to {url} failed:\n" + (proc.stderr or proc.stdout)[-2000:],
            fix=f"install it first (`spack -e {env_dir} install`); {CREDENTIALS} "
            "with write access",
        )
    if unsigned:
        return proc.stdout
    key = key or signing.gpg_fingerprints(spack)[0]
    site = environments.site_of(env_dir)
    signed = in_spack("sign", url, key, site, env=env_dir, spack=spack)["signed"]
    return proc.stdout + f"signed {len(signed)} images with key {key} (site {site})\n"


#: a problem verify reports -> what to do about it
ADVICE = (
    (
        "unsigned",
        "ask the building centre to push signed (without --unsigned); only if you "
        "accept unverified binaries, pass --unsigned",
    ),
    (
        "could not be verified",
        "trust the building centre's key: " "`climstack buildcache key trust <centre>.pub`",
    ),
    (
        "registry serves",
        "the image was replaced after it was signed: have the building centre "
        "push again (`climstack buildcache push --force`); never skip the check",
    ),
    ("not in the cache", "the building centre has not pushed this spec to that path"),
)


def verify(env_dir: Path, url: str, spack: Spack = DEFAULT) -> list[dict]:
    """Every spec of the environment signed by a trusted key for what the registry serves
    (the index checked first, in the same Spack process)."""
    buildcache.check_reachable(url)
    result = in_spack("verify", url, env=env_dir, spack=spack)
    index_state(url, result)
    if result["problems"]:
        reasons = [
            f"  {p['spec']} ({url}:{p['reference']}): {p['problem']}" for p in result["problems"]
        ]
        fixes = [fix for key, fix in ADVICE if any(key in r for r in reasons)]
        raise ClimstackError(
            f"installing from {url} was refused:\n" + "\n".join(reasons), fix="; ".join(fixes)
        )
    return result["ok"]


def install(env_dir: Path, url: str, unsigned: bool = False, spack: Spack = DEFAULT) -> str:
    """Install the environment's specs from the registry only, signatures checked first."""
    if unsigned:
        check_index(url, spack=spack)
    else:
        verify(env_dir, url, spack=spack)
    options = ["--oci-username-variable", USERNAME_VARIABLE] if credentials() else []
    options += ["--oci-password-variable", PASSWORD_VARIABLE] if options else []
    buildcache.mirror_add(url, unsigned=True, env=env_dir, spack=spack, options=options)
    return buildcache.install_cache_only(env_dir, url, ["--no-check-signature"], spack)


def contents(url: str, spack: Spack = DEFAULT) -> list[dict]:
    """Every spec image in the registry: name, version, hash, os, target, mpi, and the
    site and signature state its statement gives."""
    check_index(url, spack=spack)
    return in_spack("list", url, spack=spack)["specs"]
