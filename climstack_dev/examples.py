"""The Hypothesis settings every generated-input test shares: the same examples every run
(derandomized, no example database: CI never meets a new one by chance, and nothing is
written into the checkout), no deadline; how many, from CLIMSTACK_HYPOTHESIS_EXAMPLES or
the test's own default."""

import os

from hypothesis import HealthCheck, settings


def examples(default: int) -> settings:
    return settings(
        max_examples=int(os.environ.get("CLIMSTACK_HYPOTHESIS_EXAMPLES", default)),
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
