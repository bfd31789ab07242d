"""The on-disk spool: order, durability across restarts, crash leftovers, bounds."""

from __future__ import annotations

import gzip
import logging
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from agent.batch_split import halves
from agent.model import Batch, GpuInfo, GpuSample, decode_batch
from agent.spool import Spool
from agent.stats import AgentStats

BOOT = "3f2c8a9e-0000-4000-8000-000000000001"
MB = 1 << 20


def batch(seq: int, samples: int, boot_id: str = BOOT) -> Batch:
    return Batch(
        schema_version=1,
        node="node-1",
        agent_boot_id=boot_id,
        seq=seq,
        sent_at=1000.0 + seq,
        gpus=(GpuInfo(uuid="GPU-a", index=0, name="H100"),),
        samples=tuple(
            GpuSample(timestamp=seq * 1000.0 + i, gpu_uuid="GPU-a", power_watts=float(i))
            for i in range(samples)
        ),
    )


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_batches_come_back_oldest_first_with_their_identity_and_body(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10 * MB, 3600.0)
    written = [batch(1, 3), batch(2, 1), batch(3, 5, boot_id="another-boot")]
    for b in written:
        spool.append(b)

    pending = spool.pending()

    assert [(e.boot_id, e.seq, e.samples) for e in pending] == [
        (BOOT, 1, 3),
        (BOOT, 2, 1),
        ("another-boot", 3, 5),
    ]
    bodies = [spool.read_body(e) for e in pending]
    assert [decode_batch(gzip.decompress(b or b"")) for b in bodies] == written
    assert spool.size_bytes() == sum(p.stat().st_size for p in tmp_path.iterdir())


def test_remove_deletes_the_file_and_tolerates_a_missing_one(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10 * MB, 3600.0)
    first = spool.append(batch(1, 1))
    second = spool.append(batch(2, 1))
    spool.remove(first)
    spool.remove(first)
    assert spool.pending() == [second]
    assert list(tmp_path.iterdir()) == [second.path]


def test_a_new_spool_on_the_same_directory_sees_the_old_batches(tmp_path: Path) -> None:
    stats = AgentStats()
    old = Spool(tmp_path, 10 * MB, 3600.0)
    for seq in (1, 2, 3):
        old.append(batch(seq, 2))

    new = Spool(tmp_path, 10 * MB, 3600.0, stats)
    new.append(batch(1, 4, boot_id="new-boot"))

    assert [(e.boot_id, e.seq) for e in new.pending()] == [
        (BOOT, 1),
        (BOOT, 2),
        (BOOT, 3),
        ("new-boot", 1),
    ]
    assert stats.snapshot().spool_batches == 4
    assert stats.snapshot().spool_bytes == new.size_bytes()


def test_order_survives_a_clock_that_steps_back(tmp_path: Path) -> None:
    clock = Clock()
    spool = Spool(tmp_path, 10 * MB, 1e9, clock=clock)
    spool.append(batch(1, 1))
    clock.now -= 3600  # NTP steps the clock back; so does a restarted agent's clock
    spool.append(batch(2, 1))
    restarted = Spool(tmp_path, 10 * MB, 1e9, clock=clock)
    restarted.append(batch(3, 1))
    assert [e.seq for e in Spool(tmp_path, 10 * MB, 1e9, clock=clock).pending()] == [1, 2, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == [e.path.name for e in restarted.pending()]


def test_crash_leftovers_are_removed_on_start_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    spool = Spool(tmp_path, 10 * MB, 3600.0)
    good = spool.append(batch(1, 2))
    torn = spool.append(batch(2, 7))
    torn.path.write_bytes(torn.path.read_bytes()[:-9])  # a torn write under the final name
    half = tmp_path / (good.path.name.replace("_000000000001_", "_000000000003_") + ".tmp")
    half.write_bytes(b"\x1f\x8b half a batch")  # a crash between write and rename
    foreign = tmp_path / "README"
    foreign.write_text("not ours")
    stats = AgentStats()

    restarted = Spool(tmp_path, 10 * MB, 3600.0, stats)

    assert restarted.pending() == [good]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([good.path.name, "README"])
    snap = stats.snapshot()
    assert (snap.spool_dropped_batches_total, snap.spool_dropped_samples_total) == (1, 7)
    assert "did not finish" in caplog.text
    assert "corrupt" in caplog.text


def test_a_file_corrupted_after_start_is_dropped_when_read(tmp_path: Path) -> None:
    stats = AgentStats()
    spool = Spool(tmp_path, 10 * MB, 3600.0, stats)
    entry = spool.append(batch(1, 4))
    entry.path.write_bytes(b"garbage")
    assert spool.read_body(entry) is None
    assert spool.pending() == []
    assert stats.snapshot().spool_dropped_samples_total == 4


def test_past_max_age_the_oldest_are_dropped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    stats = AgentStats()
    spool = Spool(tmp_path, 10 * MB, 25.0, stats, clock=clock)
    for seq in range(1, 6):  # created at +0, +10, +20, +30, +40 s
        spool.append(batch(seq, seq))
        clock.now += 10

    # at the last append (+40 s) the batches made at +0 and +10 were older than 25 s
    assert [e.seq for e in spool.pending()] == [3, 4, 5]
    snap = stats.snapshot()
    assert (snap.spool_dropped_batches_total, snap.spool_dropped_samples_total) == (2, 1 + 2)
    assert "older than 25 s" in caplog.text


def test_past_max_bytes_the_oldest_are_dropped_and_counted(tmp_path: Path) -> None:
    probe = Spool(tmp_path / "probe", 10 * MB, 3600.0).append(batch(1, 10))
    stats = AgentStats()
    spool = Spool(tmp_path / "spool", int(probe.size_bytes * 3.5), 3600.0, stats)
    for seq in range(1, 8):
        spool.append(batch(seq, 10))

    assert [e.seq for e in spool.pending()] == [5, 6, 7]
    assert spool.size_bytes() <= int(probe.size_bytes * 3.5)
    snap = stats.snapshot()
    assert (snap.spool_dropped_batches_total, snap.spool_dropped_samples_total) == (4, 40)
    assert (snap.spool_batches, snap.spool_bytes) == (3, spool.size_bytes())


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=12),
    max_bytes=st.integers(min_value=0, max_value=4000),
)
def test_bound_by_bytes_keeps_the_newest_and_loses_exactly_what_it_counts(
    sizes: list[int], max_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        stats = AgentStats()
        spool = Spool(Path(directory), max_bytes, 3600.0, stats)
        for seq, samples in enumerate(sizes, start=1):
            spool.append(batch(seq, samples))
        kept = [e.seq for e in spool.pending()]
        snap = stats.snapshot()

        assert spool.size_bytes() <= max_bytes
        assert kept == list(range(len(sizes) - len(kept) + 1, len(sizes) + 1))  # a suffix
        lost = sizes[: len(sizes) - len(kept)]
        assert snap.spool_dropped_samples_total == sum(lost)
        assert snap.spool_dropped_batches_total == len(lost)
        assert len(list(Path(directory).iterdir())) == len(kept)


def test_halves_take_the_place_of_their_batch_and_survive_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10 * MB, 3600.0, clock=Clock())
    before, big, after = batch(1, 1), batch(2, 5), batch(3, 1)
    entries = [spool.append(b) for b in (before, big, after)]
    parts = halves(big)
    assert parts is not None

    spool.split(entries[1], *parts)

    def shape(s: Spool) -> list[tuple[int, int]]:
        return [(e.seq, e.samples) for e in s.pending()]

    want = [(1, 1), (parts[0].seq, 2), (parts[1].seq, 3), (3, 1)]
    assert shape(spool) == want
    assert shape(Spool(tmp_path, 10 * MB, 3600.0)) == want
    assert parts[0].samples + parts[1].samples == big.samples


@pytest.mark.parametrize("halves_written", [1, 2])
def test_a_split_a_crash_cut_short_is_settled_on_the_next_start(
    tmp_path: Path, halves_written: int
) -> None:
    spool = Spool(tmp_path, 10 * MB, 3600.0, clock=Clock())
    big = batch(7, 4)
    entry = spool.append(big)
    original = entry.path.read_bytes()
    parts = halves(big)
    assert parts is not None
    written = spool.split(entry, *parts)
    for extra in written[halves_written:]:
        extra.path.unlink()  # the crash came before this half was written ...
    entry.path.write_bytes(original)  # ... and before the original was removed

    recovered = Spool(tmp_path, 10 * MB, 3600.0)

    seqs = [(e.seq, e.samples) for e in recovered.pending()]
    if halves_written == 2:  # the split had finished: the halves stand
        assert seqs == [(parts[0].seq, 2), (parts[1].seq, 2)]
    else:  # it had not: the original stands, and is split again when sent
        assert seqs == [(7, 4)]
    assert len(list(tmp_path.iterdir())) == len(seqs)


def test_splitting_a_batch_again_gives_the_same_halves() -> None:
    big = batch(9, 7)
    first, second = halves(big) or (big, big)
    assert halves(big) == (first, second)
    quarters = halves(first)
    assert quarters is not None
    seqs = {9, first.seq, second.seq, quarters[0].seq, quarters[1].seq}
    assert len(seqs) == 5 and all(0 < seq < 2**63 for seq in seqs)
    assert first.seq < second.seq  # in sample order, as the spool sorts them
    assert quarters[0].seq < quarters[1].seq < second.seq
    assert halves(batch(3, 1)) is None
