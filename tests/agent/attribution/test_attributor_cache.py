"""The Attributor reuses a GPU's workloads between reads, and must notice every change.

Driven as the Sampler drives it: the same list of GPUs on every read (until a
rediscovery), a clock that moves one second per read. Ground truth is what the fixture
/proc and the kubelet say at that moment, never an earlier answer.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agent.attribution.attributor import Attributor
from agent.model import WorkloadKind
from tests.agent.attribution.test_attributor import (
    G0,
    G3,
    NODE_PODS,
    POD_1002,
    POD_1004,
    PROC,
    FakeClock,
    FakeKubelet,
    keys,
    node_gpus,
    pod,
    sample,
    serve_kubelet,
    settings,
)


def copied_proc(tmp_path: Path, *pids: int) -> Path:
    root = tmp_path / "proc"
    for pid in pids:
        shutil.copytree(PROC / str(pid), root / str(pid))
    return root


def test_a_process_whose_cgroup_changes_is_attributed_anew_after_the_refresh(
    tmp_path: Path,
) -> None:
    """/proc answers are refreshed per PID, out of step with the node-wide answers: the
    PID appears 2 s after the first read, so its refresh (7.5 s) falls between two
    refreshes of pod-resources and the mapping files (6 s and 11 s)."""
    proc = copied_proc(tmp_path, 1002, 1004)
    clock, gpus = FakeClock(), node_gpus()
    attributor = Attributor(settings(tmp_path, proc_root=proc), monotonic=clock)
    results = []
    for at, pids in [(0.0, ()), (1.0, ()), (2.0, (1002,)), (3.0, (1002,)), (4.0, (1002,))]:
        clock.now = 1000.0 + at
        results.extend(attributor.annotate(gpus, [sample(G0, *pids)]))
    assert [w.id for w in results[-1].workloads] == [POD_1002]
    # PID 1002 is reused by a process of the other pod (its cgroup now says so)
    shutil.copy(proc / "1004" / "cgroup", proc / "1002" / "cgroup")
    clock.now = 1006.0  # the node-wide answers are refreshed; PID 1002's answer is 4 s old
    [kept] = attributor.annotate(gpus, [sample(G0, 1002)])
    clock.now = 1007.5  # PID 1002's answer is 5.5 s old: read again
    [after] = attributor.annotate(gpus, [sample(G0, 1002)])
    attributor.close()
    assert [w.id for w in kept.workloads] == [POD_1002]
    assert [w.id for w in after.workloads] == [POD_1004]
    assert after.processes[0].workload == after.workloads[0]


def test_a_process_joining_or_leaving_a_gpu_shows_at_the_next_read(tmp_path: Path) -> None:
    proc = copied_proc(tmp_path, 1002, 1004)
    clock, gpus = FakeClock(), node_gpus()
    attributor = Attributor(settings(tmp_path, proc_root=proc), monotonic=clock)
    seen = []
    for pids in [(1002,), (1002,), (1002, 1004), (1004,), ()]:
        [result] = attributor.annotate(gpus, [sample(G0, *pids)])
        seen.append(([w.id for w in result.workloads], [p.workload for p in result.processes]))
        clock.now += 1.0
    attributor.close()
    assert [ids for ids, _ in seen] == [
        [POD_1002],
        [POD_1002],
        [POD_1002, POD_1004],
        [POD_1004],
        [],
    ]
    assert all(
        len(per_process) == n for (_, per_process), n in zip(seen, [1, 1, 2, 1, 0], strict=True)
    )
    assert all(w is not None and w.kind is WorkloadKind.KUBERNETES_POD for w in seen[2][1])


def test_a_new_pod_resources_answer_replaces_the_holders_with_the_same_gpu_list(
    tmp_path: Path,
) -> None:
    clock, gpus = FakeClock(), node_gpus()
    with serve_kubelet(tmp_path / "kubelet.sock", FakeKubelet(NODE_PODS[:1])) as kubelet:
        attributor = Attributor(settings(tmp_path), monotonic=clock)
        before = attributor.annotate(gpus, [sample(G0), sample(G3)])
        kubelet.pods = [pod("ml", "late", ("c", [("nvidia.com/gpu", [G3])]))]
        clock.now += 5.0
        after = attributor.annotate(gpus, [sample(G0), sample(G3)])
        attributor.close()
    assert [keys(s.workloads) for s in before] == [["pod:ml/trainer-0"], []]
    assert [keys(s.workloads) for s in after] == [[], ["pod:ml/late"]]
