"""Reading and writing recorded GPU traces: the Alibaba GenAI per-pod CSVs and a generic
long format (CSV or JSONL, one row per GPU per timestamp).

Generic rows carry ``timestamp`` (Unix seconds), ``gpu_uuid`` or ``pod``, optionally
``node``, ``gpu_name``, ``gpu_index``, the workload columns ``pod``, ``namespace``,
``container``, ``pod_uid``, ``slurm_job_id``, ``user``, ``team``, ``job_name``, and any
GpuSample field by name (SI units). JSONL rows may also carry ``workloads``, ``processes``
and ``xid_errors`` as lists. An empty cell means "not recorded", never zero.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import tarfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import msgspec

from agent.model import GpuInfo, GpuSample, Workload, WorkloadKind
from agent.sources.interface import SourceError

#: (gpu key, timestamp) -> recorded fields; gpu key is the GPU UUID
Records = dict[str, dict[float, dict[str, Any]]]

ALIBABA_COLUMNS = frozenset({"value", "timestamp_anon", "container_ip"})
ALIBABA_NAMESPACE = "alibaba-genai"
WORKLOAD_COLUMNS = ("pod", "namespace", "container", "pod_uid", "slurm_job_id", "user", "team",
                    "job_name")  # fmt: skip
GPU_COLUMNS = ("node", "gpu_name", "gpu_index")
META_COLUMNS = (*GPU_COLUMNS, *WORKLOAD_COLUMNS)
SAMPLE_FIELDS = frozenset(f.name for f in msgspec.structs.fields(GpuSample))
#: GpuSample fields a CSV column can hold (not lists, not the row's identity)
SCALAR_FIELDS = tuple(
    f.name
    for f in msgspec.structs.fields(GpuSample)
    if f.name not in ("timestamp", "gpu_uuid", "xid_errors", "processes", "workloads")
)
_TRACE_SUFFIXES = (".csv", ".jsonl", ".ndjson", ".tar.gz", ".tgz")


class TraceRows:
    """Rows parsed from one or more trace files: per-GPU records plus GPU metadata."""

    def __init__(self, node: str | None) -> None:
        self.node = node
        self.records: Records = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.nodes: set[str] = set()
        self.unknown_columns: set[str] = set()
        self._workloads: dict[tuple[tuple[str, str], ...], Workload | None] = {}

    def workload(self, columns: Mapping[str, Any]) -> Workload | None:
        """The workload a row's workload columns name, shared between rows naming the same."""
        key = tuple(sorted((k, str(v)) for k, v in columns.items() if k in WORKLOAD_COLUMNS))
        if key not in self._workloads:
            self._workloads[key] = workload_from_meta(dict(key))
        return self._workloads[key]

    def add(
        self, gpu_uuid: str, timestamp: float, fields: dict[str, Any], meta: Mapping[str, Any]
    ) -> None:
        self.records.setdefault(gpu_uuid, {}).setdefault(timestamp, {}).update(fields)
        known = self.meta.setdefault(gpu_uuid, {})
        known.update({k: v for k, v in meta.items() if v not in (None, "")})


def open_trace_files(path: Path) -> Iterator[tuple[str, IO[str]]]:
    """(name, text stream) for a file, every trace file in a directory, or .tar.gz members."""
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if child.name.endswith(_TRACE_SUFFIXES):
                yield from open_trace_files(child)
        return
    if path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path, "r:gz") as archive:
            for member in archive.getmembers():
                handle = archive.extractfile(member) if member.isfile() else None
                if handle is not None and member.name.endswith((".csv", ".jsonl", ".ndjson")):
                    yield member.name, io.TextIOWrapper(handle, encoding="utf-8", newline="")
        return
    with path.open(encoding="utf-8", newline="") as stream:
        yield path.name, stream


def parse_stream(name: str, stream: IO[str], rows: TraceRows) -> None:
    """Add one file's rows to ``rows``; SourceError names the file and line on bad input."""
    if name.endswith((".jsonl", ".ndjson")):
        for number, line in enumerate(stream, start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError as err:
                    raise SourceError(f"{name}:{number}: not JSON: {err}") from err
                add_generic_row(f"{name}:{number}", row, rows)
        return
    reader = csv.DictReader(stream)
    if set(reader.fieldnames or ()) == ALIBABA_COLUMNS:
        add_alibaba_rows(name, reader, rows)
        return
    for number, row in enumerate(reader, start=2):
        add_generic_row(f"{name}:{number}", row, rows)


def add_alibaba_rows(name: str, reader: Iterable[dict[str, str]], rows: TraceRows) -> None:
    """Alibaba GenAI 2026: duty cycle (%) -> coarse sm_activity; memory used (bytes).

    Each pod (``container_ip``, an MD5) becomes one GPU ``GPU-<that MD5 as a UUID>`` held by
    a Kubernetes pod named by its first 8 hex digits.
    """
    convert = _alibaba_converter(name)
    pods: dict[str, tuple[str, tuple[Workload, ...]]] = {}
    for number, row in enumerate(reader, start=2):
        try:
            pod, timestamp = row["container_ip"], float(row["timestamp_anon"])
            fields = convert(row["value"])
        except (KeyError, ValueError, TypeError) as err:
            raise SourceError(f"{name}:{number}: bad Alibaba row: {err}") from err
        if pod not in pods:
            held = rows.workload({"pod": pod[:8], "pod_uid": pod, "namespace": ALIBABA_NAMESPACE})
            pods[pod] = ("GPU-" + _uuid_text(pod), (held,) if held else ())
        gpu_uuid, fields["workloads"] = pods[pod]
        rows.add(gpu_uuid, timestamp, fields, {})


def _alibaba_converter(name: str) -> Callable[[str], dict[str, Any]]:
    if "duty_cycle" in name:
        return lambda v: {"sm_activity": float(v) / 100.0, "activity_coarse": True}
    if "memory" in name:
        return lambda v: {"memory_used_bytes": int(float(v))}
    raise SourceError(f"{name}: Alibaba columns, but neither a duty-cycle nor a memory file")


def add_generic_row(where: str, row: Mapping[str, Any], rows: TraceRows) -> None:
    """One long-format row: identity, metadata and GpuSample fields by name."""
    present = {k: v for k, v in row.items() if k and v not in (None, "")}
    try:
        timestamp = float(present.pop("timestamp"))
    except (KeyError, TypeError, ValueError) as err:
        raise SourceError(f"{where}: a row needs a numeric 'timestamp' ({err})") from err
    node = present.get("node")
    if node is not None:
        rows.nodes.add(str(node))
        if rows.node is not None and str(node) != rows.node:
            return
    meta = {k: present.pop(k) for k in META_COLUMNS if k in present}
    gpu_uuid = present.pop("gpu_uuid", None)
    if gpu_uuid is None and "pod" not in meta:
        raise SourceError(f"{where}: a row needs 'gpu_uuid' or 'pod'")
    if gpu_uuid is None:
        gpu_uuid = "GPU-" + _uuid_text(f"{meta.get('namespace', '')}/{meta['pod']}")
    rows.unknown_columns.update(k for k in present if k not in SAMPLE_FIELDS)
    fields = {k: v for k, v in present.items() if k in SAMPLE_FIELDS}
    workload = rows.workload(meta)
    if workload is not None and "workloads" not in fields:
        fields["workloads"] = (workload,)
    rows.add(str(gpu_uuid), timestamp, fields, {k: meta[k] for k in GPU_COLUMNS if k in meta})


def _uuid_text(text: str) -> str:
    """``text`` itself when it is 32 hex digits (an MD5), else the MD5 of it, as a UUID."""
    try:
        return str(uuid.UUID(hex=text)) if len(text) == 32 else _md5_uuid(text)
    except ValueError:
        return _md5_uuid(text)


def _md5_uuid(text: str) -> str:
    return str(uuid.UUID(bytes=hashlib.md5(text.encode(), usedforsecurity=False).digest()))


def workload_from_meta(meta: Mapping[str, Any]) -> Workload | None:
    """The workload named by a row's workload columns; None when it names none."""

    def text(key: str) -> str | None:
        value = meta.get(key)
        return None if value in (None, "") else str(value)

    team = text("team")
    if text("slurm_job_id") is not None:
        job = str(text("slurm_job_id"))
        return Workload(
            kind=WorkloadKind.SLURM_JOB,
            id=job,
            slurm_job_id=job,
            name=text("job_name"),
            user=text("user"),
            team=team,
        )
    if text("pod") is not None:
        pod_id = text("pod_uid") or f"{text('namespace') or ''}/{text('pod')}"
        return Workload(
            kind=WorkloadKind.KUBERNETES_POD,
            id=pod_id,
            name=text("pod"),
            namespace=text("namespace"),
            container=text("container"),
            team=team,
        )
    return None


def gpu_info_from_meta(
    gpu_uuid: str, ordinal: int, meta: Mapping[str, Any], memory_total_bytes: int | None
) -> GpuInfo:
    """A GpuInfo from what the trace recorded; index is the row's ``gpu_index`` or ``ordinal``."""
    return GpuInfo(
        uuid=gpu_uuid,
        index=int(meta.get("gpu_index", ordinal)),
        name=str(meta.get("gpu_name", "replayed GPU (model not recorded)")),
        memory_total_bytes=memory_total_bytes,
    )


def write_trace(
    path: Path,
    samples: Iterable[GpuSample],
    *,
    node: str | None = None,
    gpus: Mapping[str, GpuInfo] | None = None,
) -> int:
    """Write samples as a generic trace: JSONL (lossless) or CSV (scalar fields and the
    first workload; processes and XIDs are dropped). Returns the number of rows written."""
    gpus = gpus or {}
    jsonl = path.suffix in (".jsonl", ".ndjson")
    rows = [_row_of(sample, node, gpus.get(sample.gpu_uuid), flat=not jsonl) for sample in samples]
    with path.open("w", encoding="utf-8", newline="") as out:
        if jsonl:
            for row in rows:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
            return len(rows)
        columns = [
            "timestamp",
            "gpu_uuid",
            *META_COLUMNS,
            *[f for f in SCALAR_FIELDS if any(f in r for r in rows)],
        ]
        writer = csv.DictWriter(out, columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_text(v) for k, v in row.items()})
    return len(rows)


def _row_of(
    sample: GpuSample, node: str | None, info: GpuInfo | None, *, flat: bool
) -> dict[str, Any]:
    row: dict[str, Any] = msgspec.to_builtins(sample)
    if node is not None:
        row["node"] = node
    if info is not None:
        row["gpu_name"], row["gpu_index"] = info.name, info.index
    if flat and sample.workloads:
        row.update(_workload_columns(sample.workloads[0]))
    return row


def _workload_columns(w: Workload) -> dict[str, str]:
    pod = w.kind is WorkloadKind.KUBERNETES_POD
    flat = {
        "pod": w.name if pod else None,
        "namespace": w.namespace,
        "container": w.container,
        "pod_uid": w.id if pod else None,
        "slurm_job_id": w.slurm_job_id,
        "user": w.user,
        "team": w.team,
        "job_name": None if pod else w.name,
    }
    return {k: v for k, v in flat.items() if v is not None}


def _csv_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
