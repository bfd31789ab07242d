"""What Slurm itself says about the jobs on this node, from ``squeue --json``.

Environment variables give a job's id and, where the job set them, its account and
partition; Slurm knows the rest (QOS, user, name, time limit, GPUs per job) and which GPU
indices it gave each job, even a job that never touched them. Slurm 22.05's ``squeue
--json`` ignores every filter (``-j``, ``-w``, ``-t``) and dumps all jobs the controller
knows, finished ones included, so the filtering is ours: jobs whose node list names this
node. Parsing (``parse_squeue_json``) is pure; ``SqueueReader`` runs the command with a
timeout and caches its answer.

Slurm's GPU index is the order of ``gres.conf``'s ``File=`` devices; it is NVML's index
only when both follow the minor numbers (``AutoDetect=nvml`` guarantees it), the same
caveat as the jobstats files (agent/attribution/hpc.py).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: states in which a job holds its GPUs
HOLDING_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED"})
_GRES_GPU = re.compile(r"gpu(?::[^:(,]+)?:(\d+)\(IDX:([^)]*)\)")
_TRES_GPU = re.compile(r"gpu(?::[^:,]+)?:(\d+)")
_BRACKET = re.compile(r"^(.*?)\[([^\]]*)\](.*)$")


class SqueueError(Exception):
    """``squeue --json`` printed something that is not its JSON."""


@dataclass(frozen=True)
class SlurmJob:
    """One job as Slurm describes it; ``None`` where Slurm says nothing."""

    job_id: str
    state: str
    name: str | None = None
    user: str | None = None
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    #: None: unlimited
    time_limit_seconds: float | None = None
    #: GPUs the job asked for in all (per job, or per node times its nodes)
    gpus: int | None = None
    #: the Slurm GPU indices the job holds on this node
    gpu_indexes: tuple[int, ...] = ()

    @property
    def holds_gpus(self) -> bool:
        return self.state in HOLDING_STATES and bool(self.gpu_indexes)


def parse_squeue_json(text: str, node: str) -> dict[str, SlurmJob]:
    """The jobs of ``squeue --json`` output that run (or ran) on ``node``, by job id."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise SqueueError(f"squeue --json: not JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise SqueueError("squeue --json: no 'jobs' list in its answer")
    jobs: dict[str, SlurmJob] = {}
    for raw in data["jobs"]:
        if isinstance(raw, dict):
            job = _job(raw, node)
            if job is not None:
                jobs[job.job_id] = job
    return jobs


def _job(raw: Mapping[str, Any], node: str) -> SlurmJob | None:
    nodes = expand_hostlist(_text(raw.get("nodes")) or "")
    if node not in nodes or _number(raw.get("job_id")) is None:
        return None
    details = raw.get("gres_detail") or []
    position = nodes.index(node)
    detail = details[position] if isinstance(details, list) and position < len(details) else ""
    limit_minutes = _number(raw.get("time_limit"))
    return SlurmJob(
        job_id=str(int(_number(raw.get("job_id")) or 0)),
        state=_state(raw.get("job_state")),
        name=_text(raw.get("name")),
        user=_text(raw.get("user_name")),
        account=_text(raw.get("account")),
        partition=_text(raw.get("partition")),
        qos=_text(raw.get("qos")),
        time_limit_seconds=limit_minutes * 60 if limit_minutes is not None else None,
        gpus=_gpus_asked(raw, len(nodes)),
        gpu_indexes=gpu_indexes(str(detail)),
    )


def gpu_indexes(gres_detail: str) -> tuple[int, ...]:
    """``gpu:2(IDX:0-1)``, ``gpu:h200:1(IDX:3)``, ``gpu:3(IDX:0,2-3)`` -> the indices."""
    indexes: list[int] = []
    for match in _GRES_GPU.finditer(gres_detail):
        for part in match.group(2).split(","):
            low, _, high = part.partition("-")
            if low.isdigit() and (not high or high.isdigit()):
                indexes.extend(range(int(low), int(high or low) + 1))
    return tuple(sorted(set(indexes)))


def expand_hostlist(text: str) -> list[str]:
    """``vm`` -> [vm]; ``gpu[01-03,07],login1`` -> [gpu01, gpu02, gpu03, gpu07, login1]."""
    names: list[str] = []
    for item in _split_outside_brackets(text):
        match = _BRACKET.match(item)
        if match is None:
            names.append(item)
            continue
        head, ranges, tail = match.groups()
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            if not high:
                names.extend(expand_hostlist(f"{head}{low}{tail}"))
                continue
            width = len(low)
            for n in range(int(low), int(high) + 1):
                names.extend(expand_hostlist(f"{head}{n:0{width}d}{tail}"))
    return names


def _split_outside_brackets(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [i.strip() for i in items if i.strip()]


def _gpus_asked(raw: Mapping[str, Any], node_count: int) -> int | None:
    per_job = _TRES_GPU.search(_text(raw.get("tres_per_job")) or "")
    if per_job:
        return int(per_job.group(1))
    per_node = _TRES_GPU.search(_text(raw.get("tres_per_node")) or "")
    return int(per_node.group(1)) * node_count if per_node else None


def _state(value: Any) -> str:
    # 22.05: "RUNNING"; 23.02 and later: ["RUNNING"] (a list of flags)
    if isinstance(value, list):
        value = value[0] if value else ""
    return str(value or "UNKNOWN")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value and value != "(null)" else None


def _number(value: Any) -> float | None:
    """22.05 writes numbers bare (``null`` for unlimited); 23.02 and later write
    ``{"set": true, "infinite": false, "number": 90}``."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class SqueueSettings:
    #: the squeue command; its answer is kept ``refresh_seconds``
    argv: tuple[str, ...]
    node: str
    refresh_seconds: float
    timeout_seconds: float
    #: SLURM_CONF for squeue, where the node's Slurm has no /etc/slurm/slurm.conf
    slurm_conf: Path | None = None


class SqueueReader:
    """``squeue --json``, at most once per refresh period (and once a second for a job id
    the last answer lacks: a job that just started). A missing or failing squeue is
    logged once, counted in ``errors_total`` and answers nothing, so attribution falls
    back to environment variables; it is tried again a refresh period later."""

    def __init__(
        self,
        settings: SqueueSettings,
        monotonic: Callable[[], float] = time.monotonic,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._settings = settings
        self._monotonic = monotonic
        self._env = dict(environ or {})
        if settings.slurm_conf is not None:
            self._env["SLURM_CONF"] = str(settings.slurm_conf)
        self._jobs: dict[str, SlurmJob] = {}
        self._read_at: float | None = None
        self._warned: set[str] = set()
        self.errors_total = 0

    def jobs(self, wanted: Sequence[str] = ()) -> dict[str, SlurmJob]:
        """This node's jobs; read again when stale, or when a ``wanted`` id is missing."""
        now = self._monotonic()
        age = None if self._read_at is None else now - self._read_at
        missing = any(job_id not in self._jobs for job_id in wanted)
        if age is None or age >= self._settings.refresh_seconds or (missing and age >= 1.0):
            self._read_at = now
            self._jobs = self._read()
        return self._jobs

    def _read(self) -> dict[str, SlurmJob]:
        s = self._settings
        try:
            done = subprocess.run(
                s.argv, capture_output=True, text=True, timeout=s.timeout_seconds,
                env=self._env or None, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise SqueueError(f"exited {done.returncode}: {done.stderr.strip()[:200]}")
            return parse_squeue_json(done.stdout, s.node)
        except (OSError, subprocess.TimeoutExpired, SqueueError) as err:
            self._fail(type(err).__name__, f"{' '.join(s.argv)}: {err}")
            return {}

    def _fail(self, kind: str, message: str) -> None:
        self.errors_total += 1
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(
                "%s; Slurm jobs are attributed from environment variables only "
                "(logged once per kind of failure)",
                message,
            )
