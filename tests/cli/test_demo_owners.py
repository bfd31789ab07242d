"""The demo's simulated workloads carry their owners and teams the way their pods would
(agent/sources/simulated/plan.py), and the collector resolves them (collector/kube) with
no API server: `gpufleet report --by team` and `--by owner` leave no workload out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collector.ledger.store import Ledger
from tests.ports import free_port_block

#: the simulator's jobs by name (plan.py _NAMES) -> the controller that makes such pods
OWNER_KIND = {
    "diffusion-serve": "Deployment",
    "llm-pretrain": "PyTorchJob",
    "jupyter": "Notebook",
    "sweep-worker": "CronJob",
    "finetune-etl": "Job",
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo-owners") / "ledger.db"
    subprocess.run(
        [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "demo", "--plain",
         "--port", str(free_port_block(8)), "--history", "2", "--duration", "1", "--db", str(path)],
        capture_output=True, check=True, timeout=240,
    )  # fmt: skip
    return path


def report(db: Path, by: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "gpufleet", "report", "--db", str(db), "--by", by,
         "--period", "3h", "--format", "json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_every_simulated_workload_has_a_team_and_the_owner_its_kind_implies(db: Path) -> None:
    with Ledger.open(str(db)) as ledger:
        refs = [ref for ref, _ in ledger.usage_totals_by_workload()]
    assert len(refs) > 10
    for ref in refs:
        assert ref.team, ref
        if ref.kind == "slurm_job":
            assert ref.owner == f"User/{ref.user}", ref
            continue
        base = ref.name.rsplit("-", 1)[0]
        kind, namespace, owner = ref.owner.split("/")
        assert (kind, namespace) == (OWNER_KIND[base], ref.namespace), ref
        assert ref.team in owner and ref.user, ref  # one owner per team, a user per pod


@pytest.mark.parametrize("by", ["team", "owner"])
def test_the_report_by_team_and_by_owner_leaves_nobody_out(db: Path, by: str) -> None:
    answer = report(db, by)
    groups = [row["group"] for row in answer["rows"]]
    assert "(none)" not in groups  # every held GPU-second has a team and an owner
    assert "(unallocated)" in groups
    total = answer["total"]["gpu_hours"]  # rows rounded to 3 decimals each
    assert sum(r["gpu_hours"] for r in answer["rows"]) == pytest.approx(total, abs=0.02)
