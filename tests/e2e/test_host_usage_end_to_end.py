"""A fake-NVML agent whose GPU process lives in a fixture cgroup ships its pod's host CPU
and memory in ``Batch.hosts``, and the real collector takes them into the pod's window.

The agent is the real one: NvmlSource over the fake NVML library (tests/fakes), the
Attributor and the CgroupHostReader sharing one /proc reader on a fixture /proc, the
Shipper posting over loopback HTTP to the collector ``gpufleet collector`` builds. Ground
truth is what the fixture cgroup files say between the two reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.attribution.attributor import Attributor
from agent.attribution.host_usage import CgroupHostReader
from agent.attribution.proc import ProcReader
from agent.config import AttributionSettings, ShipperSettings, SourceSettings
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.nvml.source import NvmlSource
from agent.stats import AgentStats
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from gpufleet.cli.collector import build_collector, serve
from gpufleet.cli.demo_fleet import SimClock
from tests.agent.attribution.test_host_usage import CONTAINER, POD_SLICE, UID, write_proc, write_v2
from tests.e2e.fleet_rig import TOKEN, free_port
from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario

STEP_SECONDS = 10.0
GPU_PID = 7001  # the a100_4x_no_gpm scenario's process on its first GPU
GIB = 2**30


def test_pod_host_cpu_reaches_the_collector(tmp_path: Path) -> None:
    cgroup, proc = tmp_path / "cgroup", tmp_path / "proc"
    cgroup.mkdir()
    (cgroup / "cgroup.controllers").write_text("cpu memory\n")
    write_proc(proc, GPU_PID, f"0::{CONTAINER}\n")
    clock, nvml_clock = SimClock(1_767_225_600.0), FakeClock()
    port = free_port()
    settings = CollectorSettings(
        server=ServerSettings(port=port, tokens=[TOKEN]),
        ledger=LedgerSettings(url=str(tmp_path / "ledger.db")),
    )
    collector = build_collector(settings, clock, tokens=frozenset([TOKEN]))
    server = serve(collector)
    stats = AgentStats()
    shipper_settings = ShipperSettings(
        url=f"http://127.0.0.1:{port}", token=TOKEN, spool_dir=tmp_path / "spool"
    )
    shipper = Shipper(shipper_settings, "gpu-node-1", stats, clock=clock)
    attribution = AttributionSettings(
        kubelet_socket=tmp_path / "no-kubelet.sock",
        proc_root=proc,
        gpustat_dir=tmp_path / "no-gpustat",
        squeue_path="",
    )
    procs = ProcReader(proc, attribution.refresh_seconds, clock)
    try:
        with install_fake_nvml(load_scenario("a100_4x_no_gpm"), nvml_clock):
            source = NvmlSource(SourceSettings(), stats, monotonic=nvml_clock)
            sampler = Sampler(
                source,
                stats,
                STEP_SECONDS,
                Attributor(attribution, stats, clock, procs=procs),
                shipper,
                clock=clock,
                hosts=CgroupHostReader(procs, cgroup, stats, monotonic=clock),
            )
            # 30 s of CPU in 10 s against a 4-core quota, throttled in 30 of 100 periods
            for usage_usec, periods, throttled in ((5_000_000, 10, 0), (35_000_000, 110, 30)):
                write_v2(cgroup, POD_SLICE, usage_usec, periods, throttled, "400000 100000",
                         current=6 * GIB, memory_max=str(32 * GIB))  # fmt: skip
                sampler.tick()
                clock.set(clock() + STEP_SECONDS)
                nvml_clock.advance(STEP_SECONDS)
            source.close()
        hosts = sampler.host_snapshot()
        shipper.flush()
        collector.core.applier.tick()
        windows = {w.workload.key: w for w in collector.core.fleet.workload_windows(clock())}
    finally:
        shipper.close()
        server.should_exit = True
        collector.stop()

    key = f"pod:/{UID}"  # no kubelet here: the pod is known by the UID in its cgroup
    assert [h.workload_key for h in hosts] == [key]
    snap = stats.snapshot()
    assert snap.batches_sent_total >= 1 and not snap.batches_refused_total
    assert not [f for _, f in snap.field_errors_total if f.startswith("host_cgroup")]
    host = windows[key].host
    assert host is not None and host.samples == 1  # the first reading has no rate
    assert host.cpu_used_cores == pytest.approx(3.0)
    assert host.cpu_limit_cores == 4.0
    assert host.cpu_throttled_ratio == pytest.approx(0.3)
    assert host.memory_pressure_ratio == pytest.approx(0.0125)
