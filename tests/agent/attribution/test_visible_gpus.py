"""A Slurm job's GPUs from its processes' environment (SLURM_JOB_GPUS, SLURM_STEP_GPUS,
CUDA_VISIBLE_DEVICES UUIDs): a GPU the job holds and runs nothing on is the job's, with
squeue absent. Fixture /proc trees 2004 and 2005 (tests/fixtures/proc/README.md); the
real Slurm 22.05 cluster's variables in tests/e2e/test_slurm_visible_gpus.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.attribution.attributor import Attributor
from agent.attribution.cgroups import visible_gpus
from tests.agent.attribution.test_attributor import (
    G0,
    G1,
    G2,
    G3,
    FakeClock,
    by_gpu,
    keys,
    node_gpus,
    sample,
    settings,
)


@pytest.mark.parametrize(
    ("environ", "devices"),
    [
        ({"SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"}, ("0", "1")),
        ({"SLURM_STEP_GPUS": "2", "CUDA_VISIBLE_DEVICES": "0"}, ("2",)),  # renumbered CVD
        ({"SLURM_JOB_GPUS": "3", "SLURM_STEP_GPUS": "2"}, ("3",)),  # the job's, first
        ({"CUDA_VISIBLE_DEVICES": f"{G0},{G3}"}, (G0, G3)),
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, ()),  # numbers alone may be renumbered: not trusted
        ({"CUDA_VISIBLE_DEVICES": f"0,{G3}"}, ()),
        ({"SLURM_JOB_GPUS": "NoDevFiles"}, ()),
        ({"SLURM_JOB_GPUS": " "}, ()),
        ({}, ()),
    ],
)
def test_which_variables_name_a_jobs_gpus(environ: dict[str, str], devices: tuple[str]) -> None:
    assert visible_gpus(environ) == devices


def test_a_jobs_gpu_with_no_process_of_its_own_is_held_by_the_job(tmp_path: Path) -> None:
    attributor = Attributor(settings(tmp_path, squeue_path=""), monotonic=FakeClock())
    # job 4545's process runs on GPU 0 only; SLURM_JOB_GPUS=0,1 says GPU 1 is its too
    result = by_gpu(attributor.annotate(node_gpus(), [sample(G0, 2004), sample(G1), sample(G3)]))
    assert keys(result[G0]) == keys(result[G1]) == ["slurm:4545"]
    (held,) = result[G1]
    assert (held.user, held.name, held.labels["slurm_account"]) == ("dave", "vit-train", "vision")
    assert result[G3] == ()  # not the job's: still unallocated
    # the process ends: nothing in /proc says the job holds GPU 1 any more
    result = by_gpu(attributor.annotate(node_gpus(), [sample(G0), sample(G1)]))
    attributor.close()
    assert result[G0] == result[G1] == ()


def test_uuids_in_cuda_visible_devices_name_the_gpus_and_a_gpus_own_process_wins(
    tmp_path: Path,
) -> None:
    attributor = Attributor(settings(tmp_path, squeue_path=""), monotonic=FakeClock())
    # job 4646 (on GPU 3) lists G0 and G3; job 4242 runs on G0 itself
    samples = [sample(G0, 2001), sample(G1), sample(G2), sample(G3, 2005)]
    result = by_gpu(attributor.annotate(node_gpus(), samples))
    attributor.close()
    assert keys(result[G3]) == ["slurm:4646"]
    assert keys(result[G0]) == ["slurm:4242"]  # its own process's job, not a listing's
    assert result[G1] == result[G2] == ()
