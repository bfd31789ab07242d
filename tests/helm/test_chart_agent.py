"""The agent DaemonSet: GPU nodes only, no GPU request, read-only host access, Secret token."""

from __future__ import annotations

from typing import Any

import yaml

from tests.helm.chart import Rendered, container, env, full_values, mounts, render, volume

DEFAULT = render()
FULL = render(full_values())


def agent(out: Rendered = DEFAULT) -> dict[str, Any]:
    return out.pod_spec("DaemonSet")


def test_it_lands_only_on_gpu_nodes() -> None:
    spec = agent()
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    # and tolerates nothing else: no control-plane nodes, no non-GPU taints
    assert len(spec["tolerations"]) == 1


def test_the_node_selector_can_be_replaced() -> None:
    """Helm merges maps: the default label goes only when set to null (as values.yaml says)."""
    gke = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    out = render({"agent": {"nodeSelector": {**gke, "nvidia.com/gpu.present": None}}})
    assert agent(out)["nodeSelector"] == gke


def test_it_requests_no_gpu_and_sees_them_all_through_the_nvidia_runtime() -> None:
    for out in (DEFAULT, FULL):
        resources = container(agent(out))["resources"]
        for section in ("requests", "limits"):
            assert resources[section]
            assert not [r for r in resources[section] if r.startswith("nvidia.com/")]
        assert env(agent(out))["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert agent()["runtimeClassName"] == "nvidia"


def test_an_empty_runtime_class_is_left_out() -> None:
    assert "runtimeClassName" not in agent(render({"agent": {"runtimeClassName": ""}}))


def test_pod_resources_are_mounted_read_only_from_the_host() -> None:
    spec = agent()
    mount = mounts(spec)["/var/lib/kubelet/pod-resources"]
    assert mount["readOnly"] is True
    assert volume(spec, mount["name"])["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    moved = agent(render({"agent": {"kubeletPodResourcesPath": "/data/kubelet/pod-resources"}}))
    assert volume(moved, "pod-resources")["hostPath"]["path"] == "/data/kubelet/pod-resources"
    # the agent keeps looking at the same place inside the container
    assert "/var/lib/kubelet/pod-resources" in mounts(moved)


def test_the_host_cgroups_are_mounted_read_only_where_the_agent_reads_them() -> None:
    spec = agent()
    mount = mounts(spec)["/host/sys/fs/cgroup"]
    assert mount["readOnly"] is True
    assert volume(spec, mount["name"])["hostPath"]["path"] == "/sys/fs/cgroup"
    off = agent(render({"agent": {"config": {"attribution": {"host_usage": False}}}}))
    assert "/host/sys/fs/cgroup" not in mounts(off)
    assert all(v.get("hostPath", {}).get("path") != "/sys/fs/cgroup" for v in off["volumes"])


def test_every_host_mount_but_the_spool_is_read_only() -> None:
    spec = agent()
    host_volumes = {v["name"] for v in spec["volumes"] if "hostPath" in v}
    writable = {m["name"] for m in container(spec)["volumeMounts"] if not m.get("readOnly")}
    assert host_volumes & writable == {"spool"}


def test_node_name_comes_from_the_downward_api() -> None:
    node = env(agent())["NODE_NAME"]
    assert node["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_host_pid_is_on_by_default_and_can_be_turned_off() -> None:
    assert agent()["hostPID"] is True
    assert agent(render({"agent": {"hostPID": False}}))["hostPID"] is False


def test_not_privileged_and_no_capabilities_unless_asked() -> None:
    context = container(agent())["securityContext"]
    assert context["privileged"] is False
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
    asked = container(agent(render({"agent": {"capabilities": ["SYS_ADMIN"]}})))
    assert asked["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}


def test_node_critical_priority_small_resources_and_probes() -> None:
    spec = agent()
    assert spec["priorityClassName"] == "system-node-critical"
    main = container(spec)
    assert main["resources"]["limits"] == {"cpu": "500m", "memory": "512Mi"}
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    [port] = main["ports"]
    assert port == {"name": "metrics", "containerPort": 9835, "protocol": "TCP"}
    assert {"name": "metrics", "containerPort": 9400, "protocol": "TCP"} in container(agent(FULL))[
        "ports"
    ]


def test_the_spool_is_on_the_host_or_in_an_empty_dir() -> None:
    spool_path = yaml.safe_load(DEFAULT.configmap_file("-agent", "agent.yaml"))["shipper"][
        "spool_dir"
    ]
    assert mounts(agent())[spool_path]["name"] == "spool"
    assert volume(agent(), "spool")["hostPath"] == {
        "path": "/var/lib/gpufleet/spool",
        "type": "DirectoryOrCreate",
    }
    assert volume(agent(FULL), "spool") == {"name": "spool", "emptyDir": {"sizeLimit": "1Gi"}}


def test_the_token_comes_from_the_secret_as_a_file() -> None:
    for out in (DEFAULT, FULL):
        spec = agent(out)
        token_file = env(spec)["GPUFLEET_SHIPPER__TOKEN_FILE"]["value"]
        directory, _, key = token_file.rpartition("/")
        secret_volume = volume(spec, mounts(spec)[directory]["name"])["secret"]
        assert secret_volume["secretName"] == out.one("Secret")["metadata"]["name"]
        assert secret_volume["items"] == [{"key": key, "path": key}]
        assert mounts(spec)[directory]["readOnly"] is True
        assert key in out.one("Secret")["data"]
    assert FULL.secret_value("agent-token") == full_values()["secret"]["agentToken"]


def test_no_service_account_token_reaches_the_agent() -> None:
    assert agent()["automountServiceAccountToken"] is False
