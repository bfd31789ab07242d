"""What a person types to release a workload's GPUs, or to keep them: one place for both.

The commands are the ones an operator would run by hand for what the auto-release
executors do through their APIs (collector/actions/): delete a bare pod, scale a pod's
Deployment or StatefulSet to zero (deleting its pod would only bring up another), cancel a
Slurm job. Workload keys are ``agent.model.Workload.key``: ``pod:NS/NAME``, ``slurm:ID``,
``process:PID``, ``manual:NAME``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

#: a pod's controller as the executor found it: (kind, name), e.g. ("Deployment", "web")
SCALABLE_OWNERS = ("Deployment", "StatefulSet")


@dataclass(frozen=True)
class WorkloadName:
    """A workload key taken apart: kind (pod | slurm | process | manual), namespace, name."""

    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, key: str) -> WorkloadName:
        kind, _, rest = key.partition(":")
        if kind == "pod":
            namespace, _, name = rest.partition("/")
            return cls("pod", namespace, name)
        return cls(kind or "other", "", rest)


def release_command(key: str, owner_kind: str = "", owner_name: str = "") -> str:
    """The command that releases ``key``'s GPUs; "" when there is none to type."""
    w = WorkloadName.of(key)
    if w.kind == "pod" and w.name:
        ns = shlex.quote(w.namespace or "default")
        if owner_kind in SCALABLE_OWNERS and owner_name:
            return (
                f"kubectl scale {owner_kind.lower()} -n {ns} {shlex.quote(owner_name)} --replicas=0"
            )
        return f"kubectl delete pod -n {ns} {shlex.quote(w.name)}"
    if w.kind == "slurm" and w.name.replace("_", "").isdigit():
        return f"scancel {w.name}"
    if w.kind == "process" and w.name.isdigit():
        return f"kill {w.name}"
    return ""


def owned_release_command(key: str, owner: str) -> str:
    """``release_command`` of ``key`` held by ``owner`` as the ledger keeps it
    (``Kind/namespace/name``, the top of a pod's owner chain; "" when unknown)."""
    kind, _, rest = owner.partition("/")
    return release_command(key, kind, rest.rpartition("/")[2])


def exempt_command(key: str, exempt_key: str) -> str:
    """The command that exempts ``key`` from auto-release (a pod label); "" for others."""
    w = WorkloadName.of(key)
    if w.kind != "pod" or not w.name or not exempt_key:
        return ""
    ns = shlex.quote(w.namespace or "default")
    return f"kubectl label pod -n {ns} {shlex.quote(w.name)} {exempt_key}=true"
