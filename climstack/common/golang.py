"""The machine's Go toolchain for the tools climstack builds from source (the CDI reference
command, Apptainer): found on PATH or in /usr/local/go, modules from the Go proxy, its
caches in a scratch directory of the build (thrown away with it)."""

import shutil
from pathlib import Path

from climstack.common import process
from climstack.errors import ClimstackError

#: no toolchain download, a module cache that can be removed
ENV = {"GOTOOLCHAIN": "local", "GOFLAGS": "-modcacherw"}
PROXY_FIX = "check access to the Go module proxy (GOPROXY), or set GOPROXY to a reachable one"


def go(what: str) -> str:
    """The `go` command, or an error naming `what` needs it."""
    found = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")
    if not found:
        raise ClimstackError(
            f"no Go to build {what}",
            fix="install Go >= 1.25 (on PATH or in /usr/local/go), with access to the Go "
            "module proxy (GOPROXY)",
        )
    return found


def caches(scratch: Path) -> dict[str, str]:
    """GOPATH, GOMODCACHE and GOCACHE under `scratch`."""
    return {k: str(scratch / "go" / k) for k in ("GOPATH", "GOMODCACHE", "GOCACHE")}


def toolchains(go_command: str) -> tuple[str, ...]:
    """What a cache key of a build with Go and cgo names of its toolchains: `go version`
    and the C compiler's full version (a Go or GCC update rebuilds)."""
    commands = ([go_command, "version"], ["gcc", "-dumpfullversion"])
    return tuple(
        process.run(
            command, " ".join(command), timeout=60, fix=f"install {command[0]}"
        ).stdout.strip()
        for command in commands
    )
