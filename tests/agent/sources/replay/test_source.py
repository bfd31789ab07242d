"""ReplaySource over the generic long format: round trips, gaps, nodes, bad input."""

from __future__ import annotations

import csv
import json
import tarfile
from pathlib import Path

import msgspec
import pytest

from agent.config import SourceSettings
from agent.model import GpuSample
from agent.sources.interface import SourceError
from agent.sources.replay.formats import write_trace
from agent.sources.replay.source import ReplaySource
from agent.sources.simulated.source import DEFAULT_START_TIME, SimulatedNode
from gpufleet.settings import ConfigError

T0 = DEFAULT_START_TIME


def simulated_run(seconds: int = 120) -> tuple[SimulatedNode, list[GpuSample]]:
    node = SimulatedNode.build("sim", ["H100", "A100", "L4", "H100"], seed=2, start_time=T0)
    return node, [s for t in range(seconds) for s in node.read(T0 + t)]


def write_rows(path: Path, rows: list[dict[str, object]]) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path
    columns = sorted({k for r in rows for k in r})
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_jsonl_round_trip_is_lossless(tmp_path: Path) -> None:
    node, samples = simulated_run()
    gpus = {g.uuid: g for g in node.discover()}
    path = tmp_path / "trace.jsonl"
    assert write_trace(path, samples, node="sim", gpus=gpus) == len(samples)
    source = ReplaySource(path)
    assert source.node == "sim" and source.step_seconds == 1.0
    assert [(g.uuid, g.index, g.name) for g in source.discover()] == [
        (g.uuid, g.index, g.name) for g in node.discover()
    ]
    assert list(source.recorded_samples()) == samples  # processes, workloads, labels included
    assert list(source.iter_samples(mark_gaps=False)) == samples  # every field every point


def test_csv_round_trip_keeps_scalar_fields_and_the_workload(tmp_path: Path) -> None:
    node, samples = simulated_run()
    path = tmp_path / "trace.csv"
    write_trace(path, samples, gpus={g.uuid: g for g in node.discover()})
    replayed = list(ReplaySource(path).recorded_samples())
    assert len(replayed) == len(samples)
    for got, want in zip(replayed, samples, strict=True):
        want_scalars = msgspec.structs.replace(want, processes=(), workloads=())
        assert msgspec.structs.replace(got, workloads=()) == want_scalars
        assert [w.key for w in got.workloads] == [w.key for w in want.workloads]
        for g, w in zip(got.workloads, want.workloads, strict=True):
            assert (g.id, g.namespace, g.container, g.team, g.user) == (
                w.id, w.namespace, w.container, w.team, w.user)  # fmt: skip


def test_read_holds_a_point_for_one_and_a_half_steps_then_reports_a_gap(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [
        {
            "timestamp": 100.0 + t,
            "gpu_uuid": "GPU-a",
            "sm_activity": 0.0,
            "power_watts": 70.0,
            "energy_joules": 1000.0 + 70.0 * t,
        }
        for t in [*range(10), *range(20, 30)]
    ] + [{"timestamp": 100.0 + t, "gpu_uuid": "GPU-b", "sm_activity": 0.5} for t in range(10)]
    source = ReplaySource(write_rows(tmp_path / "gappy.csv", rows))
    assert source.step_seconds == 1.0
    held = {s.gpu_uuid: s for s in source.read(109.4)}
    assert held["GPU-a"].sm_activity == 0.0 and held["GPU-a"].timestamp == 109.4
    assert held["GPU-b"].sm_activity == 0.5
    (gap,) = source.read(115.0)  # GPU-b's life is over; GPU-a is in a gap
    assert gap.gpu_uuid == "GPU-a"
    assert (gap.sm_activity, gap.dram_activity, gap.power_watts, gap.energy_joules) == (
        None, None, None, None)  # fmt: skip
    assert source.read(99.0) == []
    assert [s.sm_activity for s in source.read(120.0)] == [0.0]


def test_iter_samples_marks_gaps_where_read_starts_reporting_them(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [
        {"timestamp": float(t), "gpu_uuid": "GPU-a", "sm_activity": 0.0} for t in (0, 1, 2, 9, 10)
    ]
    source = ReplaySource(write_rows(tmp_path / "g.jsonl", rows))
    marked = list(source.iter_samples())
    # the last point holds too: its 1.5 steps end at 11.5, where read stops yielding the GPU
    assert [(s.timestamp, s.sm_activity) for s in marked] == [
        (0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (3.5, None), (9.0, 0.0), (10.0, 0.0),
        (11.5, None)]  # fmt: skip
    assert source.read(3.49)[0].sm_activity == 0.0 and source.read(3.5)[0].sm_activity is None
    assert source.read(11.49)[0].sm_activity == 0.0 and source.read(11.5) == []
    assert len(list(source.iter_samples(mark_gaps=False))) == 5


def test_iter_samples_is_in_time_order_across_gpus(tmp_path: Path) -> None:
    node, samples = simulated_run(30)
    path = tmp_path / "t.jsonl"
    write_trace(path, reversed(samples), gpus={g.uuid: g for g in node.discover()})
    order = {g.uuid: g.index for g in node.discover()}
    replayed = ReplaySource(path).iter_samples(mark_gaps=False)
    keys = [(s.timestamp, order[s.gpu_uuid]) for s in replayed]
    assert keys == sorted(keys) and len(keys) == len(samples)


def test_pod_rows_without_gpu_uuid_become_gpus_held_by_the_pod(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [
        {"timestamp": t, "pod": "web-1", "namespace": "shop", "sm_activity": 0.25}
        for t in (0.0, 60.0)
    ]
    source = ReplaySource(write_rows(tmp_path / "pods.csv", rows))
    (sample,) = source.read(30.0)
    assert sample.workloads[0].key == "pod:shop/web-1" and sample.sm_activity == 0.25
    assert sample.gpu_uuid.startswith("GPU-") and source.step_seconds == 60.0


def test_node_column_selects_rows_and_a_missing_node_is_an_error(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [
        {"timestamp": 0.0, "gpu_uuid": f"GPU-{n}", "node": n, "power_watts": 50.0} for n in "xy"
    ]
    path = write_rows(tmp_path / "nodes.jsonl", rows)
    assert [g.uuid for g in ReplaySource(path, node="y").discover()] == ["GPU-y"]
    assert ReplaySource(path).node is None and ReplaySource(path).node_names == ["x", "y"]
    with pytest.raises(SourceError, match="'z'"):
        ReplaySource(path, node="z")
    unnamed = write_rows(tmp_path / "plain.jsonl", [{"timestamp": 0.0, "gpu_uuid": "GPU-q"}])
    assert ReplaySource(unnamed, node="named").node == "named"


def test_archives_and_directories_are_read(tmp_path: Path) -> None:
    node, samples = simulated_run(20)
    inner = tmp_path / "inner.csv"
    write_trace(inner, samples, gpus={g.uuid: g for g in node.discover()})
    archive = tmp_path / "dir" / "trace.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(inner, arcname="nested/trace.csv")
    from_archive = list(ReplaySource(archive).recorded_samples())
    assert from_archive == list(ReplaySource(inner).recorded_samples())
    assert list(ReplaySource(archive.parent).recorded_samples()) == from_archive


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("gpu_uuid,power_watts\nGPU-a,5\n", r"x\.csv:2: .*timestamp"),
        ("timestamp,power_watts\n1.0,5\n", r"x\.csv:2: .*gpu_uuid"),
        ("timestamp,gpu_uuid,power_watts\n1.0,GPU-a,lots\n", r"power_watts"),
    ],
)
def test_bad_rows_name_the_file_line_or_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.csv"
    path.write_text(content)
    with pytest.raises(SourceError, match=message):
        ReplaySource(path)


def test_missing_or_empty_traces_are_source_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        ReplaySource(tmp_path / "nope.csv")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SourceError, match="no trace rows"):
        ReplaySource(tmp_path / "empty.jsonl")


def test_from_settings_replays_the_trace_from_now(tmp_path: Path) -> None:
    _, samples = simulated_run(10)
    path = tmp_path / "t.jsonl"
    write_trace(path, samples)
    settings = SourceSettings(kind="replay", replay_path=path)
    source = ReplaySource.from_settings("sim", settings, now=5000.0)
    assert source.start == 5000.0 and source.end == 5009.0
    first = source.read(5000.0)
    # without gpu_index in the trace, GPUs are indexed in UUID order
    assert {s.gpu_uuid: s.power_watts for s in first} == {
        s.gpu_uuid: s.power_watts for s in samples[:4]
    }
    assert all(s.timestamp == 5000.0 for s in first)
    with pytest.raises(ConfigError, match="replay_path"):
        ReplaySource.from_settings("sim", SourceSettings(kind="replay"))
