"""Runs that hung and were run again, in the open: the runner stops a run still running at
its timeout and starts it again at once (climstack.bench.run.runner.again_if_hung), so the
retry keeps the run's place in the rotated order; its header says `hung=` (how many
attempts were stopped) and the record keeps the count (Record.hung). A headline cell whose
pairs include such a run names it, with the attempt that was timed."""

from climstack.bench.results.records import Record


def of(records: list[Record], modes, repeats) -> list[dict]:
    """The retried runs among `records` of `modes` and `repeats` (a cell's pairs): each
    {mode, repeat, hung: attempts stopped, timed: the attempt whose output counts}."""
    runs = {
        (r.mode, r.repeat): r.hung
        for r in records
        if r.hung and r.mode in modes and r.repeat in repeats
    }
    return [
        {"mode": mode, "repeat": repeat, "hung": hung, "timed": hung + 1}
        for (mode, repeat), hung in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]


def text(retried: list[dict]) -> str:
    """'' or 'retried after a hang: native r3 (1 attempt stopped, attempt 2 timed)'."""
    if not retried:
        return ""
    runs = [
        f"{r['mode']} r{r['repeat']} ({r['hung']} attempt{'s' * (r['hung'] != 1)} stopped,"
        f" attempt {r['timed']} timed)"
        for r in retried
    ]
    return "retried after a hang: " + ", ".join(runs)


def batch_text(records: list[Record]) -> str:
    """'' or how many of a batch's runs were retried, and where the retries ran."""
    runs = {(r.benchmark, r.mode, r.repeat) for r in records if r.hung}
    if not runs:
        return ""
    return (
        f"; {len(runs)} run{'s' * (len(runs) != 1)} retried after a hang, each at once in"
        " its place in the order (the next run waited for it), the retry timed"
    )
