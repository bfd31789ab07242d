"""Pod metadata read by one list+watch per resource, through the real ``kubernetes``
client, from a local server speaking the API's list/watch protocol with recorded objects:
owner chains, teams and users, watch events, bookmarks, 410 Gone and relist, refusals."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.kube.store import DAEMONSET, JOB, NAMESPACE, POD, REPLICASET, STATEFULSET
from tests.collector.kube.rig import reader_settings, running, wait_for
from tests.fakes.kube_api import FakeKubeApi, recorded_cluster

ALL = {POD: 6, NAMESPACE: 3, REPLICASET: 1, JOB: 1, STATEFULSET: 1, DAEMONSET: 1}


@pytest.fixture
def fake() -> Iterator[FakeKubeApi]:
    server = FakeKubeApi(recorded_cluster())
    yield server
    server.close()


def watch_of(watcher, resource):  # type: ignore[no-untyped-def]
    return next(w for w in watcher.watches if w.resource == resource)


def test_owner_chains_teams_and_users_from_the_recorded_cluster(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        store = watcher.store
        wait_for(lambda: store.counts() == ALL)
        serve = store.attribution("ml", "llm-serve-6d8f9c7b5-x2v7q")
        assert serve is not None
        assert serve.chain == (("ReplicaSet", "llm-serve-6d8f9c7b5"), ("Deployment", "llm-serve"))
        assert serve.owner == "Deployment/ml/llm-serve"
        # no team or user on the pod: its namespace's label and annotation
        assert (serve.team, serve.user, serve.priority_class) == (
            "llm-platform", "ml-oncall", "serving-high"
        )  # fmt: skip
        cron = store.attribution("ml", "nightly-eval-29310240-8kq4z")
        assert cron is not None and cron.owner == "CronJob/ml/nightly-eval"
        assert cron.team == "eval"  # the pod's own label wins over the namespace's
        notebook = store.attribution("kubeflow-alice", "gpu-notebook-0")
        assert notebook is not None and notebook.chain == (
            ("StatefulSet", "gpu-notebook"), ("Notebook", "gpu-notebook")
        )  # through the watched StatefulSet's ownerReference  # fmt: skip
        assert notebook.owner == "Notebook/kubeflow-alice/gpu-notebook"
        assert (notebook.team, notebook.user) == ("kubeflow-profile", "alice@example.com")
        ray = store.attribution("ml", "raycluster-kuberay-head-7xwz9")
        assert ray is not None and (ray.owner, ray.team) == (
            "RayCluster/ml/raycluster-kuberay",
            "rl",
        )
        bert = store.attribution("ml", "bert-finetune-worker-0")
        assert bert is not None and bert.owner == "PyTorchJob/ml/bert-finetune"
        assert (bert.team, bert.user, bert.queue, bert.priority_class) == (
            "nlp", "bo", "team-nlp-gpu", "batch-low"
        )  # fmt: skip
        bare = store.attribution("default", "debug-shell")
        assert bare is not None and (bare.owner, bare.team, bare.user) == ("", "", "")
        assert store.attribution("ml", "no-such-pod") is None


def test_watch_events_add_change_and_remove_pods(fake: FakeKubeApi, tmp_path: Path) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        store = watcher.store
        wait_for(lambda: store.counts() == ALL)
        pod = copy.deepcopy(recorded_cluster()["pods"][0])
        pod["metadata"]["name"] = "llm-serve-6d8f9c7b5-k9p2d"
        pod["metadata"]["labels"]["team"] = "serving"
        fake.put(POD, pod)
        wait_for(lambda: store.attribution("ml", "llm-serve-6d8f9c7b5-k9p2d") is not None)
        added = store.attribution("ml", "llm-serve-6d8f9c7b5-k9p2d")
        assert added is not None and (added.team, added.owner) == (
            "serving",
            "Deployment/ml/llm-serve",
        )
        namespace = copy.deepcopy(recorded_cluster()["namespaces"][0])
        namespace["metadata"]["labels"]["team"] = "inference"
        fake.put(NAMESPACE, namespace)
        wait_for(
            lambda: (
                getattr(store.attribution("ml", "llm-serve-6d8f9c7b5-x2v7q"), "team", "")
                == "inference"
            )
        )
        fake.delete(POD, "ml", "llm-serve-6d8f9c7b5-k9p2d")
        wait_for(lambda: store.attribution("ml", "llm-serve-6d8f9c7b5-k9p2d") is None)
        assert watch_of(watcher, POD).stats.lists == 1  # all of it through the one watch


def test_gone_relists_and_forgets_what_the_watch_missed(fake: FakeKubeApi, tmp_path: Path) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        store = watcher.store
        wait_for(lambda: store.counts() == ALL)
        # the pod goes while its deletion falls out of the history the server keeps
        fake.forget(POD, "default", "debug-shell")
        fake.compact(POD)
        pods = watch_of(watcher, POD)
        wait_for(lambda: pods.stats.relists_after_gone == 1)
        wait_for(lambda: store.attribution("default", "debug-shell") is None)
        assert len(fake.lists(POD)) == 2
        assert store.counts()[POD] == 5


def test_a_bookmark_moves_the_watch_on_so_reconnecting_needs_no_relist(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    with running(reader_settings(fake, tmp_path)) as watcher:
        store = watcher.store
        wait_for(lambda: store.counts() == ALL)
        pods = watch_of(watcher, POD)
        namespace = copy.deepcopy(recorded_cluster()["namespaces"][2])
        fake.put(NAMESPACE, namespace)  # the version moves on, not through pods
        version = fake.version
        fake.bookmark(POD)
        wait_for(lambda: pods.stats.bookmarks == 1)
        opened = len(fake.watches(POD))  # the watch that got the bookmark, or one before
        fake.compact(POD, below=version)  # a watch from before the bookmark would get 410
        wait_for(lambda: len(fake.watches(POD)) > opened)
        assert fake.watches(POD)[opened].query["resourceVersion"] == str(version)
        assert fake.watches(POD)[opened].query["allowWatchBookmarks"] == "true"
        assert pods.stats.relists_after_gone == 0 and pods.stats.lists == 1


def test_a_forbidden_resource_names_the_missing_rbac_once_and_the_rest_works(
    fake: FakeKubeApi, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake.forbid.add(JOB)
    with (
        caplog.at_level(logging.WARNING, "collector.kube.watcher"),
        running(reader_settings(fake, tmp_path)) as watcher,
    ):
        store = watcher.store
        jobs = watch_of(watcher, JOB)
        wait_for(lambda: jobs.stats.failures >= 3)
        wait_for(lambda: store.counts()[POD] == 6)
        cron = store.attribution("ml", "nightly-eval-29310240-8kq4z")
        assert cron is not None and cron.owner == "Job/ml/nightly-eval-29310240"  # no parent
    forbidden = [r.getMessage() for r in caplog.records if "403" in r.getMessage()]
    assert forbidden == [
        "kubernetes metadata (jobs): forbidden (403) to list and watch jobs in API group "
        "batch: grant the collector's service account the verbs get, list, watch on jobs"
    ]


def test_bad_credentials_are_named_and_nothing_is_kept(
    fake: FakeKubeApi, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "token").write_text("expired-token\n", encoding="utf-8")
    with (
        caplog.at_level(logging.WARNING, "collector.kube.watcher"),
        running(reader_settings(fake, tmp_path)) as watcher,
    ):
        wait_for(lambda: watch_of(watcher, POD).stats.failures >= 3)
        assert watcher.store.counts()[POD] == 0
    pods = [r.getMessage() for r in caplog.records if "(pods)" in r.getMessage()]
    assert pods == [
        "kubernetes metadata (pods): the API server refused the credentials (401 "
        "Unauthorized): check kubernetes.token_file or kubernetes.kubeconfig"
    ]


def test_pods_past_the_bound_are_counted_not_kept(fake: FakeKubeApi, tmp_path: Path) -> None:
    with running(reader_settings(fake, tmp_path, max_pods=4)) as watcher:
        store = watcher.store
        wait_for(lambda: store.counts()[POD] == 4)
        assert store.dropped[POD] == 2


def test_lists_are_read_in_pages(
    fake: FakeKubeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("collector.kube.watcher.PAGE", 4)
    with running(reader_settings(fake, tmp_path)) as watcher:
        wait_for(lambda: watcher.store.counts() == ALL)
    pages = fake.lists(POD)
    assert [p.query.get("continue") for p in pages[:2]] == [None, "4"]


def test_a_daemonset_pod_is_owned_through_the_watched_daemonset(
    fake: FakeKubeApi, tmp_path: Path
) -> None:
    """A GPU operator DaemonSet's pod: ClusterPolicy -> DaemonSet -> pod, the DaemonSet's
    ownerReference read from its own watch (the recorded object)."""
    with running(reader_settings(fake, tmp_path)) as watcher:
        store = watcher.store
        wait_for(lambda: store.counts() == ALL)
        pod = copy.deepcopy(recorded_cluster()["pods"][-1])
        pod["metadata"].update(name="nvidia-dcgm-exporter-x7k2p", namespace="gpu-operator",
                               ownerReferences=[{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                 "name": "nvidia-dcgm-exporter", "controller":
                                                 True}])  # fmt: skip
        fake.put(POD, pod)
        wait_for(lambda: store.attribution("gpu-operator", "nvidia-dcgm-exporter-x7k2p"))
        found = store.attribution("gpu-operator", "nvidia-dcgm-exporter-x7k2p")
        assert found is not None
        assert found.chain == (
            ("DaemonSet", "nvidia-dcgm-exporter"), ("ClusterPolicy", "cluster-policy")
        )  # fmt: skip
        fake.delete(DAEMONSET, "gpu-operator", "nvidia-dcgm-exporter")
        wait_for(lambda: store.counts()[DAEMONSET] == 0)
        found = store.attribution("gpu-operator", "nvidia-dcgm-exporter-x7k2p")
        assert found is not None and found.owner == "DaemonSet/gpu-operator/nvidia-dcgm-exporter"
