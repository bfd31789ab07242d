"""Which Slurm (or other batch) jobs hold which GPUs, from files written by job prologs.

Two conventions, both written at allocation and removed at job end, so they show a GPU
held by an idle job as well as a busy one:

- **jobstats** (Princeton): ``/run/gpustat/<index>``, ``/run/gpustat/<GPU-uuid>`` or
  ``/run/gpustat/<MIG-uuid>`` (also ``<index>.<gi>``), each holding ``"<jobid> <uid>"``.
- **dcgm-exporter** ``--hpc-job-mapping-dir``: files named ``<index>`` or ``<index>.<gi>``,
  one job id per line (several lines when jobs share a GPU).

Mind the jobstats caveat: with ``gres.conf`` ``File=/dev/nvidia[0-7]`` and no
``AutoDetect=nvml``, Slurm's GPU index may differ from NVML's, so prefer UUID file names.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: mapping files are a few bytes; anything bigger is not one
_MAX_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class JobAllocation:
    """One job holding the GPU named by ``device`` (a mapping-file name)."""

    device: str
    job_id: str
    uid: int | None = None


def parse_gpustat(device: str, text: str) -> JobAllocation | None:
    """``"<jobid> <uid>"``; the uid is optional. None for an empty or malformed file."""
    fields = text.split()
    if not fields or not fields[0].isdigit():
        return None
    uid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    return JobAllocation(device, fields[0], uid)


def parse_hpc_job_mapping(device: str, text: str) -> list[JobAllocation]:
    """One job id per non-empty line."""
    return [JobAllocation(device, line.strip()) for line in text.splitlines() if line.strip()]


class MappingFiles:
    """Reads both directories; a missing directory means "not used here", not an error."""

    def __init__(self, gpustat_dir: Path | None, hpc_job_mapping_dir: Path | None) -> None:
        self._gpustat_dir = gpustat_dir
        self._hpc_dir = hpc_job_mapping_dir
        self._warned: set[str] = set()

    def read(self) -> list[JobAllocation]:
        allocations: list[JobAllocation] = []
        for name, text in self._files(self._gpustat_dir):
            allocation = parse_gpustat(name, text)
            if allocation is not None:
                allocations.append(allocation)
        for name, text in self._files(self._hpc_dir):
            allocations.extend(parse_hpc_job_mapping(name, text))
        return allocations

    def _files(self, directory: Path | None) -> list[tuple[str, str]]:
        if directory is None:
            return []
        try:
            entries = sorted(directory.iterdir())
        except FileNotFoundError:
            return []
        except OSError as err:
            self._warn_once(str(directory), f"cannot list {directory}: {err}")
            return []
        return [(entry.name, text) for entry in entries if (text := self._read(entry)) is not None]

    def _read(self, path: Path) -> str | None:
        try:
            if not path.is_file():
                return None
            with path.open("rb") as file:
                return file.read(_MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None  # the epilog removed it while we listed the directory
        except OSError as err:
            self._warn_once(str(path), f"cannot read {path}: {err}")
            return None

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s; skipping it", message)
