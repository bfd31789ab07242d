"""The bottleneck windows' per-minute fold (collector/fleet/windows.py, minutes.py): figures
worked out by hand from hand-made samples, and the same windows however a GPU's samples
are split into batches or ordered."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.model import GpuSample, Workload, WorkloadKind
from collector.analysis.work_window import GpuWindow
from collector.fleet.windows import WorkloadWindows

T0 = 1_800_000_000.0  # a minute boundary
POD = Workload(kind=WorkloadKind.KUBERNETES_POD, id="uid-a", name="a", namespace="ml")
JOB = Workload(kind=WorkloadKind.SLURM_JOB, id="7", slurm_job_id="7")
GEN4_X16_BYTES = 1.969e9 * 16


def sample(
    t: float, sm: float | None, holders: tuple[Workload, ...] = (POD,), **fields: object
) -> GpuSample:
    return GpuSample(timestamp=T0 + t, gpu_uuid="GPU-0", sm_activity=sm, workloads=holders,
                     **fields)  # type: ignore[arg-type]  # fmt: skip


def only_gpu(w: WorkloadWindows, now: float = T0 + 120) -> GpuWindow:
    (window,) = w.windows(now)
    (gpu,) = window.gpus
    return gpu


def test_a_minute_folded_by_hand() -> None:
    clocked = {"sm_clock_hertz": 1.5e9, "sm_clock_default_hertz": 2.0e9}
    pcie = {"pcie_link_generation_max": 4, "pcie_link_width_max": 16}
    w = WorkloadWindows()
    w.observe("n1", "H100", [
        sample(0, 0.2, dram_activity=0.1, **clocked, ecc_uncorrected_total=5,
               pcie_rx_bytes_per_second=0.5 * GEN4_X16_BYTES, **pcie),
        sample(1, 0.6, dram_activity=0.3, throttle_reasons=0x4, ecc_uncorrected_total=7,
               pcie_rx_bytes_per_second=0.1 * GEN4_X16_BYTES, **pcie),
        sample(2, 0.01, nvlink_tx_bytes_per_second=3e9, nvlink_rx_bytes_per_second=1e9,
               xid_errors=(79,), remapped_rows_pending=True),
        sample(3, None),
        sample(4, 0.9, healthy=False, xid_errors=(13,)),
    ])  # fmt: skip
    gpu = only_gpu(w)
    assert (gpu.samples, gpu.unhealthy_samples) == (5, 2)
    assert gpu.sm_mean == pytest.approx((0.2 + 0.6 + 0.01) / 3)
    assert gpu.dram_mean == pytest.approx(0.2)
    assert gpu.tensor_mean is None
    # SM x clock ratio (0.75 where both clocks are known), lost samples as 0, over 5
    assert gpu.used_share == pytest.approx((0.2 * 0.75 + 0.6 + 0.01) / 5)
    assert gpu.clock_ratio == pytest.approx(0.75)  # the one busy sample with clocks
    assert gpu.throttled_share == pytest.approx(1 / 2)  # of the two busy samples
    assert gpu.pcie_rx_share_mean == pytest.approx(0.3)
    assert gpu.pcie_rx_share_burst == pytest.approx(0.5)
    assert gpu.nvlink_bytes_per_second == pytest.approx(4e9)
    assert (gpu.fault_xid_samples, gpu.remap_pending_samples) == (1, 1)  # XID 13 is not hardware
    assert gpu.ecc_uncorrected_increase == 2
    assert gpu.sm_wobble == pytest.approx(
        math.sqrt((0.2**2 + 0.6**2 + 0.01**2) / 3 - ((0.2 + 0.6 + 0.01) / 3) ** 2)
    )


def test_holders_change_within_a_batch_and_free_gpus_fold_nothing() -> None:
    w = WorkloadWindows()
    w.observe("n1", "H100", [sample(0, 0.5), sample(1, 0.5, holders=(JOB,)),
                             sample(2, 0.3, holders=()), sample(3, 0.1)])  # fmt: skip
    by_key = {win.workload.key: win.gpus[0] for win in w.windows(T0 + 120)}
    assert set(by_key) == {POD.key, JOB.key}
    assert (by_key[POD.key].samples, by_key[POD.key].sm_mean) == (2, pytest.approx(0.3))
    assert (by_key[JOB.key].samples, by_key[JOB.key].sm_mean) == (1, pytest.approx(0.5))


def test_samples_at_or_before_after_are_not_folded() -> None:
    w = WorkloadWindows()
    w.observe("n1", "H100", [sample(0, 0.9), sample(1, 0.9), sample(2, 0.1)], after=T0 + 1)
    assert (only_gpu(w).samples, only_gpu(w).sm_mean) == (1, pytest.approx(0.1))


def fields(gpu: GpuWindow) -> list[object]:
    return [pytest.approx(v) if isinstance(v, float) else v for v in vars_of(gpu)]


def vars_of(gpu: GpuWindow) -> list[object]:
    return [getattr(gpu, name) for name in GpuWindow.__slots__]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 179),  # three minutes
            st.one_of(st.none(), st.floats(0, 1)),
            st.sampled_from([(POD,), (JOB,), (POD, JOB), ()]),
            st.one_of(st.none(), st.integers(0, 50)),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_same_windows_however_batched_or_ordered(
    rows: list[tuple[float, float | None, tuple[Workload, ...], int | None, bool]],
    rnd: random.Random,
) -> None:
    samples = [sample(t, sm, holders, ecc_uncorrected_total=ecc, healthy=ok, dram_activity=sm,
                      sm_clock_hertz=1e9, sm_clock_default_hertz=1.2e9, throttle_reasons=8)
               for t, sm, holders, ecc, ok in rows]  # fmt: skip
    one = WorkloadWindows()
    for s in samples:  # one sample per batch: the plain per-sample fold
        one.observe("n1", "H100", [s])
    shuffled = samples[:]
    rnd.shuffle(shuffled)
    batched = WorkloadWindows()
    while shuffled:
        k = rnd.randint(1, 8)
        batched.observe("n1", "H100", shuffled[:k])
        shuffled = shuffled[k:]
    now = T0 + 200
    expected = {w.workload.key: [fields(g) for g in w.gpus] for w in one.windows(now)}
    got = {w.workload.key: [vars_of(g) for g in w.gpus] for w in batched.windows(now)}
    assert got == expected
