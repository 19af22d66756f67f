"""Signing keys for the buildcache: `spack gpg` for this Spack's keyring.

A building centre creates a key and exports its public half; another centre trusts that
public key, so Spack verifies every binary it installs from the cache. The secret key never
belongs in git (`tracked_secret_keys`). Every function takes `spack`, as in buildcache.
"""

import os
from pathlib import Path

from climstack.common import process
from climstack.errors import ClimstackError
from climstack.pins import PROJECT_ROOT
from climstack.spack import DEFAULT, Spack

#: bin/setup disables Spack's bootstrapping (nothing may be downloaded), but `spack gpg`
#: enters the bootstrap context even when the host's gpg is on PATH, as it is here.
GPG = ("-c", "bootstrap:enable:true")


def gpg_create(
    name: str, email: str, public: Path, secret: Path | None = None, spack: Spack = DEFAULT
) -> None:
    """Create the centre's signing key; export the public half (and the secret, to back up)."""
    for path in filter(None, (public, secret)):  # checked before a key exists
        writable_destination(path, mkdir=True)
    args = [
        *GPG,
        "gpg",
        "create",
        "--comment",
        "climstack buildcache signing key",
        "--export",
        str(public),
    ]
    if secret:
        args += ["--export-secret", str(secret)]
    spack.run(*args, name, email)
    if secret:
        secret.chmod(0o600)


def writable_destination(path: Path, mkdir: bool = False) -> None:
    """Refuse a key file destination that cannot be written, before `spack gpg` runs."""
    parent, what = path.parent, ""
    if mkdir and not parent.exists():
        try:
            parent.mkdir(parents=True)
        except OSError as err:
            what = f"its directory {parent} cannot be created ({err.strerror})"
    if path.is_dir():
        what = "it is a directory"
    elif not what and not (parent.is_dir() and os.access(parent, os.W_OK)):
        what = f"its directory {parent} does not exist or is not writable"
    if what:
        raise ClimstackError(
            f"cannot write the key file {path}: {what}",
            fix="give a file path in an existing, writable directory",
        )


def gpg_export(dest: Path, secret: bool = False, spack: Spack = DEFAULT) -> None:
    writable_destination(dest)
    spack.run(*GPG, "gpg", "export", *(["--secret"] if secret else []), str(dest))


def gpg_trust(keyfile: Path, spack: Spack = DEFAULT) -> None:
    """Import a public key (another centre's) into this Spack's keyring, as trusted."""
    if not keyfile.is_file():
        raise ClimstackError(
            f"no key file {keyfile}",
            fix="ask the building centre for its `climstack buildcache key "
            "export` output (the .pub file, never the secret key)",
        )
    spack.run(*GPG, "gpg", "trust", str(keyfile))


def gpg_fingerprints(spack: Spack = DEFAULT) -> list[str]:
    """Fingerprints of the secret (signing) keys in this Spack's keyring."""
    out = spack.run(*GPG, "gpg", "list", "--signing").stdout
    return [
        word
        for word in out.split()
        if len(word) == 40 and all(c in "0123456789ABCDEF" for c in word)
    ]


def tracked_secret_keys(repo: Path = PROJECT_ROOT) -> list[str]:
    """Files git tracks in repo that hold a secret PGP key (armoured export)."""
    mark = b"BEGIN PGP " + b"PRIVATE KEY"  # split, so this file is no match itself
    names = process.run(["git", "-C", repo, "ls-files", "-z"], "git ls-files").stdout.split("\0")
    return [
        name
        for name in names
        if name and (repo / name).is_file() and mark in (repo / name).read_bytes()
    ]


def check_signing_key(unsigned: bool, spack: Spack = DEFAULT) -> None:
    """Refuse to push signed when this Spack's keyring holds no signing key."""
    if not unsigned and not gpg_fingerprints(spack):
        raise ClimstackError(
            "no signing key in this Spack's keyring",
            fix="`climstack buildcache key create NAME EMAIL`, or import the "
            "centre's key with `spack gpg trust SECRET.key`; or --unsigned",
        )
