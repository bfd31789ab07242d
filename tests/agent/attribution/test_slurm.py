"""Parsing ``squeue --json`` captured from the real Slurm 22.05 cluster (tests/fixtures/slurm)."""

from __future__ import annotations

import json

import pytest

from agent.attribution.slurm import (
    SlurmJob,
    SqueueError,
    expand_hostlist,
    gpu_indexes,
    parse_squeue_json,
)
from tests.paths import FIXTURES

CAPTURED = (FIXTURES / "slurm" / "squeue_22.05.8.json").read_text()


def test_the_captured_jobs_of_this_node_with_what_slurm_knows() -> None:
    jobs = parse_squeue_json(CAPTURED, "vm")
    job = SlurmJob
    assert jobs == {
        "1000": job("1000", "RUNNING", "train", "root", "team-a", "gpu", None, None, 2, (0, 1)),
        "1001": job("1001", "RUNNING", "infer", "root", "team-b", "debug", None, 5400.0, 1, (2,)),
        "1002": job("1002", "CANCELLED", "noacct", "root", None, "debug", None, None, 1, ()),
    }  # fmt: skip
    assert [j.holds_gpus for j in jobs.values()] == [True, True, False]


def test_squeue_ignores_its_filters_so_jobs_of_other_nodes_are_dropped_here() -> None:
    assert parse_squeue_json(CAPTURED, "other-node") == {}
    data = json.loads(CAPTURED)
    data["jobs"][0]["nodes"] = "gpu[07-08],vm"
    data["jobs"][0]["gres_detail"] = ["gpu:4(IDX:0-3)", "gpu:4(IDX:0-3)", "gpu:1(IDX:3)"]
    data["jobs"][0]["tres_per_node"] = "gres:gpu:4"
    job = parse_squeue_json(json.dumps(data), "vm")["1000"]
    assert job.gpu_indexes == (3,) and job.gpus == 12
    assert parse_squeue_json(json.dumps(data), "gpu08")["1000"].gpu_indexes == (0, 1, 2, 3)


def test_later_slurm_numbers_and_states_are_read_too() -> None:
    data = json.loads(CAPTURED)
    data["jobs"][1]["time_limit"] = {"set": True, "infinite": False, "number": 30}
    data["jobs"][1]["job_state"] = ["RUNNING"]
    data["jobs"][0]["time_limit"] = {"set": False, "infinite": True, "number": 0}
    jobs = parse_squeue_json(json.dumps(data), "vm")
    assert jobs["1001"].time_limit_seconds == 1800.0 and jobs["1001"].state == "RUNNING"
    assert jobs["1000"].time_limit_seconds is None


@pytest.mark.parametrize(
    ("detail", "indexes"),
    [
        ("gpu:2(IDX:0-1)", (0, 1)),
        ("gpu:h200:1(IDX:3)", (3,)),
        ("gpu:3(IDX:0,2-3)", (0, 2, 3)),
        ("gpu:a100:1(IDX:1),gpu:h100:1(IDX:4)", (1, 4)),
        ("gpu:0(IDX:N/A)", ()),
        ("", ()),
    ],
)
def test_gpu_indexes_of_a_gres_detail(detail: str, indexes: tuple[int, ...]) -> None:
    assert gpu_indexes(detail) == indexes


def test_hostlists() -> None:
    assert expand_hostlist("vm") == ["vm"]
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("") == []


@pytest.mark.parametrize("text", ["", "squeue: error: oops", '{"meta": {}}', "[]"])
def test_what_is_not_squeue_json_is_an_error(text: str) -> None:
    with pytest.raises(SqueueError, match="squeue --json"):
        parse_squeue_json(text, "vm")
