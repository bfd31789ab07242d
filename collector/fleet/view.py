"""A tracked GPU as readers see it: the ``GpuView`` of its newest reading and state."""

from __future__ import annotations

from agent.model import GpuInfo
from collector.fleet.health import problems_of
from collector.fleet.readings import Reading
from collector.records import GpuHealth, GpuState, GpuView, XidSeen


def view_of(
    info: GpuInfo,
    node: str,
    model: str,
    state: GpuState,
    r: Reading | None,
    idle_since: float | None,
    offset_seconds: float = 0.0,
    price_fraction: float = 1.0,
    holders_idle_since: dict[str, float] | None = None,
    health: GpuHealth | None = None,
    xids: tuple[XidSeen, ...] = (),
) -> GpuView:
    """The view of a GPU in ``state`` whose newest reading is ``r`` (None: never read);
    memory total falls back to the GPU's identity when the reading lacks it. Times are
    moved from the node's clock (``offset_seconds`` ahead) to the collector's; ``health``
    and ``xids`` are the GPU's (collector/fleet/health.py), the XIDs' times moved already."""
    return GpuView(
        uuid=info.uuid,
        node=node,
        index=info.index,
        model=model,
        name=info.name,
        state=state,
        last_seen=r.timestamp - offset_seconds if r is not None else None,
        workloads=r.holders.refs if r is not None else (),
        idle_since=idle_since - offset_seconds if idle_since is not None else None,
        sm_activity=r.sm_activity if r is not None else None,
        dram_activity=r.dram_activity if r is not None else None,
        power_watts=r.power_watts if r is not None else None,
        memory_used_bytes=r.memory_used_bytes if r is not None else None,
        memory_total_bytes=(r.memory_total_bytes if r is not None else None)
        or info.memory_total_bytes,
        mig_parent_uuid=info.mig_parent_uuid,
        mig_profile=info.mig_profile,
        healthy=r.healthy if r is not None else True,
        price_fraction=price_fraction,
        mig_enabled=info.mig_enabled,
        holder_fractions=_fractions(r),
        holders_idle_since={
            key: start - offset_seconds for key, start in (holders_idle_since or {}).items()
        },
        health=health,
        recent_xids=xids,
        problems=problems_of(health, xids),
    )


def _fractions(r: Reading | None) -> dict[str, float]:
    sharing = r.holders.sharing if r is not None else None
    return {} if sharing is None else {ref.key: f for ref, f in sharing.fractions.items()}
