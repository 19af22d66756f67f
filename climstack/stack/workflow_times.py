"""A run of `make local` kept as a record: its tasks' (or, before the scheduler, its steps')
start, wall and CPU seconds and its slowest package builds, read from the tables it prints
(climstack.workflow, climstack.stack.build_times), with /usr/bin/time -v's totals when it
ran under it; and the tables of one run, or of a run before a change beside one after it
(`climstack bench workflow --report`).

    record = parse(log_text, label="after", cache="empty")
"""

import json
import re
from pathlib import Path

from climstack.errors import ClimstackError

#: the header of make local's first table: its tasks (or steps, before the scheduler)
HEADER = re.compile(r"^(task|step)\s+(start s\s+)?wall s\s+CPU s\s+CPU/wall$")
ROW = re.compile(r"^(?P<name>.+?)\s+(?P<numbers>-?[\d.]+(?:\s+-?[\d.]+){2,3})$")
BUILDS = re.compile(r"^slowest package builds\s+wall s$")
BUILD = re.compile(r"^(?P<package>\S+)\s+(?P<where>\S+)\s+(?P<seconds>[\d.]+)$")
BUILT = re.compile(r"^(?P<count>\d+) packages built, (?P<seconds>[\d.]+) s in all")
TIME_V = {
    "wall": re.compile(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)"),
    "user": re.compile(r"User time \(seconds\): ([\d.]+)"),
    "system": re.compile(r"System time \(seconds\): ([\d.]+)"),
}


def _clock(text: str) -> float:
    """h:mm:ss or m:ss(.ss) in seconds."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def parse(text: str, label: str, cache: str) -> dict:
    """The record of one make local's output (`text`: its stdout and stderr); `label` names
    the run (before, after), `cache` what it started from (empty, warm)."""
    lines = [line.rstrip() for line in text.splitlines()]
    start = next((i for i, line in enumerate(lines) if HEADER.match(line)), None)
    if start is None:
        raise ClimstackError(
            "no table of make local's tasks or steps in the output",
            fix="give the whole output of a make local that ran to its end",
        )
    tasks = []
    for line in lines[start + 1 :]:
        row = ROW.match(line)
        if not row:
            break
        numbers = [float(n) for n in row["numbers"].split()]
        if len(numbers) == 3:  # a step of before the scheduler: one after another
            numbers.insert(0, 0.0 if row["name"] == "total" else sum(t["wall"] for t in tasks))
        tasks.append(dict(zip(("name", "start", "wall", "cpu"), [row["name"], *numbers[:3]])))
    builds, built = [], {}
    at = next((i for i, line in enumerate(lines) if BUILDS.match(line)), None)
    for line in lines[at + 1 :] if at is not None else []:
        if found := BUILT.match(line):
            built = {"count": int(found["count"]), "seconds": float(found["seconds"])}
            break
        if found := BUILD.match(line):
            builds.append({**found.groupdict(), "seconds": float(found["seconds"])})
    totals = {key: _clock(m[1]) for key, rx in TIME_V.items() if (m := rx.search(text))}
    if not totals.get("user", 0) + totals.get("system", 0):  # a run stopped: its children
        totals = {}  # were not waited for, so time -v counted none of their CPU
    return {"label": label, "cache": cache, "tasks": tasks, "builds": builds, "built": built,
            "time": totals}  # fmt: skip


def load(path: Path) -> dict:
    """A record `parse` made, read back; refused (naming the file) if it is not one."""
    try:
        record = json.loads(Path(path).read_text())
        why = "" if isinstance(record, dict) and {"tasks", "label"} <= record.keys() else "keys"
    except (OSError, ValueError) as err:
        why = str(err)
    if why:
        raise ClimstackError(
            f"{path}: not a record of make local ({why})",
            fix="give a file `climstack bench workflow --record` or "
            "benchmarks/workflow_times.py wrote",
        )
    return record


def _total(record: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of the whole run: /usr/bin/time -v's if it ran under it (the
    workflow's own process included), else its table's total row."""
    times = record.get("time") or {}
    if {"wall", "user", "system"} <= times.keys():
        return times["wall"], times["user"] + times["system"]
    total = next(t for t in record["tasks"] if t["name"] == "total")
    return total["wall"], total["cpu"]


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def tasks_table(record: dict) -> list[str]:
    rows = ["| task | start s | wall s | CPU s | CPU/wall |", "|---|---:|---:|---:|---:|"]
    for t in record["tasks"]:
        ratio = t["cpu"] / t["wall"] if t["wall"] else 0.0
        name = f"**{t['name']}**" if t["name"] == "total" else t["name"]
        rows.append(f"| {name} | {t['start']:.0f} | {t['wall']:.0f} | {t['cpu']:.0f} | "
                    f"{ratio:.2f} |")  # fmt: skip
    return rows


def _occurrences(record: dict) -> dict[tuple[str, str, int], float]:
    """Each build's seconds by package, tree and its place among that pair's builds (two
    environments build NetCDF-C into one Spack tree: the native stack and the CCE stand-in)."""
    seen: dict[tuple[str, str], int] = {}
    found = {}
    for build in record["builds"]:
        pair = (build["package"], build["where"])
        seen[pair] = seen.get(pair, 0) + 1
        found[(*pair, seen[pair])] = build["seconds"]
    return found


def builds_table(records: list[dict]) -> list[str]:
    """The slowest package builds of each run, side by side by package and tree."""
    builds = [_occurrences(record) for record in records]
    keys = list(dict.fromkeys(key for found in builds for key in found))
    labels = " | ".join(f"{r['label']} wall s" for r in records)
    rows = [f"| package | tree | {labels} |", "|---|---|" + "---:|" * len(records)]
    for key in keys:
        cells = [f"{found[key]:.0f}" if key in found else "-" for found in builds]
        rows.append(f"| {key[0]} | {key[1]} | {' | '.join(cells)} |")
    built = " | ".join(
        f"{r['built']['count']} in {r['built']['seconds']:.0f} s" if r.get("built") else "-"
        for r in records
    )
    rows.append(f"| all packages built (overlapping) | | {built} |")
    return rows


def report(records: list[dict]) -> str:
    """Markdown: each run's tasks, the slowest package builds side by side, and, for two
    runs, the whole run's wall and CPU seconds before and after."""
    out = []
    for record in records:
        out += [f"{record['label']} (cache {record['cache']}):", "", *tasks_table(record), ""]
    out += ["slowest package builds (Spack's install_times.json, wall seconds):", ""]
    out += builds_table(records)
    if len(records) == 2:
        (wall_a, cpu_a), (wall_b, cpu_b) = map(_total, records)
        a, b = (r["label"] for r in records)
        out += ["", f"| make local | {a} | {b} | {b} - {a} |", "|---|---:|---:|---:|"]
        out.append(f"| wall | {_minutes(wall_a)} | {_minutes(wall_b)} | "
                   f"{wall_b - wall_a:+.0f} s |")  # fmt: skip
        out.append(f"| CPU s (user + system) | {cpu_a:.0f} | {cpu_b:.0f} | {cpu_b - cpu_a:+.0f} |")
        out.append(f"| cores kept busy (CPU / wall) | {cpu_a / wall_a:.2f} | "
                   f"{cpu_b / wall_b:.2f} | |")  # fmt: skip
    return "\n".join(out)
