"""Reads who a GPU process belongs to from ``<proc_root>/PID/{cgroup,environ,status,comm}``.

NVML reports host PIDs, so this needs the host's /proc (``hostPID: true`` in a pod).
Processes come and go between the NVML read and ours: a vanished PID is skipped
quietly; any other failure is logged once per kind and counted. Answers are cached per
PID for a refresh period, because a process's cgroup and environment rarely change.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from agent.attribution.cgroups import (
    CgroupIdentity,
    cgroup_lines,
    parse_cgroup_file,
    parse_environ,
    parse_status_uid,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_VANISHED = (FileNotFoundError, ProcessLookupError)
_MAX_ENVIRON_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    cgroup: CgroupIdentity
    #: the allow-listed variables only (cgroups.ENVIRON_KEYS); empty when unreadable
    environ: dict[str, str] = field(default_factory=dict)
    uid: int | None = None
    #: the kernel's short command name (/proc/PID/comm)
    comm: str | None = None
    #: (controllers, path) per line of /proc/PID/cgroup (``""`` controllers: cgroup v2),
    #: where the process's host CPU and memory are read (agent/attribution/host_usage.py)
    cgroup_paths: tuple[tuple[str, str], ...] = ()


class ProcReader:
    def __init__(
        self,
        proc_root: Path,
        cache_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._root = proc_root
        self._cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._cache: dict[int, tuple[float, ProcessIdentity | None]] = {}
        self._warned: set[str] = set()
        #: reads that failed for a reason other than the process exiting
        self.errors_total = 0

    def identity(self, pid: int) -> ProcessIdentity | None:
        """None when the process is gone or its /proc entry cannot be read."""
        now = self._monotonic()
        cached = self._cache.get(pid)
        if cached is not None and now - cached[0] < self._cache_seconds:
            return cached[1]
        identity = self._read(pid)
        self._cache[pid] = (now, identity)
        return identity

    def forget_except(self, pids: Iterable[int]) -> None:
        """Drops cached PIDs not in ``pids`` (processes that left the GPUs)."""
        keep = set(pids)
        for pid in [pid for pid in self._cache if pid not in keep]:
            del self._cache[pid]

    def _read(self, pid: int) -> ProcessIdentity | None:
        # plain strings and os-level reads: pathlib and buffered files cost more than
        # the four small reads themselves, once per PID and refresh
        directory = f"{self._root}/{pid}"
        try:
            text = _text(f"{directory}/cgroup")
        except _VANISHED:
            log.debug("process %d vanished before its cgroup was read", pid)
            return None
        except OSError as err:
            self._warn_once("cgroup", f"cannot read {directory}/cgroup: {err}")
            return None
        return ProcessIdentity(
            pid=pid,
            cgroup=parse_cgroup_file(text),
            environ=self._environ(f"{directory}/environ"),
            uid=self._optional(directory, "status", parse_status_uid),
            comm=self._optional(directory, "comm", lambda comm: comm.strip() or None),
            cgroup_paths=cgroup_lines(text),
        )

    def _environ(self, path: str) -> dict[str, str]:
        # another user's environ needs root or CAP_SYS_PTRACE; without it we lose only Slurm
        # variables and the pod name join
        try:
            return parse_environ(_contents(path))
        except _VANISHED:
            return {}
        except OSError as err:
            self._warn_once("environ", f"cannot read {path}: {err}")
            return {}

    def _optional(self, directory: str, name: str, parse: Callable[[str], _T]) -> _T | None:
        try:
            return parse(_text(f"{directory}/{name}"))
        except _VANISHED:
            return None
        except OSError as err:
            self._warn_once(name, f"cannot read {directory}/{name}: {err}")
            return None

    def _warn_once(self, kind: str, message: str) -> None:
        self.errors_total += 1
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("%s; skipping (logged once per kind of file)", message)


def _contents(path: str) -> bytes:
    """At most _MAX_ENVIRON_BYTES of a file, read until EOF (a /proc file may come in
    several pieces)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks: list[bytes] = []
        size = 0
        while size < _MAX_ENVIRON_BYTES and (chunk := os.read(fd, _MAX_ENVIRON_BYTES - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _text(path: str) -> str:
    return _contents(path).decode("utf-8", errors="replace")
