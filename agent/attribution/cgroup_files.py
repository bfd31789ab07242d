"""Reads one cgroup's CPU and memory files under a cgroup filesystem root.

``root`` is where the host's cgroup filesystem is mounted (``/sys/fs/cgroup``; in a pod,
the host's, mounted read-only, e.g. at ``/host/sys/fs/cgroup``), so tests point it at a
fixture tree. cgroup v2 (a ``cgroup.controllers`` file at the root) reads one directory;
v1 reads the cpu, cpuacct and memory hierarchies, each mounted in a directory of its own
(``cpu,cpuacct``, with ``cpu`` and ``cpuacct`` links, on most distributions).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from agent.attribution.cgroup_usage import (
    CgroupReading,
    parse_bytes,
    parse_cfs_limit,
    parse_cpu_max,
    parse_flat_keyed,
    parse_pressure_some_avg10,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_V1_CONTROLLERS = ("cpu", "cpuacct", "memory")


@dataclass(frozen=True)
class CgroupDirs:
    """Where one cgroup's files are: one directory on v2, one per controller on v1."""

    unified: str | None = None
    cpu: str | None = None
    cpuacct: str | None = None
    memory: str | None = None

    @property
    def primary(self) -> str:
        """The directory whose disappearance means the cgroup is gone."""
        return self.unified or self.cpuacct or self.memory or self.cpu or ""


class CgroupFiles:
    """The cgroup filesystem at ``root``: where a cgroup path lives, and what it reads."""

    def __init__(self, root: Path) -> None:
        self._root = str(root).rstrip("/")
        self._unified: bool | None = None
        self._mounts: dict[str, str] = {}
        self._warned: set[str] = set()
        #: reads that failed for a reason other than the cgroup or file being absent
        self.errors_total = 0

    @property
    def unified(self) -> bool:
        """True on cgroup v2 (checked once; a root mounted later is seen on a restart)."""
        if self._unified is None:
            self._unified = os.path.exists(f"{self._root}/cgroup.controllers")
            if not self._unified:
                self._mounts = self._v1_mounts()
        return self._unified

    def dirs(self, paths: dict[str, str]) -> CgroupDirs | None:
        """The directories of cgroup ``paths`` (controller -> path; ``""``: v2) that exist."""
        if self.unified:
            path = paths.get("")
            found = f"{self._root}{path}" if path is not None else None
            return CgroupDirs(unified=found) if found and os.path.isdir(found) else None
        found_v1 = {
            name: f"{self._mounts[name]}{paths[name]}"
            for name in _V1_CONTROLLERS
            if name in paths and name in self._mounts
        }
        dirs = CgroupDirs(**{k: v for k, v in found_v1.items() if os.path.isdir(v)})
        return dirs if dirs.primary else None

    def read(self, dirs: CgroupDirs, monotonic_seconds: float) -> CgroupReading | None:
        """One reading; None when the cgroup is gone (its usage file vanished)."""
        if dirs.unified is not None:
            return self._read_v2(dirs.unified, monotonic_seconds)
        return self._read_v1(dirs, monotonic_seconds)

    def _read_v2(self, d: str, monotonic_seconds: float) -> CgroupReading | None:
        try:
            stat = parse_flat_keyed(_text(f"{d}/cpu.stat"))
        except FileNotFoundError:
            return None
        except OSError as err:
            self._warn_once("cpu.stat", f"cannot read {d}/cpu.stat: {err}")
            return None
        usage = stat.get("usage_usec")
        return CgroupReading(
            monotonic_seconds=monotonic_seconds,
            cpu_usage_seconds=usage / 1e6 if usage is not None else None,
            cpu_periods=stat.get("nr_periods"),
            cpu_throttled_periods=stat.get("nr_throttled"),
            cpu_limit_cores=self._optional(f"{d}/cpu.max", parse_cpu_max),
            memory_pressure_ratio=self._optional(f"{d}/memory.pressure", parse_pressure_some_avg10),
            memory_used_bytes=self._optional(f"{d}/memory.current", parse_bytes),
            memory_limit_bytes=self._optional(f"{d}/memory.max", parse_bytes),
        )

    def _read_v1(self, dirs: CgroupDirs, monotonic_seconds: float) -> CgroupReading | None:
        if not os.path.isdir(dirs.primary):
            return None
        usage_ns = self._in(dirs.cpuacct, "cpuacct.usage", parse_bytes)
        stat = self._in(dirs.cpu, "cpu.stat", parse_flat_keyed) or {}
        quota = self._in(dirs.cpu, "cpu.cfs_quota_us", str)
        period = self._in(dirs.cpu, "cpu.cfs_period_us", str)
        return CgroupReading(
            monotonic_seconds=monotonic_seconds,
            cpu_usage_seconds=usage_ns / 1e9 if usage_ns is not None else None,
            cpu_periods=stat.get("nr_periods"),
            cpu_throttled_periods=stat.get("nr_throttled"),
            cpu_limit_cores=parse_cfs_limit(quota, period) if quota and period else None,
            memory_used_bytes=self._in(dirs.memory, "memory.usage_in_bytes", parse_bytes),
            memory_limit_bytes=self._in(dirs.memory, "memory.limit_in_bytes", parse_bytes),
        )

    def _in(self, d: str | None, name: str, parse: Callable[[str], _T]) -> _T | None:
        return self._optional(f"{d}/{name}", parse) if d is not None else None

    def _optional(self, path: str, parse: Callable[[str], _T]) -> _T | None:
        """A file that may be absent (cpu.max at the root, PSI off: ``EOPNOTSUPP``)."""
        try:
            return parse(_text(path))
        except FileNotFoundError:
            return None
        except OSError as err:
            if err.errno == 95:  # EOPNOTSUPP: the kernel has PSI disabled (psi=0)
                return None
            self._warn_once(path.rsplit("/", 1)[-1], f"cannot read {path}: {err}")
            return None

    def _v1_mounts(self) -> dict[str, str]:
        """controller -> its hierarchy's directory (``cpu,cpuacct`` serves both)."""
        mounts: dict[str, str] = {}
        try:
            names = sorted(os.listdir(self._root))
        except OSError as err:
            self._warn_once("root", f"cannot list the cgroup root {self._root}: {err}")
            return mounts
        for name in names:  # a link named after the controller wins over a joint mount
            for controller in name.split(","):
                if controller in _V1_CONTROLLERS and controller not in mounts:
                    mounts[controller] = f"{self._root}/{name}"
                if controller == name and name in _V1_CONTROLLERS:
                    mounts[controller] = f"{self._root}/{name}"
        return mounts

    def _warn_once(self, kind: str, message: str) -> None:
        self.errors_total += 1
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("%s; skipping it (logged once per kind of file)", message)


def _text(path: str) -> str:
    # os-level reads, as agent/attribution/proc.py does: these files are tiny
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536).decode("ascii", errors="replace")
    finally:
        os.close(fd)
