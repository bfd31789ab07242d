"""The bottleneck verdicts (collector/analysis/bottleneck.py) on hand-built windows."""

from __future__ import annotations

import pytest

from collector.analysis.bottleneck import describe, diagnose
from collector.analysis.verdicts import BottleneckPolicy, Cause
from collector.analysis.work_window import HostWindow
from tests.collector.recommend.work_windows import IDLE_HOST, gpu, throttled, window

POLICY = BottleneckPolicy()
PRICE = 4.25  # per H100 hour


def prices(n: int) -> dict[str, float]:
    return {f"GPU-{i}": PRICE for i in range(n)}


def test_a_healthy_busy_job_gets_no_verdict() -> None:
    assert diagnose(window([gpu(i) for i in range(8)]), prices(8), POLICY) is None


def test_too_short_a_window_says_nothing() -> None:
    short = window([gpu(0, throttled_share=1.0, clock_ratio=0.6)], seconds=599.0)
    assert diagnose(short, prices(1), POLICY) is None


def test_input_bound_at_the_cpu_limit_reads_like_the_issue() -> None:
    starved = [gpu(i, sm_mean=0.38, used_share=0.38, sm_wobble=0.08, tensor_mean=0.2)
               for i in range(8)]  # fmt: skip
    host = HostWindow(samples=30, cpu_used_cores=4.0, cpu_limit_cores=4.0,
                      cpu_throttled_ratio=0.3, memory_pressure_ratio=0.0)  # fmt: skip
    d = diagnose(window(starved, host), prices(8), POLICY)
    assert d is not None and [v.cause for v in d.verdicts] == [Cause.INPUT_BOUND]
    assert d.unused_per_hour == pytest.approx(8 * PRICE * 0.62)
    assert d.verdicts[0].money_per_hour == pytest.approx(d.unused_per_hour)
    assert describe(d, "USD") == (
        "This job uses ~38 % of 8 H100s (21.08 USD/h unused); likely input-bound: host CPU "
        "at 100 % of its 4-core limit; try more data-loader workers or CPU. "
        "(~4 of its 8 GPUs would do at this use)"
    )


def test_cpu_at_its_limit_without_a_sawtooth_is_host_cpu_bound() -> None:
    flat = [gpu(0, sm_mean=0.15, used_share=0.15, sm_wobble=0.01)]
    host = HostWindow(30, 1.98, 2.0, 0.85, 0.0)
    d = diagnose(window(flat, host), prices(1), POLICY)
    assert d is not None and [v.cause for v in d.verdicts] == [Cause.HOST_CPU_BOUND]
    # the same GPUs with CPU to spare: nothing to say about the host
    assert diagnose(window(flat, IDLE_HOST), prices(1), POLICY) is None


def test_communication_bound_needs_every_gpu_in_step() -> None:
    busy_links = [gpu(i, sm_mean=0.3, used_share=0.3, nvlink_bytes_per_second=300e9)
                  for i in range(4)]  # fmt: skip
    d = diagnose(window(busy_links), prices(4), POLICY)
    assert d is not None and [v.cause for v in d.verdicts] == [Cause.COMMUNICATION_BOUND]
    one_quiet = [*busy_links[:3], gpu(3, sm_mean=0.3, used_share=0.3)]
    assert diagnose(window(one_quiet), prices(4), POLICY) is None


def test_throttled_and_no_tensor_share_the_unused_money() -> None:
    both = [gpu(i, throttled_share=1.0, clock_ratio=0.62, used_share=0.56, tensor_mean=0.001)
            for i in range(2)]  # fmt: skip
    d = diagnose(window(both), prices(2), POLICY)
    assert d is not None
    assert [v.cause for v in d.verdicts] == [Cause.THROTTLED, Cause.NO_TENSOR_CORES]
    assert [v.money_per_hour for v in d.verdicts] == pytest.approx([PRICE * 0.44] * 2)
    assert sum(v.money_per_hour for v in d.verdicts) == pytest.approx(d.unused_per_hour)


def test_a_lost_gpu_is_priced_alone_and_never_past_the_unused_share() -> None:
    lost = gpu(1, samples=360, unhealthy_samples=360, sm_mean=None, used_share=0.0)
    d = diagnose(window([gpu(0), lost]), prices(2), POLICY)
    assert d is not None and [v.cause for v in d.verdicts] == [Cause.GPU_FAULT]
    assert d.verdicts[0].gpu_uuids == ("GPU-1",)
    assert d.verdicts[0].money_per_hour == pytest.approx(PRICE)  # the lost GPU's whole price
    assert d.verdicts[0].money_per_hour <= d.unused_per_hour


def test_the_straggler_is_the_gpu_that_throttles_alone_not_its_waiting_peers() -> None:
    peers = [gpu(i, sm_mean=0.5, used_share=0.5) for i in range(3)]
    slow = gpu(3, sm_mean=0.95, throttled_share=1.0, clock_ratio=0.65, used_share=0.62)
    d = diagnose(window([*peers, slow]), prices(4), POLICY)
    assert d is not None and [v.cause for v in d.verdicts] == [Cause.STRAGGLER]
    assert d.verdicts[0].gpu_uuids == ("GPU-3",)
    assert d.verdicts[0].evidence["peers_waiting_share"] == pytest.approx(0.5)
    assert d.verdicts[0].evidence["node"] == "n1"
    # the job's lost time: peers at 50 % wait 45 % of the window for the one at 95 %, on
    # all four GPUs; not an equal split of the job's unused money
    assert d.verdicts[0].evidence["lost_share"] == pytest.approx(0.45)
    assert d.verdicts[0].money_per_hour == pytest.approx(4 * PRICE * 0.45)
    unused = PRICE * (3 * 0.5 + 0.38)
    assert d.unused_per_hour == pytest.approx(unused)
    assert d.unattributed_per_hour == pytest.approx(unused - 4 * PRICE * 0.45)


def test_a_starved_straggler_costs_the_gap_to_its_peers_on_every_gpu() -> None:
    peers = [gpu(i, sm_mean=0.6, used_share=0.6) for i in range(3)]
    starved = gpu(3, sm_mean=0.3, used_share=0.3)
    d = diagnose(window([*peers, starved]), prices(4), POLICY)
    assert d is not None and [v.cause for v in d.verdicts] == [Cause.STRAGGLER]
    assert d.verdicts[0].money_per_hour == pytest.approx(4 * PRICE * 0.3)


def test_a_straggler_never_takes_more_than_the_unused_share_left() -> None:
    # peers at 10 % wait 85 % for a GPU at 95 %: 5 working GPUs x 0.85 = 4.25 GPU-hours
    # lost, more than the 3.98 the job leaves unused once the lost GPU took its own
    peers = [gpu(i, sm_mean=0.1, used_share=0.1) for i in range(4)]
    slow = gpu(4, sm_mean=0.95, throttled_share=1.0, clock_ratio=0.65, used_share=0.62)
    lost = gpu(5, samples=360, unhealthy_samples=360, sm_mean=None, used_share=0.0)
    d = diagnose(window([*peers, slow, lost]), prices(6), POLICY)
    assert d is not None
    assert [v.cause for v in d.verdicts] == [Cause.GPU_FAULT, Cause.STRAGGLER]
    assert d.unused_per_hour == pytest.approx(PRICE * (4 * 0.9 + 0.38 + 1.0))
    assert d.verdicts[0].money_per_hour == pytest.approx(PRICE)
    assert d.verdicts[1].money_per_hour == pytest.approx(PRICE * (4 * 0.9 + 0.38))
    assert d.unattributed_per_hour == pytest.approx(0.0)


def test_half_the_gpus_throttled_is_the_job_throttled() -> None:
    d = diagnose(throttled(2), prices(2), POLICY)
    assert d is not None and [v.cause for v in d.verdicts] == [Cause.THROTTLED]
