"""The precise profile's own page (precise.md, precise.json beside the report): each
headline verdict of bind, hybrid and fabric as report.md prints it (one source,
climstack.bench.report.verdicts: "within 2%" only where the control's known 5% was found in
the same row); the control against bind; the A/A control's claims, observed and resampled
with and without the stopping rule, and the most claims the resampled rates allow (more:
the A/A control failed); the pinning and the load each run recorded; the start-up rows;
repeats and run time. A mode without pairs is named in its cells ("no pairs", "no native"),
and its row left out of the resampling."""

import json
import math
import statistics
from pathlib import Path

from climstack.bench.precise import coverage, profile
from climstack.bench.precise.stopping import Rule
from climstack.bench.report import headline, retries, stats, verdicts
from climstack.bench.results import collect, headers
from climstack.common import atomic

MODELS = ("bind", "hybrid", "fabric")


def _logs(records, mode, baseline) -> tuple[list[float], float]:
    """The log ratios of `mode` to `baseline` per repeat and their mean rounding bound
    (([], 0.0): no pairs)."""
    ratios = list(headline.repeat_ratios(records, mode, baseline).values())
    floor = statistics.fmean(r.bound for r in ratios) if ratios else 0.0
    return [math.log(r.value) for r in ratios], floor


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
        entry = {
            "benchmark": row.group.benchmark, "operation": row.group.name,
            "control": _cell(row.control) | {"caught": verdicts.caught(row.control)},
            "modes": {m: _cell(row.cells.get(m)) for m in (*MODELS, profile.AA)},
        }  # fmt: skip
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
        "retried": sum(headers.hung(h) > 0 and "failed" not in h for h in runs),
        "failures": [f"{f.benchmark} {f.mode} r{f.repeat}: {f.reason}" for f in found[1]],
    }  # fmt: skip


def _cell(c: headline.Cell | None) -> dict:
    """A cell as the page keeps it: the verdict as headline.rows decided it (verdicts.judge),
    the interval, and the runs retried after a hang; a mode not run: "-"."""
    if c is None:
        return {"verdict": "-"}
    return {"verdict": c.verdict, "ratio": c.ratio, "low": c.low, "high": c.high,
            "repeats": c.repeats, "retried": c.retried}  # fmt: skip


def _text(c: dict) -> str:
    retried = retries.text(c.get("retried", []))
    if c.get("ratio") is None:
        return c["verdict"]
    e = stats.Estimate(c["ratio"], c["low"], c["high"], c["repeats"])
    return f"{c['verdict']}: {stats.interval_text(e)}" + (f"; {retried}" if retried else "")


def aa_totals(page: dict) -> dict:
    """Over the rows with A/A pairs: the cells that claimed an effect, the most claims the
    cells' resampled rates allow (coverage.most_claims) and whether the claims stay within
    it (`ok`), the resampled rates' means; `unpaired`: the rows without A/A pairs."""
    paired = [r for r in page["rows"] if "aa_rates" in r]
    cells = [r["modes"][profile.AA] for r in paired]
    claimed = [c for c in cells if c["low"] > 1 or c["high"] < 1]
    rates = [r["aa_rates"] for r in paired]
    mean = {k: statistics.fmean(r[k] for r in rates) for k in rates[0]} if rates else {}
    most = coverage.most_claims([r["claims"] for r in rates])
    return {"cells": len(cells), "claimed": len(claimed), "bound": most,
            "ok": len(claimed) <= most, "unpaired": len(page["rows"]) - len(paired),
            **mean}  # fmt: skip


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
        f"- A/A (native again against native): {_aa(aa)}{_resampled(aa, page['cap'])}",
        f"- runs retried after a hang (each named in its cells): {page.get('retried', 0)}",
        f"- run time: {page['seconds'] / 60:.0f} min", "",
        "| benchmark | operation | " + " | ".join(f"{m} / native" for m in MODELS)
        + f" | control / bind | {profile.AA} / native |",
        "|---" * (4 + len(MODELS)) + "|",
    ]  # fmt: skip
    for r in rows:
        control = _text(r["control"])
        cells = [_text(r["modes"][m]) for m in (*MODELS, profile.AA)]
        lines.append(f"| {r['benchmark']} | {r['operation']} | " + " | ".join(
            [*cells[:-1], control, cells[-1]]) + " |")  # fmt: skip
    lines += [f"\nfailed: {f}" for f in page["failures"]]
    return "\n".join(lines) + "\n"


def _aa(aa: dict) -> str:
    """The A/A control's claims against the bound its resampling gives."""
    said = f"{aa['claimed']} of {aa['cells']} cells claim an effect"
    said += f" (no pairs in {aa['unpaired']} rows)" if aa["unpaired"] else ""
    if not aa["cells"]:
        return said
    bound = f"at most {aa['bound']} expected at {stats.CONFIDENCE:.0%} from the resampled rates"
    if aa["ok"]:
        return f"{said}, {bound}: passed"
    return (
        f"{said}, {bound}: **FAILED**: the method claims effects that are not there more"
        " often than its resampling allows, so the effects this page claims are not shown"
        " either"
    )


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
