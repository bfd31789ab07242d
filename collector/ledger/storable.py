"""What of a batch the ledger could not store: the second line behind the edge's bounds.

SQLite's INTEGER is 64 bits; binding a larger Python int raises OverflowError, and once
such a value is applied it is in the write every following commit carries, so every commit
of the whole fleet fails. The edge refuses such values (collector/ingest/rules.py), but a
batch stored by an older version, or a bound missed there, would still reach the ledger.
``unstorable`` is checked before a batch is buffered, at ingest and at replay; a batch it
names is quarantined (collector/ledger/quarantine.py), never applied.

The fields checked are those the ledger keeps as integers: a GPU's ``index``
(``gpus.gpu_index``), ``seq`` (``ack_ranges``) and a sample's ``memory_used_bytes`` (the
workload peaks, ``workload_stats.memory_peak_bytes``). Everything else of a batch reaches
the ledger as a float or inside JSON text.
"""

from __future__ import annotations

from agent.model import Batch

#: SQLite's INTEGER range
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def unstorable(batch: Batch) -> str | None:
    """The first value of ``batch`` the ledger cannot hold, as ``$.path = value``; None
    when every value fits."""
    if not INT64_MIN <= batch.seq <= INT64_MAX:
        return f"$.seq = {batch.seq}"
    for i, info in enumerate(batch.gpus):
        if not INT64_MIN <= info.index <= INT64_MAX:
            return f"$.gpus[{i}].index = {info.index}"
    for i, sample in enumerate(batch.samples):
        memory = sample.memory_used_bytes
        if memory is not None and not INT64_MIN <= memory <= INT64_MAX:
            return f"$.samples[{i}].memory_used_bytes = {memory}"
    return None


def unstorable_message(where: str) -> str:
    """Why a batch with the value ``where`` is quarantined."""
    return f"{where} is past what the ledger can hold (a 64-bit signed integer)"
