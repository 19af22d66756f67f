"""The one way a pinned git repository (pins.GitPin: Spack and its packages, Apptainer, the
CDI reference) arrives: a shallow clone of its ref from its URL (a local path taken as
file://, so that --depth holds), checked to be the pinned commit; every failure names the
URL, the variable that overrides it and the fix."""

from pathlib import Path

from climstack.common import process
from climstack.errors import ClimstackError


def url_of(pin) -> str:
    """The pin's URL, a plain local path as file://."""
    url = pin.url
    if "://" not in url and not url.startswith("git@") and Path(url).exists():
        return Path(url).resolve().as_uri()
    return url


def head(path: Path) -> str:
    """The commit a checkout is at; '' where `path` is no git checkout."""
    found = process.run(
        ["git", "rev-parse", "HEAD"], f"git rev-parse in {path}", cwd=path, check=False
    )
    return found.stdout.strip() if found.returncode == 0 else ""


def clone(pin, work: Path, timeout: int = 900) -> None:
    """Clone `pin` into `work` (which must not exist), at its pinned commit or not at all."""
    fix = (
        f"check network access, or set {pin.url_variable} to a reachable git mirror or local "
        f"path that carries {pin.clone_ref} ({pin.commit})"
    )
    try:
        process.run(
            ["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1"]
            + ["--branch", pin.clone_ref, url_of(pin), str(work)],
            f"cloning {pin.name} {pin.clone_ref}",
            env=process.environ(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true"),
            timeout=timeout,
        )
    except ClimstackError as err:
        raise ClimstackError(
            f"cannot clone {pin.name} {pin.clone_ref} from {pin.url} (set by "
            f"{pin.url_variable} or the default): {err.message.strip().splitlines()[-1]}",
            fix=fix,
        ) from err
    if (found := head(work)) != pin.commit:
        raise ClimstackError(
            f"{pin.url} gives {pin.name} {pin.clone_ref} at {found or 'no commit'}, not "
            f"{pin.commit}",
            fix=f"point {pin.url_variable} at a clone that carries the release's commit",
        )
