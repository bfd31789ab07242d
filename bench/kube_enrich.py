"""The ingest-side enricher (collector/kube/enrich.py) per batch, in a busy cluster.

A MetadataStore holds ``--pods`` pods (the recorded Deployment pod, renamed; a ReplicaSet
and Deployment per 10 pods) and their namespaces. Each batch is one node's 8 GPUs, each
held by one of its pods. Between two batches the cluster's watches report ``--events``
changes of *other* pods (a busy cluster: every pod's status moves). Three columns:

- quiet: no watch events between batches (the memo answers);
- busy: ``--events`` other pods' events between batches;
- recompute: the memo emptied before each batch, what every batch cost when the memo was
  keyed on the store's generation (any watch event anywhere recomputed every pod).

The figure is microseconds of CPU per batch (``time.process_time``), and busy/recompute
side by side. Run it on an older tree too (it uses only the enricher's public calls).
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from typing import Any

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, Workload, WorkloadKind
from bench.harness import print_table
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.kube.settings import KubeMetadataSettings
from collector.kube.store import NAMESPACE, POD, REPLICASET, MetadataStore
from tests.fakes.kube_api import recorded_cluster

GPUS_PER_NODE = 8


def cluster_store(pods: int) -> tuple[MetadataStore, list[dict[str, Any]]]:
    cluster = recorded_cluster()
    template, rs_template = cluster[POD][0], cluster[REPLICASET][0]
    objects, sets = [], []
    for i in range(pods):
        obj = copy.deepcopy(template)
        obj["metadata"].update(name=f"serve-{i}", uid=f"uid-{i}", resourceVersion=str(i))
        obj["metadata"]["ownerReferences"][0]["name"] = f"serve-rs-{i // 10}"
        objects.append(obj)
    for j in range(pods // 10 + 1):
        rs = copy.deepcopy(rs_template)
        rs["metadata"]["name"] = f"serve-rs-{j}"
        rs["metadata"]["ownerReferences"][0]["name"] = f"serve-{j}"
        sets.append(rs)
    store = MetadataStore(keys_of(KubeMetadataSettings()), (), pods + 1, pods + 1)
    store.replace(NAMESPACE, cluster[NAMESPACE])
    store.replace(REPLICASET, sets)
    store.replace(POD, objects)
    return store, objects


def node_batch(node: int, seq: int) -> Batch:
    gpus, samples = [], []
    for g in range(GPUS_PER_NODE):
        name = f"serve-{node * GPUS_PER_NODE + g}"
        uuid = f"GPU-{node}-{g}"
        gpus.append(GpuInfo(uuid=uuid, index=g, name="NVIDIA H100 80GB HBM3"))
        holder = Workload(kind=WorkloadKind.KUBERNETES_POD, id=f"uid-{name}", name=name,
                          namespace="ml")  # fmt: skip
        samples.append(GpuSample(timestamp=float(seq), gpu_uuid=uuid, sm_activity=0.5,
                                 workloads=(holder,)))  # fmt: skip
    return Batch(schema_version=SCHEMA_VERSION, node=f"node-{node}", agent_boot_id="b",
                 seq=seq, sent_at=float(seq), gpus=tuple(gpus), samples=tuple(samples))  # fmt: skip


def per_batch_us(
    enricher: WorkloadEnricher, batches: list[Batch], between: Callable[[int], None]
) -> float:
    for batch in batches:  # warm the memo
        enricher(batch)
    spent = 0.0
    for i, batch in enumerate(batches):
        between(i)
        start = time.process_time()
        enricher(batch)
        spent += time.process_time() - start
    return spent / len(batches) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=2_000)
    parser.add_argument("--events", type=int, default=5, help="other pods' events per batch")
    parser.add_argument("--quick", action="store_true", help="smoke sizes")
    args = parser.parse_args()
    pods, count = (800, 100) if args.quick else (args.pods, args.batches)
    store, objects = cluster_store(pods)
    nodes = pods // GPUS_PER_NODE // 2  # half the pods hold the GPUs batches name
    batches = [node_batch(i % nodes, i) for i in range(count)]
    churn = objects[nodes * GPUS_PER_NODE :]
    version = [10 * pods]

    def busy(_: int) -> None:
        for _ in range(args.events):
            version[0] += 1
            obj = churn[version[0] % len(churn)]
            obj["metadata"]["resourceVersion"] = str(version[0])
            store.apply(POD, "MODIFIED", obj)

    enricher = WorkloadEnricher(keys_of(KubeMetadataSettings()), store)
    quiet = per_batch_us(enricher, batches, lambda _: None)
    hot = per_batch_us(enricher, batches, busy)
    cold = per_batch_us(enricher, batches, lambda _: enricher._memo.clear())
    print(f"{pods:,} pods, {count:,} batches of {GPUS_PER_NODE} GPUs, "
          f"{args.events} other pods' watch events between batches")  # fmt: skip
    print_table([{
        "quiet us/batch": f"{quiet:.1f}", "busy us/batch": f"{hot:.1f}",
        "recompute us/batch": f"{cold:.1f}", "busy/recompute": f"{hot / cold:.2f}x",
    }])  # fmt: skip


if __name__ == "__main__":
    main()
