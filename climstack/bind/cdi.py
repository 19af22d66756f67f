"""The bind plan as a Container Device Interface (CDI) spec, which podman (>= 4.1), Apptainer
1.5, containerd and Kubernetes apply: one device of kind KIND, named after the plan's site,
whose containerEdits are the plan's binds (read-only mounts), its environment and its device
nodes; no hooks (Apptainer ignores them). `spec_of` makes it from the Plan alone, so plan and
spec cannot disagree; every spec written or read is validated against the schema of the
version it declares (climstack/inputs/schemas/cdi-<version>.json).

A plan's specs live in its own spec directories, `<plan>/cdi/<digest>/` (one per variant of
the plan a launch runs: the oracle's adds a variable), never in /etc/cdi.
"""

import json
import re
from dataclasses import replace
from pathlib import Path

from climstack import inputs
from climstack.bind.plan import Plan
from climstack.common import atomic, stamp
from climstack.errors import ClimstackError

VERSION = "0.5.0"
VERSIONS = ("0.5.0",)  # those with a schema in climstack/inputs/schemas
KIND = "climstack.org/mpi"
FILE = "climstack.org-mpi.json"
#: every mount is read-only: the only option Apptainer 1.5 honours
MOUNT_OPTIONS = ["ro", "rbind", "nosuid"]
FIX = "write it again with `climstack bind SITE --format cdi --out PLAN_DIR`"


def device_name(plan: Plan) -> str:
    """The plan's device: its site's name (a site given by path: the directory's)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(plan.site).name).strip("-_")
    if not name:
        raise ClimstackError(
            f"site {plan.site!r} gives no CDI device name (alphanumerics, - and _)",
            fix="name the site's directory with letters or digits",
        )
    return name


def device(plan: Plan) -> str:
    """What a runtime is asked for: `--device climstack.org/mpi=<site>`."""
    return f"{KIND}={device_name(plan)}"


def spec_of(plan: Plan) -> dict:
    """The CDI spec of `plan` as written (its directory bound): mounts, env, device nodes."""
    if not plan.directory:
        raise ClimstackError(
            f"the plan of site {plan.site} has no directory: its links are not on disk",
            fix="write it first: `climstack bind SITE --out DIR`, then load DIR",
        )
    edits = {
        "env": [f"{key}={value}" for key, value in sorted(plan.runtime_env().items())],
        "mounts": [
            {"hostPath": src, "containerPath": dst, "options": list(MOUNT_OPTIONS)}
            for src, dst in plan.binds
        ],
    }
    if plan.devices:
        edits["deviceNodes"] = [{"path": node, "hostPath": node} for node in plan.devices]
    spec = {
        "cdiVersion": VERSION,
        "kind": KIND,
        "devices": [{"name": device_name(plan), "containerEdits": edits}],
    }
    return validate(spec, Path(plan.directory) / "cdi" / FILE)


def validate(spec, where: Path) -> dict:
    """`spec` (read from `where`), checked against the schema of the version it declares."""
    version = spec.get("cdiVersion") if isinstance(spec, dict) else None
    if version not in VERSIONS:
        raise ClimstackError(
            f"{where}: key cdiVersion: {version!r} is not a CDI version climstack reads",
            fix=f"one of {', '.join(VERSIONS)}; {FIX}",
        )
    return inputs.validate(spec, f"cdi-{version}", where, FIX)


def text(spec: dict) -> str:
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


def spec_dir(plan: Plan) -> Path:
    """The plan's spec directory holding its spec (written now if absent): what
    `--cdi-spec-dir` (podman) and `--cdi-dirs` (Apptainer 1.5) take."""
    content = text(spec_of(plan))
    directory = Path(plan.directory) / "cdi" / stamp.digest(content, length=10)
    if not (directory / FILE).is_file() or (directory / FILE).read_text() != content:
        directory.mkdir(parents=True, exist_ok=True)
        atomic.write_text(directory / FILE, content)
    return directory


def load(path: Path) -> dict:
    """A spec file, or the one spec of a spec directory, validated."""
    path = Path(path)
    if path.is_dir():
        found = sorted([*path.glob("*.json"), *path.glob("*.yaml")])
        if len(found) != 1:
            raise ClimstackError(
                f"{path} holds {len(found)} CDI specs, not one",
                fix="give the spec file itself",
            )
        path = found[0]
    parse = inputs.parse_yaml if path.suffix == ".yaml" else inputs.parse_json
    return validate(parse(path, FIX), path)


def named(spec: dict) -> dict[str, dict]:
    return {d["name"]: d["containerEdits"] for d in spec["devices"]}


def refusals(plan: Plan, spec: dict, where: Path) -> list[str]:
    """Why `spec` (read from `where`) does not carry `plan`: another kind, another plan's
    device, a bind it does not mount (read-only), a variable it lacks or changes."""
    ours = device_name(plan)
    if spec["kind"] != KIND:
        return [f"{where} is of kind {spec['kind']}, not climstack's {KIND}"]
    if ours not in named(spec):
        return [
            f"{where} describes device {', '.join(named(spec))}, a spec of another plan: "
            f"this plan (site {plan.site}) is device {ours}"
        ]
    edits = named(spec)[ours]
    mounts = {
        (m["hostPath"], m["containerPath"]): m.get("options", []) for m in edits.get("mounts", [])
    }
    mpi = {str(Path(p).parent) for p in plan.mpi.get("libraries", {}).values()}
    found = []
    for src, dst in plan.binds:
        what = " (the host MPI's directory)" if src in mpi else ""
        if (src, dst) not in mounts:
            found.append(f"{where} does not mount {src} at {dst}{what}, which the plan binds")
        elif "ro" not in mounts[(src, dst)]:
            found.append(f"{where} mounts {src} at {dst} writable, not read-only (ro)")
    env = dict(e.split("=", 1) for e in edits.get("env", []))
    for key, value in plan.runtime_env().items():
        if env.get(key) != value:
            found.append(f"{where} sets {key}={env.get(key, '(unset)')}, the plan {value}")
    return found


def applied(plan: Plan, spec: dict) -> Plan:
    """The plan as a runtime applying `spec` would run it: the spec's mounts and variables
    (what verify's model then reads) in place of the plan's."""
    edits = named(spec).get(device_name(plan), {})
    env = dict(e.split("=", 1) for e in edits.get("env", []))
    path = env.pop("LD_LIBRARY_PATH", "")
    return replace(
        plan,
        binds=[[m["hostPath"], m["containerPath"]] for m in edits.get("mounts", [])],
        env=env,
        separate_env={},
        library_path=path.split(":") if path else [],
        devices=[n.get("hostPath", n["path"]) for n in edits.get("deviceNodes", [])],
    )
