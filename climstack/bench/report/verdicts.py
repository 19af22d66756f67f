"""The one place a verdict is decided: report.md, report.html and summary.json
(climstack.bench.report.headline, .report) and the precise profile's precise.md and
precise.json (climstack.bench.precise.summary) print what `judge` returns, never their own.

First the interval's verdict (stats.verdict: `within 2%`, `N% slower`/`faster`,
`inconclusive`), then the control's gate. In a batch of runs that ran the control
(catalogue.CONTROL: bind with every clock 5% fast), `within 2%` claims that no effect the
method can see is there, so it stands only where the method was shown to see one: where
the control, judged against bind, came out slower with its interval holding 1.05. Elsewhere
the cell reads NOT_CLAIMED. A batch without the control (`make local`, a centre's jobs)
keeps the interval's verdict, and the report's explanation says that no control gated it."""

from climstack.bench.report import stats
from climstack.bench.run import catalogue

WITHIN = f"within {stats.WITHIN:.0%}"
NOT_CLAIMED = f"not claimed: the control's {catalogue.SLOWDOWN:.0%} was not found in this row"
FOUND, NOT_FOUND = "found", "not found"


def caught(interval) -> bool:
    """Whether the control's interval against bind (a Cell or a stats.Estimate) says slower
    and holds the known effect."""
    low = getattr(interval, "low", None)
    return low is not None and 1 < low <= 1 + catalogue.SLOWDOWN <= interval.high


def judge(e: stats.Estimate, control: bool | None = None) -> str:
    """The verdict of `e`; `control`: whether the row's control was found (caught), None
    when its batch ran no control."""
    said = stats.verdict(e)
    return NOT_CLAIMED if said == WITHIN and control is False else said


def of_control(e: stats.Estimate) -> str:
    """The control's own verdict against bind: the interval's, then found or not found."""
    return f"{stats.verdict(e)}, {FOUND if caught(e) else NOT_FOUND}"


def ran_control(runs) -> set[tuple[str, str, str]]:
    """The batches (site, host, job) among `runs` (records, failures) that ran the control."""
    return {(x.site, x.host, x.job) for x in runs if x.mode == catalogue.CONTROL}


EXPLAINED = (
    f" In a batch that ran the control ({catalogue.CONTROL}: bind with every clock"
    f" {catalogue.SLOWDOWN:.0%} fast), `{WITHIN}` stands only in a row where the control,"
    f" against {catalogue.CONTROL_OF}, was found (slower, its interval holding"
    f" {1 + catalogue.SLOWDOWN:.2f}): elsewhere `{NOT_CLAIMED}`; a batch without it is not"
    " gated."
)
