"""mpi_abi_wrapper's cost per call (climstack.bench.abi.call_cost): the loops of call_cost.c
built twice and run on a wrapped host MPI, the route checked by the library that answered
(a standard-ABI build that reached another MPI is refused), and the table with the floor
the per-call cost sets on osu_latency's 1 B ratio."""

import pytest

from climstack.bench.abi import abi_hosts, call_cost
from climstack.errors import ToolFailure

PRINTED = """comm_rank 1 8.00
type_size 1 6.00
irecv_isend_waitall 3 300.00
iprobe 1 20.00
allreduce 1 30.00
library: MPICH Version:      4.1.3
"""


def test_parsed_gives_ns_per_call_and_the_library():
    found = call_cost.parsed(PRINTED, "call_cost")
    assert found == {
        "comm_rank": 8.0,
        "type_size": 6.0,
        "irecv_isend_waitall": 100.0,  # three calls per iteration
        "iprobe": 20.0,
        "allreduce": 30.0,
        "library": "MPICH Version:      4.1.3",
    }


@pytest.mark.parametrize(
    "output",
    ["", PRINTED.replace("library: ", "lib "), "wrong: received 0, size 8\n" + PRINTED],
)
def test_parsed_refuses_what_is_not_a_whole_run(output):
    with pytest.raises(ToolFailure, match="call_cost on MPICH"):
        call_cost.parsed(output, "call_cost on MPICH")


def test_floor_is_two_calls_per_one_way_latency():
    assert call_cost.floor(25.0, 1.0) == pytest.approx(1.05)
    assert call_cost.floor(0.0, 0.3) == 1.0


def test_table_shows_each_call_and_the_latency_floor():
    runs = {"own": [10.0, 10.0, 10.0], "standard": [20.0, 20.0, 20.0]}
    record = {
        "mpich-4.1": {
            "title": "MPICH 4.1.3",
            "route": "wrapper",
            "calls": {"comm_rank": runs, call_cost.EXCHANGE: runs},
        }
    }
    text = call_cost.table(record, {"mpich-4.1": [0.5, 0.5]}, {"mpich-4.1": [1.04, 1.05, 1.03]})
    assert "| MPICH 4.1.3 | wrapper | comm_rank | 10.0 | 20.0 | +10.0 | 2.00 [2.00-2.00] |" in text
    assert "| MPICH 4.1.3 | +10.0 | 0.50 | 1.040 | 1.040 [" in text
    assert "medians of 3 alternating runs" in text
    assert "floor" not in call_cost.table(record)  # no latency measured: no floor


def test_the_wrapper_is_priced_on_the_host_mpi(tmp_path):
    record = call_cost.measure(["mpich-4.1"], tmp_path, repeats=1, iterations=20_000)
    entry = record["mpich-4.1"]
    assert entry["route"] == "wrapper"
    assert entry["library"].split() == ["MPICH", "Version:", "4.1.3"]
    assert set(entry["calls"]) == {"comm_rank", "type_size", call_cost.EXCHANGE, "iprobe",
                                   "allreduce"}  # fmt: skip
    for runs in entry["calls"].values():
        assert len(runs["own"]) == len(runs["standard"]) == 1
        assert runs["own"][0] > 0 and runs["standard"][0] > 0


def test_a_route_that_misses_the_host_mpi_is_refused(tmp_path, monkeypatch):
    """The standard-ABI build sent to MPICH 5.0.2's own libmpi_abi instead of the wrapper
    over MPICH 4.1.3: it would price another MPI, and the library it reports says so."""
    own_abi = abi_hosts.wheel_prefix("mpich") / "lib"
    monkeypatch.setattr(abi_hosts, "abi_libraries", lambda host, out: own_abi)
    with pytest.raises(ToolFailure, match="5.0.2.*priced another MPI"):
        call_cost.measure(["mpich-4.1"], tmp_path, repeats=1, iterations=1000)
