"""The precise profile's own page (precise.md, precise.json beside the report): each
headline verdict of bind, hybrid and fabric, allowed to say "within 2%" only where the
control's known 5% was found in the same row; the control against bind; the A/A control's
claims, observed and resampled with and without the stopping rule; the pinning and the load
each run recorded; the start-up rows; repeats and run time."""

import json
import math
import statistics
from pathlib import Path

from climstack.bench.precise import coverage, profile
from climstack.bench.precise.stopping import Rule
from climstack.bench.report import headline, stats
from climstack.bench.results import collect, headers
from climstack.common import atomic

MODELS = ("bind", "hybrid", "fabric")
NOT_CLAIMED = "not claimed: the control's 5% was not found in this row"


def caught(c: headline.Cell | None) -> bool:
    """The control's cell says "slower" and its interval holds the known effect."""
    return bool(c and c.low is not None and 1 < c.low <= 1 + profile.SLOWDOWN <= c.high)


def gated(c: headline.Cell, control_caught: bool) -> str:
    """A cell's verdict, "within 2%" only where the control was caught."""
    within = c.verdict == f"within {stats.WITHIN:.0%}"
    return NOT_CLAIMED if within and not control_caught else c.verdict


def _logs(records, mode, baseline) -> tuple[list[float], float]:
    ratios = headline.repeat_ratios(records, mode, baseline).values()
    return [math.log(r.value) for r in ratios], statistics.fmean(r.bound for r in ratios or [0])


def _headers(raw: Path) -> list[dict]:
    return [headers.parse(p.read_text().split("\n", 1)[0]) for p in sorted(raw.glob("*.out"))]


def build(out: Path, repeats: dict[str, int], rule: Rule, seconds: float) -> dict:
    """The page's content, from out/raw."""
    found = collect.read_paths([out / "raw"])
    checks = collect.read_checks([out / "raw"])
    groups = headline.grouped(found[0])
    rows = []
    for row in headline.rows(found[0], found[1], checks):
        mine = groups[row.group]
        control = headline.cell(mine, profile.CONTROL, "bind")
        entry = {
            "benchmark": row.group.benchmark, "operation": row.group.name,
            "control": _cell(control) | {"caught": caught(control)},
            "modes": {m: _cell(row.cells.get(m)) for m in (*MODELS, profile.AA)},
        }  # fmt: skip
        for m in MODELS:
            if m in row.cells:
                entry["modes"][m]["verdict"] = gated(row.cells[m], caught(control))
        aa_logs, floor = _logs(mine, profile.AA, headline.BASELINE)
        if len(aa_logs) >= 2:
            entry["aa_rates"] = coverage.rates(aa_logs, rule, floor=floor)
        bind_logs, floor = _logs(mine, profile.CONTROL, "bind")
        if len(bind_logs) >= 2:  # a true 5% in the control's own noise: found how often
            entry["power"] = coverage.rates(bind_logs, rule, 1 + profile.SLOWDOWN, floor)
        rows.append(entry)
    runs = [h for h in _headers(out / "raw") if "pinned" in h]
    busy = [float(h["busy"]) for h in runs if "busy" in h]
    return {
        "rule": rule.text(), "target": rule.target, "cap": rule.cap,
        "min_repeats": rule.min_repeats, "warmups": profile.WARMUPS,
        "slowdown": profile.SLOWDOWN, "repeats": repeats, "seconds": round(seconds),
        "runs": len(runs), "pinned": sum(h["pinned"] == "yes" for h in runs),
        "busy_median": statistics.median(busy) if busy else None,
        "busy_max": max(busy, default=None), "rows": rows,
        "failures": [f"{f.benchmark} {f.mode} r{f.repeat}: {f.reason}" for f in found[1]],
    }  # fmt: skip


def _cell(c: headline.Cell | None) -> dict:
    if c is None:
        return {"verdict": "-"}
    return {"verdict": c.verdict, "ratio": c.ratio, "low": c.low, "high": c.high,
            "repeats": c.repeats}  # fmt: skip


def _text(c: dict) -> str:
    if c.get("ratio") is None:
        return c["verdict"]
    e = stats.Estimate(c["ratio"], c["low"], c["high"], c["repeats"])
    return f"{c['verdict']}: {stats.interval_text(e)}"


def aa_totals(page: dict) -> dict:
    """Over the rows: A/A cells that claimed an effect, and the resampled rates' means."""
    cells = [r["modes"][profile.AA] for r in page["rows"] if r["modes"][profile.AA].get("low")]
    claimed = [c for c in cells if c["low"] > 1 or c["high"] < 1]
    rates = [r["aa_rates"] for r in page["rows"] if "aa_rates" in r]
    mean = {k: statistics.fmean(r[k] for r in rates) for k in rates[0]} if rates else {}
    return {"cells": len(cells), "claimed": len(claimed), **mean}


def markdown(page: dict) -> str:
    aa, rows = aa_totals(page), page["rows"]
    caught_rows = [r for r in rows if r["control"]["caught"]]
    lines = [
        "# Precise profile", "",
        f"- stopping rule: {page['rule']}; {page['warmups']} discarded warm-up run per "
        "benchmark and mode; modes back to back per benchmark, the order rotated per repeat",
        "- repeats: " + ", ".join(f"{b} {n}" for b, n in page["repeats"].items()),
        f"- pinned (each rank on a CPU of its own, read inside the run): {page['pinned']} of "
        f"{page['runs']} runs; CPUs in use by others before a run: median "
        f"{_share(page['busy_median'])}, max {_share(page['busy_max'])}",
        f"- control: bind with clocks {page['slowdown']:.0%} fast, against bind: found "
        f"(slower, interval holding {1 + page['slowdown']:.2f}) in {len(caught_rows)} of "
        f"{len(rows)} rows",
        f"- A/A (native again against native): {aa['claimed']} of {aa['cells']} cells "
        f"claim an effect{_resampled(aa, page['cap'])}",
        f"- run time: {page['seconds'] / 60:.0f} min", "",
        "| benchmark | operation | " + " | ".join(f"{m} / native" for m in MODELS)
        + f" | control / bind | {profile.AA} / native |",
        "|---" * (4 + len(MODELS)) + "|",
    ]  # fmt: skip
    for r in rows:
        control = _text(r["control"]) + ("" if r["control"]["caught"] else " (not found)")
        cells = [_text(r["modes"][m]) for m in (*MODELS, profile.AA)]
        lines.append(f"| {r['benchmark']} | {r['operation']} | " + " | ".join(
            [*cells[:-1], control, cells[-1]]) + " |")  # fmt: skip
    lines += [f"\nfailed: {f}" for f in page["failures"]]
    return "\n".join(lines) + "\n"


def _resampled(aa: dict, cap: int) -> str:
    if "claims" not in aa:
        return ""
    return (
        f"; resampled, the rule claims one in {aa['claims']:.1%} of trials, a fixed {cap} "
        f"repeats in {aa['claims_fixed']:.1%} (nominal {1 - stats.CONFIDENCE:.0%})"
    )


def _share(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def write(out: Path, page: dict) -> list[Path]:
    text, data = out / "precise.md", out / "precise.json"
    atomic.write_text(text, markdown(page))
    atomic.write_text(data, json.dumps(page, indent=1) + "\n")
    return [text, data]
