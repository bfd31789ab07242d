"""Who carries out a release: the executor protocol, Slurm ``scancel`` and a signed webhook.

The Kubernetes executor lives in actions_kubernetes.py. ``inspect`` looks at the target
right before a warning or the action (exists? exempt? what would be done? how to opt out?);
``release`` does it. Both raise ``ExecutorError`` with a message fit for a log and a chat
message (no secrets, no URLs).
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Protocol

import httpx

from collector.actions.settings import SlurmSettings
from collector.notify import webhook as standard_webhooks
from collector.notify.vendor import json_body
from collector.records import WorkloadRef


class ExecutorError(Exception):
    """An executor could not inspect or release its target."""


@dataclass(frozen=True)
class Target:
    workload_key: str
    kind: str  # pod | slurm | other
    namespace: str  # Kubernetes namespace, or the Slurm partition/account
    name: str  # pod name, or the Slurm job id
    user: str = ""

    @classmethod
    def of(cls, ref: WorkloadRef) -> Target:
        kind, _, rest = ref.key.partition(":")
        if kind == "pod":
            namespace, _, name = rest.partition("/")
            return cls(ref.key, "pod", namespace or ref.namespace, name, ref.user)
        if kind == "slurm":
            return cls(ref.key, "slurm", ref.namespace, rest, ref.user)
        return cls(ref.key, kind or "other", ref.namespace, rest or ref.name, ref.user)


@dataclass(frozen=True)
class Inspection:
    exists: bool
    exempt: bool
    action: str  # what release would do, e.g. "scale Deployment ml/web to 0"
    opt_out: str = ""  # a command that exempts the target, when there is one
    #: the command a person would type to do the same release (notify/commands.py)
    command: str = ""


class Executor(Protocol):
    def inspect(self, target: Target) -> Inspection: ...

    def release(self, target: Target, reason: str) -> str:
        """Do it; returns what was done. Raises ExecutorError."""
        ...


#: states of a job that holds nothing any more
_SLURM_DONE = frozenset(
    {"CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
     "DEADLINE", "OUT_OF_MEMORY"}
)  # fmt: skip
_JOB_STATE = re.compile(r"(?:^|\s)JobState=(\S+)")


def run_slurm(
    argv: list[str], settings: SlurmSettings, what: str
) -> subprocess.CompletedProcess[str]:
    """A Slurm command (``scancel``, ``scontrol``) within ``settings.timeout_seconds``, its
    output captured; one that cannot start or times out is an ExecutorError naming ``what``."""
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=settings.timeout_seconds, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ExecutorError(f"{what}: {type(err).__name__}: {err}") from err


class SlurmExecutor:
    """``scancel [--signal=SIG] [<reason_option> REASON] JOBID`` via ``scancel_path``.

    ``scancel`` exits 0 for an id Slurm never had or has forgotten, so the job's state is
    asked (``scontrol show job -o``) before and after: a job Slurm does not know is "not
    found", never "released", and a release counts only once the job has left RUNNING.
    """

    def __init__(self, settings: SlurmSettings) -> None:
        self.settings = settings

    def job_state(self, job_id: str) -> str | None:
        """The job's state (RUNNING, CANCELLED, ...); None when Slurm does not know it."""
        argv = [self.settings.scontrol_path, "show", "job", "-o", job_id]
        done = self._run(argv, "scontrol")
        if done.returncode != 0:
            if "Invalid job id" in done.stderr:
                return None
            raise ExecutorError(f"scontrol exited {done.returncode}: {done.stderr.strip()[:200]}")
        match = _JOB_STATE.search(done.stdout)
        if match is None:
            raise ExecutorError(f"scontrol show job {job_id}: no JobState in its answer")
        return match.group(1)

    def _run(self, argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
        return run_slurm(argv, self.settings, what)

    def argv(self, target: Target, reason: str) -> list[str]:
        s = self.settings
        argv = [s.scancel_path]
        if s.signal:
            argv.append(f"--signal={s.signal}")
        if s.reason_option:
            argv += [s.reason_option, reason]
        return [*argv, target.name]

    def inspect(self, target: Target) -> Inspection:
        signal = f" --signal={self.settings.signal}" if self.settings.signal else ""
        command = f"scancel{signal} {target.name}"
        state = self.job_state(_job_id(target))
        if state is None or state in _SLURM_DONE:
            gone = "not found" if state is None else f"already {state}"
            return Inspection(False, False, f"Slurm job {target.name} {gone}", command=command)
        return Inspection(True, False, command, command=command)

    def release(self, target: Target, reason: str) -> str:
        job_id = _job_id(target)
        seen = self.inspect(target)
        if not seen.exists:
            raise ExecutorError(f"slurm: {seen.action}; nothing cancelled")
        done = self._run(self.argv(target, reason), "scancel")
        if done.returncode != 0:
            raise ExecutorError(f"scancel exited {done.returncode}: {done.stderr.strip()[:200]}")
        deadline = time.monotonic() + self.settings.verify_seconds
        while (state := self.job_state(job_id)) not in _SLURM_DONE and state is not None:
            if time.monotonic() >= deadline:
                raise ExecutorError(
                    f"scancel exited 0 but Slurm job {job_id} is still {state} after "
                    f"{self.settings.verify_seconds:g} s"
                )
            time.sleep(0.1)
        return seen.action


def _job_id(target: Target) -> str:
    if not target.name.replace("_", "").isdigit():
        raise ExecutorError(f"slurm: {target.name!r} is not a job id")
    return target.name


class WebhookExecutor:
    """POSTs ``{"action": "release", ...}`` signed the Standard Webhooks way; 2xx = done."""

    def __init__(
        self, url: str, secret: str, transport: httpx.BaseTransport, timeout_seconds: float = 10
    ) -> None:
        self._url = url
        self._secret = secret
        self._transport = transport
        self._timeout = timeout_seconds

    def inspect(self, target: Target) -> Inspection:
        return Inspection(True, False, f"release request for {target.workload_key} (webhook)")

    def release(self, target: Target, reason: str) -> str:
        msg_id = f"msg_{uuid.uuid4().hex}"
        payload = {
            "action": "release",
            "workload": target.workload_key,
            "kind": target.kind,
            "namespace": target.namespace,
            "name": target.name,
            "reason": reason,
        }
        body = json_body(payload)
        now = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(now),
        }
        if self._secret:
            headers["webhook-signature"] = standard_webhooks.signature(
                self._secret, msg_id, now, body
            )
        timeouts = dict.fromkeys(("connect", "read", "write", "pool"), self._timeout)
        request = httpx.Request(
            "POST", self._url, content=body, headers=headers, extensions={"timeout": timeouts}
        )
        try:
            response = self._transport.handle_request(request)
            response.read()
            response.close()
        except httpx.HTTPError as err:
            raise ExecutorError(f"release webhook: {type(err).__name__}") from err
        if not 200 <= response.status_code < 300:
            raise ExecutorError(f"release webhook answered HTTP {response.status_code}")
        return f"release request for {target.workload_key} accepted"
