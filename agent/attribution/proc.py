"""Reads who a GPU process belongs to from ``<proc_root>/PID/{cgroup,environ,status,comm}``.

NVML reports host PIDs, so this needs the host's /proc (``hostPID: true`` in a pod).
Processes come and go between the NVML read and ours: a vanished PID is skipped
quietly; any other failure is logged once per kind and counted. Answers are cached per
PID for a refresh period, because a process's cgroup and environment rarely change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from agent.attribution.cgroups import (
    CgroupIdentity,
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
        directory = self._root / str(pid)
        try:
            cgroup = parse_cgroup_file(self._text(directory / "cgroup"))
        except _VANISHED:
            log.debug("process %d vanished before its cgroup was read", pid)
            return None
        except OSError as err:
            self._warn_once("cgroup", f"cannot read {directory / 'cgroup'}: {err}")
            return None
        return ProcessIdentity(
            pid=pid,
            cgroup=cgroup,
            environ=self._environ(directory / "environ"),
            uid=self._optional(directory / "status", parse_status_uid),
            comm=self._optional(directory / "comm", lambda text: text.strip() or None),
        )

    def _environ(self, path: Path) -> dict[str, str]:
        # another user's environ needs root or CAP_SYS_PTRACE; without it we lose only Slurm
        # variables and the pod name join
        try:
            with path.open("rb") as file:
                return parse_environ(file.read(_MAX_ENVIRON_BYTES))
        except _VANISHED:
            return {}
        except OSError as err:
            self._warn_once("environ", f"cannot read {path}: {err}")
            return {}

    def _optional(self, path: Path, parse: Callable[[str], _T]) -> _T | None:
        try:
            return parse(self._text(path))
        except _VANISHED:
            return None
        except OSError as err:
            self._warn_once(path.name, f"cannot read {path}: {err}")
            return None

    @staticmethod
    def _text(path: Path) -> str:
        with path.open("rb") as file:
            return file.read(_MAX_ENVIRON_BYTES).decode("utf-8", errors="replace")

    def _warn_once(self, kind: str, message: str) -> None:
        self.errors_total += 1
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("%s; skipping (logged once per kind of file)", message)
