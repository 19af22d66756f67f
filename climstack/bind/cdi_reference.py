"""The CDI reference library (cncf-tags/container-device-interface at PIN): its JSON schema,
which every spec climstack writes or reads is validated against, and its `cdi` command
(cmd/cdi, a Go module), which resolves a spec as a runtime does: `cdi inject` applies the
spec's top-level edits and the device's to an OCI spec. Both come from a checkout of the
pinned commit in the user-level cache (CLIMSTACK_CDI_GIT overrides where it is cloned from);
the command is built there once per commit (about 40 CPU-seconds; Go modules from the Go
proxy), atomically, and never at a centre that does not ask `verify --cdi`.

`cdi` reads only /etc/cdi and /var/run/cdi (its --spec-dirs fills a cache that `inject`
does not use), so each run gets a private mount namespace (`unshare`) in which a directory
holding only the spec is bound over /etc/cdi (an overlay in a scratch tmpfs gives /etc one
where the host has none; the host's /etc is unchanged) and an empty one over /var/run/cdi.
"""

import functools
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import jsonschema
import referencing
from referencing.jsonschema import DRAFT7

from climstack import pins
from climstack.common import atomic, cache, clones, golang, process, progress, stamp
from climstack.errors import ClimstackError, ToolFailure

PIN = pins.GitPin(
    name="container-device-interface",
    url_variable="CLIMSTACK_CDI_GIT",
    default_url="https://github.com/cncf-tags/container-device-interface.git",
    tag="v1.1.0",
    commit="98a7d735d9592c1ccca0130e06b0709f4b65ecbf",
)
#: static, reproducible, without symbols: what the binary's cache key names
BUILD = ("build", "-trimpath", "-ldflags=-s -w", "-o")
BUILD_ENV = {"CGO_ENABLED": "0", **golang.ENV}
#: the device's edits applied to this (its variables, mounts, hooks, devices are the spec's)
OCI_BASE = {"ociVersion": "1.0.2", "process": {"env": []}, "linux": {}}
#: $0: the spec directory, $1: a scratch directory; then the command
NAMESPACE = """set -e; mount -t tmpfs climstack-cdi "$1"; mkdir "$1/upper" "$1/work" "$1/empty"
if [ ! -d /etc/cdi ]; then
  mount -t overlay climstack-cdi -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
  mkdir /etc/cdi
fi
mount --bind "$0" /etc/cdi; [ ! -d /var/run/cdi ] || mount --bind "$1/empty" /var/run/cdi
shift; exec "$@"
"""
#: how `cdi validate` and `cdi devices` name a spec's errors and the devices found
SPEC_ERRORS = re.compile(r"^Spec file (?P<file>\S+?):?(?: failed version validation: (?P<v>.*))?$")
ERROR_LINE = re.compile(r"^\s+\d+: (?P<error>.*)$")
DEVICE_LINE = re.compile(r"^\s+\d+\. (?P<device>\S+)$")


def checkout() -> Path:
    """The pinned commit's files in the cache (cloned, atomically, if absent)."""
    final = pins.cache_dir() / PIN.cache_name
    if not final.is_dir():
        with progress.step(f"cloning {PIN.name} {PIN.tag} from {PIN.url}"):
            atomic.directory(final, lambda work: clones.clone(PIN, work, timeout=600))
    _check(final)
    return final


def _check(path: Path) -> None:
    """A checkout of PIN.commit (a detached HEAD names its commit)."""
    head = path / ".git" / "HEAD"
    found = head.read_text().strip() if head.is_file() else "no git checkout"
    if found != PIN.commit:
        raise ClimstackError(
            f"{path} holds {found}, not {PIN.name} {PIN.tag} ({PIN.commit})",
            fix=f"remove it (rm -rf '{path}'); it is cloned again when next needed",
        )


@functools.cache
def validator() -> jsonschema.protocols.Validator:
    """The upstream schema (schema/schema.json, whose $refs name schema/defs.json)."""
    root = checkout() / "schema"
    schema, defs = (json.loads((root / f).read_text()) for f in ("schema.json", "defs.json"))
    resource = referencing.Resource.from_contents(defs, default_specification=DRAFT7)
    registry = referencing.Registry().with_resource("defs.json", resource)
    return jsonschema.validators.validator_for(schema)(schema, registry=registry)


def binary() -> Path:
    """The reference `cdi`, built once per pinned commit (its Go caches thrown away)."""
    entry = cache.Entry(
        pins.cache_dir() / f"{PIN.name}-bin" / PIN.commit / "cdi",
        stamp.digest(PIN.commit, *BUILD, *map("=".join, sorted(BUILD_ENV.items()))),
    )
    if entry.current():
        return entry.path

    def fill(work: Path):
        process.run(
            [golang.go(f"the CDI reference command ({PIN.name} {PIN.tag}, cmd/cdi)"), *BUILD]
            + [str(work), "."],
            f"building {PIN.name} {PIN.tag} cmd/cdi",
            cwd=checkout() / "cmd" / "cdi",
            env=process.environ(**BUILD_ENV, **golang.caches(work.parent)),
            timeout=1800,
            fix=golang.PROXY_FIX,
        )

    what = f"building the CDI reference command ({PIN.name} {PIN.tag} cmd/cdi; once)"
    with progress.step(what):
        return entry.build(fill)


def run(spec_file: Path, *args: str) -> process.CompletedProcess:
    """`cdi ARGS` seeing only `spec_file` (copied as it is), in a mount namespace of its own;
    a relative argument is a file of the run's temporary directory (OCI_BASE: oci.json)."""
    command = [str(binary()), *args]
    unshare = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid():  # an ordinary user: root of a user namespace of its own
        unshare[1:1] = ["--user", "--map-root-user"]
    with tempfile.TemporaryDirectory(prefix="climstack-cdi-") as temporary:
        work = Path(temporary)
        (work / "specs").mkdir()
        (work / "scratch").mkdir()
        shutil.copyfile(spec_file, work / "specs" / Path(spec_file).name)
        (work / "oci.json").write_text(json.dumps(OCI_BASE))
        return process.run(
            [*unshare, "sh", "-c", NAMESPACE, str(work / "specs"), str(work / "scratch")]
            + command,
            f"the reference cdi {' '.join(args)}",
            cwd=work,
            timeout=120,
            check=False,
        )


def errors(spec_file: Path) -> list[str]:
    """What `cdi validate` finds wrong with the spec (errors of the namespace's own spec
    directories, such as a /var/run/cdi the host lacks, left out)."""
    proc = run(spec_file, "validate")
    ours, found, current = f"/etc/cdi/{Path(spec_file).name}", [], ""
    for line in proc.stdout.splitlines():
        if heading := SPEC_ERRORS.match(line):
            current = heading["file"]
            if heading["v"] and current == ours:
                found.append(heading["v"])
        elif (error := ERROR_LINE.match(line)) and current == ours:
            found.append(error["error"].replace(ours, str(spec_file)))
    if proc.returncode and not (found or "CDI cache has errors" in proc.stdout):
        raise ToolFailure(
            f"the reference cdi could not read {spec_file}: {(proc.stderr or proc.stdout)[-600:]}",
            fix="run as root, or where unprivileged user namespaces are allowed (`unshare -rm`)",
        )
    return found


def inject(spec_file: Path, device: str) -> tuple[dict | None, str]:
    """(the OCI spec `cdi inject` makes of OCI_BASE with `device`, what it said); None: it
    found no such device or could not inject it."""
    listed = run(spec_file, "devices").stdout.splitlines()
    if device not in {m["device"] for m in map(DEVICE_LINE.match, listed) if m}:
        return None, f"no device {device} (it lists: {' '.join(listed[1:]).strip() or 'none'})"
    proc = run(spec_file, "inject", "-o", "json", "oci.json", device)
    head, _, body = proc.stdout.partition("\n")
    if proc.returncode or head != "Updated OCI Spec:":
        return None, " ".join(proc.stdout.split())[-600:]
    return json.loads(body), ""
