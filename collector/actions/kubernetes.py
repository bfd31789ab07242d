"""Release a pod's GPUs through the official ``kubernetes`` client.

If the pod belongs to a Deployment (through its ReplicaSet) or a StatefulSet and
``scale_owners`` is on, that owner is scaled to zero (deleting the pod alone would only
make the controller start another one); otherwise the pod is deleted. A pod whose labels
or annotations carry ``<exempt_key>: "true"`` is never touched.

Least privilege (the RBAC the chart must grant, nothing more):
  ""     pods               get, delete
  apps   replicasets        get
  apps   deployments/scale  patch
  apps   statefulsets/scale patch
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from collector.actions.executors import ExecutorError, Inspection, Target
from collector.actions.settings import KubernetesSettings
from collector.notify.commands import exempt_command, release_command

TRUE = ("true", "yes", "1")


@dataclass(frozen=True)
class Owner:
    kind: str  # Deployment | StatefulSet
    name: str


def api_client(settings: KubernetesSettings) -> k8s.ApiClient:
    """An ApiClient for ``settings``: explicit host (+ token/CA files), else a kubeconfig,
    else the pod's service account."""
    config = k8s.Configuration()
    if settings.host:
        config.host = settings.host
        if settings.token_file is not None:
            token = settings.token_file.read_text(encoding="utf-8").strip()
            config.api_key = {"authorization": token}
            config.api_key_prefix = {"authorization": "Bearer"}
        if settings.ca_file is not None:
            config.ssl_ca_cert = str(settings.ca_file)
        config.verify_ssl = settings.verify_tls
    elif settings.kubeconfig is not None:
        load = k8s_config.load_kube_config  # untyped
        load(str(settings.kubeconfig), client_configuration=config)  # type: ignore[no-untyped-call]
    else:
        k8s_config.load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
    return k8s.ApiClient(config)


class KubernetesExecutor:
    def __init__(self, api: k8s.ApiClient, settings: KubernetesSettings, exempt_key: str) -> None:
        self.core = k8s.CoreV1Api(api)
        self.apps = k8s.AppsV1Api(api)
        self.settings = settings
        self.exempt_key = exempt_key

    def inspect(self, target: Target) -> Inspection:
        pod = self._call(self.core.read_namespaced_pod, target.name, target.namespace)
        if pod is None:
            return Inspection(False, False, "")
        meta = pod.metadata
        marks = {**(meta.labels or {}), **(meta.annotations or {})}
        exempt = str(marks.get(self.exempt_key, "")).lower() in TRUE
        owner = self._owner(meta) if self.settings.scale_owners else None
        action = (
            f"scale {owner.kind} {target.namespace}/{owner.name} to 0"
            if owner
            else f"delete pod {target.namespace}/{target.name}"
        )
        opt_out = exempt_command(target.workload_key, self.exempt_key)
        command = release_command(target.workload_key, *((owner.kind, owner.name) if owner else ()))
        return Inspection(True, exempt, action, opt_out, command)

    def release(self, target: Target, reason: str) -> str:
        seen = self.inspect(target)
        if not seen.exists:
            raise ExecutorError(f"pod {target.namespace}/{target.name} no longer exists")
        if seen.exempt:
            raise ExecutorError(f"pod {target.namespace}/{target.name} is exempt")
        pod = self._call(self.core.read_namespaced_pod, target.name, target.namespace)
        owner = (
            self._owner(pod.metadata) if pod is not None and self.settings.scale_owners else None
        )
        body = {"spec": {"replicas": 0}}
        if owner is not None and owner.kind == "Deployment":
            self._call(
                self.apps.patch_namespaced_deployment_scale,
                owner.name,
                target.namespace,
                body,
                must_exist=True,
            )
        elif owner is not None:
            self._call(
                self.apps.patch_namespaced_stateful_set_scale,
                owner.name,
                target.namespace,
                body,
                must_exist=True,
            )
        else:
            self._call(
                self.core.delete_namespaced_pod,
                target.name,
                target.namespace,
                grace_period_seconds=self.settings.grace_period_seconds,
                must_exist=True,
            )
        return seen.action

    def _owner(self, meta: Any) -> Owner | None:
        ref = _controller(meta)
        if ref is None:
            return None
        if ref.kind == "StatefulSet":
            return Owner("StatefulSet", ref.name)
        if ref.kind != "ReplicaSet":
            return None
        rs = self._call(self.apps.read_namespaced_replica_set, ref.name, meta.namespace)
        parent = _controller(rs.metadata) if rs is not None else None
        return Owner("Deployment", parent.name) if parent and parent.kind == "Deployment" else None

    def _call(self, method: Any, *args: Any, must_exist: bool = False, **kwargs: Any) -> Any:
        return call_api(method, *args, must_exist=must_exist, **kwargs)


def call_api(method: Any, *args: Any, must_exist: bool = False, **kwargs: Any) -> Any:
    """Call the API; a 404 is None (unless ``must_exist``), anything else ExecutorError."""
    try:
        return method(*args, **kwargs)
    except ApiException as err:
        if err.status == 404 and not must_exist:
            return None
        raise ExecutorError(f"kubernetes API: HTTP {err.status} {err.reason}") from err
    except OSError as err:  # urllib3 connection errors derive from OSError
        raise ExecutorError(f"kubernetes API: {type(err).__name__}") from err


def _controller(meta: Any) -> Any:
    for ref in meta.owner_references or []:
        if ref.controller:
            return ref
    return None
