"""Who takes a node out of service: cordon (Kubernetes) or drain (Slurm).

``inspect`` says whether the node exists and is already out, what taking it out would do
and how to undo it; ``take_out`` does it and checks that it held. Both raise
``ExecutorError`` with a message fit for a log and a chat message.

Kubernetes needs ``nodes: get, patch`` (the chart grants them when
``actions.remediation.mode`` is enforce); Slurm needs ``scontrol`` run as SlurmUser/root.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from typing import Protocol

from kubernetes import client as k8s

from collector.actions.executors import ExecutorError, run_slurm
from collector.actions.kubernetes import call_api
from collector.actions.settings import SlurmSettings

#: the annotation a cordon leaves on the node: why gpufleet took it out
REASON_ANNOTATION = "gpufleet.io/cordon-reason"


@dataclass(frozen=True)
class NodeInspection:
    exists: bool
    #: already cordoned / drained (by anyone)
    out: bool
    #: the command that takes it out, as a person would type it
    action: str
    #: the command that puts it back
    undo: str
    detail: str = ""


class NodeExecutor(Protocol):
    kind: str  # kubernetes | slurm

    def inspect(self, node: str, reason: str) -> NodeInspection: ...

    def take_out(self, node: str, reason: str) -> str:
        """Do it; returns what was done. Raises ExecutorError."""
        ...


def cordon_commands(node: str) -> tuple[str, str]:
    """(take out, undo) for a Kubernetes node."""
    return f"kubectl cordon {shlex.quote(node)}", f"kubectl uncordon {shlex.quote(node)}"


def drain_commands(node: str, reason: str) -> tuple[str, str]:
    """(take out, undo) for a Slurm node."""
    n = shlex.quote(node)
    return (
        f"scontrol update nodename={n} state=drain reason={shlex.quote(reason)}",
        f"scontrol update nodename={n} state=resume",
    )


class KubernetesCordon:
    """``spec.unschedulable: true`` by a patch, as ``kubectl cordon`` does, plus an
    annotation that says why."""

    kind = "kubernetes"

    def __init__(self, api: k8s.ApiClient) -> None:
        self.core = k8s.CoreV1Api(api)

    def inspect(self, node: str, reason: str) -> NodeInspection:
        action, undo = cordon_commands(node)
        found = call_api(self.core.read_node, node)
        if found is None:
            return NodeInspection(False, False, action, undo, f"Kubernetes node {node} not found")
        out = bool(found.spec and found.spec.unschedulable)
        return NodeInspection(True, out, action, undo, "already cordoned" if out else "")

    def take_out(self, node: str, reason: str) -> str:
        seen = self.inspect(node, reason)
        if not seen.exists:
            raise ExecutorError(f"{seen.detail}; nothing cordoned")
        body = {
            "spec": {"unschedulable": True},
            "metadata": {"annotations": {REASON_ANNOTATION: reason}},
        }
        call_api(self.core.patch_node, node, body, must_exist=True)
        if not self.inspect(node, reason).out:
            raise ExecutorError(f"patched node {node} but it is still schedulable")
        return seen.action


_NODE_STATE = re.compile(r"(?:^|\s)State=(\S+)")


class SlurmDrain:
    """``scontrol update nodename=N state=drain reason=R``; the node's state (``scontrol show
    node -o``) is asked before and after, since only it tells that the drain held."""

    kind = "slurm"

    def __init__(self, settings: SlurmSettings) -> None:
        self.settings = settings

    def state(self, node: str) -> str | None:
        """The node's state (IDLE, MIXED+DRAIN, ...); None when Slurm does not know it."""
        done = self._run([self.settings.scontrol_path, "show", "node", "-o", node])
        if done.returncode != 0:
            said = done.stdout + done.stderr
            if "not found" in said or "Invalid node" in said:
                return None
            raise ExecutorError(f"scontrol exited {done.returncode}: {done.stderr.strip()[:200]}")
        match = _NODE_STATE.search(done.stdout)
        if match is None:
            raise ExecutorError(f"scontrol show node {node}: no State in its answer")
        return match.group(1)

    def inspect(self, node: str, reason: str) -> NodeInspection:
        action, undo = drain_commands(node, reason)
        state = self.state(node)
        if state is None:
            return NodeInspection(False, False, action, undo, f"Slurm node {node} not found")
        out = "DRAIN" in state
        return NodeInspection(True, out, action, undo, f"already {state}" if out else "")

    def take_out(self, node: str, reason: str) -> str:
        seen = self.inspect(node, reason)
        if not seen.exists:
            raise ExecutorError(f"{seen.detail}; nothing drained")
        argv = [self.settings.scontrol_path, "update", f"nodename={node}", "state=drain"]
        done = self._run([*argv, f"reason={reason}"])
        if done.returncode != 0:
            raise ExecutorError(f"scontrol exited {done.returncode}: {done.stderr.strip()[:200]}")
        state = self.state(node)
        if state is None or "DRAIN" not in state:
            raise ExecutorError(f"scontrol exited 0 but Slurm node {node} is {state}, not DRAIN")
        return seen.action

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_slurm(argv, self.settings, "scontrol")
