"""The live fleet in PostgreSQL, for collector replicas: each shard's owner publishes its
GPUs' views (``live_gpus``, one row per GPU, upserted while it applies), and every replica
answers /v1/fleet from the table, so all of them list the whole fleet.

A row is the owner's ``GpuView`` (msgspec JSON) as of its last publish. Readers judge
staleness themselves (``stale_view``): a GPU whose newest reading is older than
``analysis.stale_after_seconds`` is unknown whoever published it last, so a dead owner's
rows read as unknown until the shard's next owner publishes again.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from collector.ledger.sql import Connection
from collector.records import GpuState, GpuView

_DECODER = msgspec.json.Decoder(GpuView)
_ENCODER = msgspec.json.Encoder()

_UPSERT = (
    "INSERT INTO live_gpus (uuid, node, shard, view, published_at) VALUES (?, ?, ?, ?, now()) "
    "ON CONFLICT (uuid) DO UPDATE SET node = excluded.node, shard = excluded.shard, "
    "view = excluded.view, published_at = excluded.published_at"
)


def encode_view(view: GpuView) -> bytes:
    return _ENCODER.encode(view)


def publish(
    conn: Connection,
    changed: Sequence[tuple[int, GpuView, bytes]],
    shards: Sequence[int],
    tracked: Sequence[str],
) -> None:
    """Upsert ``changed`` (shard, view, its JSON) and delete the rows of ``shards`` whose
    GPU is no longer ``tracked`` (forgotten as silent)."""
    conn.executemany(_UPSERT, [(v.uuid, v.node, shard, body) for shard, v, body in changed])
    conn.execute(
        "DELETE FROM live_gpus WHERE shard = ANY(?) AND NOT (uuid = ANY(?))",
        (list(shards), list(tracked)),
    )


def live_views(conn: Connection) -> list[GpuView]:
    """Every published view, by node, index and uuid."""
    rows = conn.execute("SELECT view FROM live_gpus ORDER BY node, uuid").fetchall()
    views = [_DECODER.decode(bytes(r[0])) for r in rows]
    return sorted(views, key=lambda v: (v.node, v.index, v.uuid))


def holders(conn: Connection) -> list[tuple[str, str, float]]:
    """Every published GPU: uuid, node and seconds since its owner published it (the
    server's clock, so replicas' clocks need not agree)."""
    rows = conn.execute(
        "SELECT uuid, node, EXTRACT(EPOCH FROM now() - published_at) FROM live_gpus"
    ).fetchall()
    return [(str(uuid), str(node), float(age)) for uuid, node, age in rows]


def stale_view(view: GpuView, now: float, stale_after_seconds: float) -> GpuView:
    """``view`` at ``now``: unknown (no idle time) once its newest reading is stale."""
    if view.last_seen is not None and now - view.last_seen <= stale_after_seconds:
        return view
    if view.state is GpuState.UNKNOWN:
        return view
    return msgspec.structs.replace(view, state=GpuState.UNKNOWN, idle_since=None)
