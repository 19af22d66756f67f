"""The runs of `bench scale`: for each repeat, each rank count, each mode in the repeat's
rotated order, one timed launch, one sampled launch and one traced launch (strace slows it:
its time is not kept). A warm-up launch of each mode first (its image in the page cache,
its plan made, its program passed by the gate). Each run is one line of runs.jsonl, written
as it ends."""

import json
import os
import shutil
import time
from pathlib import Path

from climstack.bench.model import cases
from climstack.bench.precise import startup
from climstack.bench.run import matrix, runner
from climstack.bench.scale import growth, observe
from climstack.bench.scale.scale_modes import Launch, Modes
from climstack.common import progress
from climstack.errors import ClimstackError

RANKS = (2, 4, 8, 16, 32)
#: MOM6's start-up on as many ranks as this machine has cores: oversubscribed, its
#: initialisation's collectives busy-wait on shared cores (measured: natively 0.59 s on 2
#: ranks, 3.2 s on 4, 12.6 s on 8), which times the cores, not the start-up. One forcing
#: step (DT_FORCING = 3600 s: 4 dynamics steps) of its 180 x 90 case
MODEL_RANKS = (1, 2)
MODEL_SETTINGS = ("DAYMAX=0.041666666666666667",)
OSU_INIT = startup.OSU_INIT
MOM6 = next(b for b in runner.LOCAL if b.name == "mom6")


def record(mode: str, ranks: int, repeat: int, seen: observe.Observation) -> dict:
    peak = seen.footprint
    row = {
        "mode": mode, "ranks": ranks, "repeat": repeat, "wall_s": round(seen.wall_s, 4),
        "init_max_ms": seen.init_max_ms, "processes": peak.processes,
        "image_mounts": peak.image_mounts, "mount_namespaces": peak.mount_namespaces,
        "pss_mib": round(peak.pss_kib / 1024, 2),
    }  # fmt: skip
    if seen.calls:
        row["calls"] = seen.calls
        row["calls_all"] = sum(seen.calls.values())
        row["calls_shared"] = growth.shared_calls(mode, seen.calls)
    return row


def run(modes: Modes, out: Path, ranks=RANKS, repeats: int = 3, model_ranks=MODEL_RANKS):
    """Every run into out/runs.jsonl: osu_init's launches on `ranks`, MOM6's on
    `model_ranks` and its loader's calls; a mode that cannot launch is recorded once with
    why."""
    rows, runs = [], out / "runs.jsonl"
    refused: dict[str, str] = {}
    with progress.step(f"warming up {len(modes.names)} modes on {ranks[0]} ranks"):
        for name in modes.names:
            try:
                observe.timed(modes.launch(name, ranks[0], OSU_INIT))
            except (LookupError, ClimstackError) as why:
                refused[name] = " ".join(str(getattr(why, "message", why)).split())[:300]
    rows += [{"mode": name, "failed": why} for name, why in refused.items()]
    counts = sorted({*ranks, *model_ranks})
    cells = [(r, n, name) for r in range(1, repeats + 1) for n in counts
             for name in matrix.rotated(modes.names, r) if name not in refused]  # fmt: skip
    started = time.monotonic()
    with open(runs, "w") as log:
        for row in rows:
            log.write(json.dumps(row) + "\n")
        for done, (repeat, count, name) in enumerate(cells, start=1):
            measured = []
            if count in ranks:
                measured.append(
                    lambda: _measured(modes.launch(name, count, OSU_INIT), repeat, out)
                )
            if count in model_ranks:
                measured.append(lambda: _model(modes, name, count, repeat, out))
            for measure in measured:
                try:
                    rows.append(measure())
                except (ClimstackError, LookupError) as err:
                    why = " ".join(getattr(err, "message", str(err)).split())[:300]
                    rows.append({"mode": name, "ranks": count, "repeat": repeat, "failed": why})
                log.write(json.dumps(rows[-1]) + "\n")
                log.flush()
            progress.note(
                f"bench scale: {done} of {len(cells)} ({name}, {count} ranks, repeat "
                f"{repeat}; {time.monotonic() - started:.0f} s)"
            )
        if model_ranks and (loader := model_loader(modes, out)):
            rows.append(loader)
            log.write(json.dumps(loader) + "\n")
    return rows


def _model(modes: Modes, name: str, ranks: int, repeat: int, out: Path) -> dict:
    """MOM6's benchmark case for one forcing step: the seconds from the launch to its main
    loop (the run's wall time less FMS's `Main loop` and `Termination` clocks)."""
    work = (out / "model" / f"{name}.{ranks}.r{repeat}").resolve()
    launch = modes.launch(name, ranks, MOM6, work)
    case = cases.get(MOM6.case)
    ran = cases.run(case, work, launch.program, lambda _: launch.argv,
                    cases.parse_settings(list(MODEL_SETTINGS)), launch.env,
                    observe.TIMEOUT)  # fmt: skip
    to_loop = ran.wall_s - ran.clocks[cases.MAIN_LOOP] - ran.clocks.get("Termination", 0.0)
    shutil.rmtree(work)  # its outputs: MB a run, compared by bench local, not here
    return {"mode": name, "ranks": ranks, "repeat": repeat, "model": "MOM6",
            "model_wall_s": ran.wall_s, "to_main_loop_s": round(to_loop, 4)}  # fmt: skip


def model_loader(modes: Modes, out: Path) -> dict | None:
    """The calls MOM6's loader makes natively, once (LD_TRACE_LOADED_OBJECTS: its libraries
    found and mapped, nothing run): a climate model's look-ups per rank, beside osu_init's."""
    if "mom6" not in modes.prefixes:
        return None
    program = str(modes.prefixes["mom6"] / "bin" / "MOM6")
    argv = ["env", "LD_TRACE_LOADED_OBJECTS=1", program]
    launch = Launch("native", 1, argv, dict(os.environ), program, False, "", modes.install_root)
    calls = observe.traced(launch, out / "strace" / "mom6-loader").calls
    return {"loader": "MOM6", "mode": "native", "calls": calls,
            "calls_shared": calls["install tree"]}  # fmt: skip


def _measured(launch, repeat: int, out: Path) -> dict:
    timed = observe.timed(launch)
    timed.footprint = observe.sampled(launch).footprint
    timed.calls = observe.traced(launch, out / "strace" / f"{launch.mode}.{launch.ranks}").calls
    return record(launch.mode, launch.ranks, repeat, timed)
