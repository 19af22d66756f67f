"""Share builds between centres through a Spack buildcache: signed, relocatable binaries.

One centre builds and pushes (`spack buildcache push --update-index`, signed with its
`spack gpg` key); another trusts the public key and installs the same lockfile cache-only
(`spack install --cache-only`), into its own install root: the padded install tree
(site/*/config.yaml `padded_length`) lets Spack rewrite every path on relocation.

Every function takes `spack`, a climstack.spack.Spack (default: the user's), so the same
code drives the user's Spack or the Centre of climstack_dev/centre.py (an isolated Spack
instance, as in the tests and benchmark). Signing keys (`climstack buildcache key`) live in
climstack.stack.signing.
"""

import json
import shutil
import socket
import urllib.parse
from pathlib import Path

import yaml

from climstack.errors import ClimstackError
from climstack.spack import DEFAULT, Spack
from climstack.stack import environments, signing

MIRROR_NAME = "climstack-cache"


def install_root(spack: Spack = DEFAULT, env: Path | None = None, padded: bool = False) -> Path:
    """The install root Spack uses (unpadded unless asked: what a leaked path starts with)."""
    return Path(spack.python("install_root.py", "root" if padded else "unpadded_root", env=env))


# --- mirrors ----------------------------------------------------------------------------


def mirror_url(location: str) -> str:
    """A URL for a mirror given as a URL or a directory."""
    if "://" in location:
        return location
    return Path(location).expanduser().resolve().as_uri()


def check_reachable(url: str, timeout: float = 5.0) -> None:
    """Fail fast, naming the URL, when a mirror cannot be reached at all."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.parse.unquote(parsed.path))
        if not path.is_dir():
            raise ClimstackError(
                f"buildcache {url}: no such directory {path}",
                fix="mount the shared filesystem or correct the mirror URL "
                "(site/<site>/mirrors.yaml or --mirror)",
            )
        return
    if parsed.scheme not in ("http", "https", "oci", "oci+http", "s3", "gs"):
        raise ClimstackError(
            f"buildcache {url}: unsupported URL scheme '{parsed.scheme}'",
            fix="use file://, https:// or oci://",
        )
    host = parsed.hostname or ""
    port = parsed.port or (80 if parsed.scheme in ("http", "oci+http") else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        raise ClimstackError(
            f"buildcache {url} is unreachable ({host}:{port}: {err})",
            fix="check the network/VPN to that host, or use a filesystem "
            "mirror (file://) that a login node can see",
        ) from err


def mirror_add(
    url: str,
    unsigned: bool = False,
    env: Path | None = None,
    spack: Spack = DEFAULT,
    name: str = MIRROR_NAME,
    options: list[str] = (),
) -> None:
    """Register a binary mirror in the environment (or the user scope without one);
    options: more `spack mirror add` options (an OCI registry's credentials' variables)."""
    scope = ["--scope", f"env:{env}"] if env else ["--scope", "user"]
    spack.run("mirror", "remove", *scope, name, env=env, check=False)
    spack.run(
        "mirror",
        "add",
        *scope,
        "--type",
        "binary",
        "--unsigned" if unsigned else "--signed",
        *options,
        name,
        url,
        env=env,
    )


# --- push, install, list ----------------------------------------------------------------


def push(
    env_dir: Path,
    url: str,
    key: str | None = None,
    unsigned: bool = False,
    force: bool = False,
    spack: Spack = DEFAULT,
) -> str:
    """Push the environment's installed specs (and runtime deps) signed, then reindex."""
    local = url.startswith("file://")
    if not local:
        check_reachable(url)  # the scheme and the network, before the keyring
    signing.check_signing_key(unsigned, spack)
    if local:  # a new filesystem cache is simply created
        path = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
        path.mkdir(parents=True, exist_ok=True)
    args = [*signing.GPG, "buildcache", "push", "--update-index", "--fail-fast"]
    args += ["--unsigned"] if unsigned else ["--signed"] + (["--key", key] if key else [])
    args += ["--force"] if force else []  # replace tarballs already in the cache
    proc = spack.run(*args, url, env=env_dir, check=False)
    if proc.returncode != 0:
        raise ClimstackError(
            f"pushing {env_dir} to {url} failed:\n"
            + (proc.stderr.strip() or proc.stdout.strip())[-2000:],
            fix=f"install it first (`spack -e {env_dir} install`); a signing "
            "key must be trusted (`spack gpg list --signing`)",
        )
    return proc.stdout


def lock_roots(lock: Path) -> list[str]:
    try:
        return [root["spec"] for root in json.loads(lock.read_text())["roots"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ClimstackError(
            f"{lock} is not a Spack lockfile ({err})",
            fix="pass the spack.lock of the environment the building centre " "pushed",
        ) from err


def env_from_lock(lock: Path, env_dir: Path) -> Path:
    """An environment holding exactly the building centre's concrete specs (its lockfile),
    with our package repo (stack.yaml) but no site scope: nothing is concretized again."""
    specs = lock_roots(lock)  # refused before anything is written
    env_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"spack": {"include": [str(environments.STACK)], "specs": specs, "view": False}}
    (env_dir / "spack.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    shutil.copyfile(lock, env_dir / "spack.lock")
    return env_dir


def install(
    env_dir: Path,
    url: str,
    unsigned: bool = False,
    spack: Spack = DEFAULT,
    options=(),
    added=False,
) -> str:
    """Install an environment's concrete specs from the buildcache only (no source builds).
    options: more `spack install` options (-p N); added: the mirror is already in the
    environment."""
    check_reachable(url)
    if not added:
        mirror_add(url, unsigned=unsigned, env=env_dir, spack=spack)
    options = [*options, *(["--no-check-signature"] if unsigned else [])]
    return install_cache_only(env_dir, url, options, spack)


def install_cache_only(env_dir: Path, url: str, options, spack: Spack = DEFAULT) -> str:
    """`spack install --cache-only`; a refusal is run again with -d to say why (Spack's
    debug output alone names the reason; nothing more gets installed by that run)."""
    args = [*signing.GPG, "install", "--cache-only", *options]
    proc = spack.run(*args, env=env_dir, check=False)
    if proc.returncode != 0:
        proc = spack.run("-d", *args, env=env_dir, check=False)
        raise install_error(url, proc.stderr + proc.stdout)
    return "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("==> ["))


#: Spack's reason for refusing a binary (buildcache layout v3) -> our advice
REFUSALS = (
    (
        "checksum failed",
        "a tarball in the cache does not match its signed manifest: it is "
        "corrupted or was tampered with. Have the building centre push it again "
        "(`climstack buildcache push --force`); never skip the check",
    ),
    (
        "Required signature was not found",
        "the cache is unsigned. Ask the building centre to "
        "push signed; only if you accept unverified binaries, pass --unsigned",
    ),
    (
        "Signature could not be verified",
        "the cache is signed by a key this Spack does not "
        "trust: `climstack buildcache key trust <building centre's key>.pub`",
    ),
)


def install_error(url: str, output: str) -> ClimstackError:
    """Spack's refusal, per spec, with what to do about it."""
    reasons = []
    for line in output.splitlines():
        if "Encountered error attempting to fetch archive for" in line and "(v2)" not in line:
            spec, _, reason = line.split(" for ", 1)[1].partition(" due to ")
            reasons.append(f"  {spec.split(' from ')[0]}: {reason.strip()}")
    fixes = [fix for key, fix in REFUSALS if any(key in r for r in reasons)]
    if not reasons:  # a binary that was fetched but could not be installed (disk full, ...)
        reasons = [
            "  " + line.split("Failed to install ", 1)[1]
            for line in output.splitlines()
            if "Error: Failed to install " in line
        ]
    if not reasons:
        errors = [line for line in output.splitlines() if "Error:" in line]
        reasons = errors[-4:] or [output.strip()[-2000:]]
    return ClimstackError(
        f"installing from buildcache {url} was refused:\n" + "\n".join(dict.fromkeys(reasons)),
        fix="; ".join(fixes) or "check the cache holds every spec (`climstack buildcache list`)",
    )


def contents(url: str, spack: Spack = DEFAULT) -> list[dict]:
    """Every spec in the buildcache at url: name, version, hash, os, target, mpi."""
    check_reachable(url)
    mirrors = json.dumps({"listed": {"url": url, "source": False, "binary": True}})
    return spack.python("buildcache_specs.py", options=("-c", f"mirrors:{mirrors}"))


def select(specs: list[dict], target: str | None = None, lock: Path | None = None) -> list[dict]:
    """Those for one target (zen2, x86_64, ...) and/or one environment's lockfile."""
    if target:
        specs = [s for s in specs if s["target"] == target]
    if lock:
        wanted = set(json.loads(lock.read_text())["concrete_specs"])
        specs = [s for s in specs if s["hash"] in wanted]
    return specs
