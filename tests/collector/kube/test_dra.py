"""GPUs allocated through Dynamic Resource Allocation, seen by the collector: its reader
finds resource.k8s.io by API discovery (v1, else v1beta1), watches ResourceClaims and
ResourceSlices, and a GPU a claim allocated is held by the claim's pod even when the agent
named no holder, not unallocated."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from collector.accounting.rates import Rates
from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.config import CarbonSettings, CollectorSettings
from collector.kube.claims import CLAIM, SLICE
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.kube.settings import KubeMetadataSettings
from collector.kube.store import MetadataStore
from collector.ledger.store import Ledger
from collector.records import GpuState
from collector.service import CollectorCore
from tests.collector.kube.rig import reader_settings, running, wait_for
from tests.fakes.kube_api import FakeKubeApi, recorded_cluster

CLAIMED = "GPU-4f1e6a2b-0c3d-4e5f-8a9b-0c1d2e3f4a51"  # gpu-1 of gpu-node-03's slice
FREE = "GPU-4f1e6a2b-0c3d-4e5f-8a9b-0c1d2e3f4a50"  # gpu-0: only another driver's claim
SERVE = ("ml", "llm-serve-6d8f9c7b5-x2v7q")
T0 = 1_767_225_600.0


def v1beta1(cluster: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The same objects as a 1.32/1.33 server serves them: resource.k8s.io/v1beta1, a
    device's attributes under ``basic``, a request's device class without ``exactly``."""
    out = copy.deepcopy(cluster)
    for obj in out[CLAIM] + out[SLICE]:
        obj["apiVersion"] = "resource.k8s.io/v1beta1"
    for claim in out[CLAIM]:
        for request in claim["spec"]["devices"]["requests"]:
            request.update(request.pop("exactly"))
    for resource_slice in out[SLICE]:
        for device in resource_slice["spec"]["devices"]:
            device["basic"] = {"attributes": device.pop("attributes"),
                               "capacity": device.pop("capacity")}  # fmt: skip
    return out


@pytest.fixture
def fake() -> Iterator[FakeKubeApi]:
    server = FakeKubeApi(recorded_cluster())
    yield server
    server.close()


def test_a_claimed_gpu_is_its_pods_through_v1(fake: FakeKubeApi, tmp_path: Path) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        wait_for(lambda: watcher.store.claim_holders(CLAIMED) == (SERVE,))
        assert watcher.dra == "v1"
        # another driver's device named gpu-0 in the same pool is not NVIDIA's gpu-0
        assert watcher.store.claim_holders(FREE) == ()
        fake.delete(CLAIM, *SERVE[:1], "llm-serve-6d8f9c7b5-x2v7q-gpu-7k2lm")
        wait_for(lambda: watcher.store.claim_holders(CLAIMED) == ())


def test_a_server_with_only_v1beta1_is_read_in_its_shape(tmp_path: Path) -> None:
    server = FakeKubeApi(v1beta1(recorded_cluster()), dra_versions=("v1beta1",))
    try:
        with running(reader_settings(server, tmp_path)) as watcher:
            wait_for(lambda: watcher.store.claim_holders(CLAIMED) == (SERVE,))
            assert watcher.dra == "v1beta1"
        paths = {r.path for r in server.requests if "resource.k8s.io/v" in r.path}
        assert paths == {"/apis/resource.k8s.io/v1beta1/resourceclaims",
                         "/apis/resource.k8s.io/v1beta1/resourceslices"}  # fmt: skip
    finally:
        server.close()


def test_without_dra_on_the_server_nothing_is_asked_and_it_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeKubeApi(recorded_cluster(), dra_versions=())
    try:
        with (
            caplog.at_level(logging.INFO, "collector.kube.watcher"),
            running(reader_settings(server, tmp_path)) as watcher,
        ):
            wait_for(lambda: any("no resource.k8s.io" in r.getMessage() for r in caplog.records))
            wait_for(lambda: watcher.store.counts()["pods"] == 6)
            assert watcher.dra is None
        assert not [r for r in server.requests if "resource.k8s.io/v" in r.path]
    finally:
        server.close()


def unheld_batch(seq: int, t: float) -> Batch:
    """What an agent without the kubelet's dynamic resources sends: nobody holds the GPU."""
    info = GpuInfo(uuid=CLAIMED, index=1, name="NVIDIA H100 80GB HBM3")
    sample = GpuSample(timestamp=T0 + t, gpu_uuid=CLAIMED, sm_activity=0.0, dram_activity=0.0,
                       power_watts=70.0, energy_joules=70.0 * t)  # fmt: skip
    return Batch(schema_version=SCHEMA_VERSION, node="gpu-node-03", agent_boot_id="b",
                 seq=seq, sent_at=T0 + t, gpus=(info,), samples=(sample,))  # fmt: skip


def fleet_after(tmp_path: Path, enricher: WorkloadEnricher | None) -> list[Any]:
    rates = Rates(PriceBook.example(), IntensityTable.default(), CarbonSettings())
    now = T0 + 300
    core = CollectorCore.build(CollectorSettings(), Ledger.open(str(tmp_path / "l.db")), rates,
                               lambda: now, enricher)  # fmt: skip
    try:
        for seq, t in enumerate(range(0, 300, 10), start=1):
            core.service.submit(msgspec.json.encode(unheld_batch(seq, t)), None, T0 + t).result(10)
        core.applier.tick(flush=True)
        return core.service.fleet(now)
    finally:
        core.close()
        core.ledger.close()


def test_the_collector_holds_a_claimed_gpu_for_its_pod_not_unallocated(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    (tmp_path / "alone").mkdir()
    (alone,) = fleet_after(tmp_path / "alone", None)
    assert alone.state is GpuState.UNALLOCATED  # what the agent's batches alone say
    with running(reader_settings(fake, tmp_path)) as watcher:
        wait_for(lambda: watcher.store.claim_holders(CLAIMED) == (SERVE,))
        wait_for(lambda: watcher.store.counts()["replicasets"] == 1)
        (view,) = fleet_after(
            tmp_path, WorkloadEnricher(keys_of(KubeMetadataSettings()), watcher.store)
        )
    assert view.state is GpuState.ALLOCATED_IDLE
    (holder,) = view.workloads
    assert (holder.key, holder.owner, holder.team) == (
        "pod:ml/llm-serve-6d8f9c7b5-x2v7q", "Deployment/ml/llm-serve", "llm-platform"
    )  # fmt: skip


def test_claims_and_slices_in_any_order_and_a_relist_replaces_them() -> None:
    cluster = recorded_cluster()
    store = MetadataStore(keys_of(KubeMetadataSettings()), (), 10, 10)
    store.replace(CLAIM, cluster[CLAIM])
    assert store.claim_holders(CLAIMED) == ()  # the slice naming the uuid is not read yet
    store.replace(SLICE, cluster[SLICE])
    assert store.claim_holders(CLAIMED) == (SERVE,)
    store.replace(CLAIM, [])
    assert store.claim_holders(CLAIMED) == ()


def test_claims_past_the_bound_are_counted_not_kept() -> None:
    cluster = recorded_cluster()
    store = MetadataStore(keys_of(KubeMetadataSettings()), (), 1, 1)
    store.replace(SLICE, cluster[SLICE])
    store.replace(CLAIM, list(reversed(cluster[CLAIM])))  # the other driver's claim first
    assert store.claim_holders(CLAIMED) == ()
    assert store.claims_dropped == 1
