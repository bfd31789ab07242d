"""What share of its physical GPU's price a MIG slice carries (DESIGN 4, MIG and shared GPUs).

A slice is priced by its share of the parent: its compute slices (``g / 7``) by default, or
its memory share where the price book sets ``mig_price_basis: memory``. The parent carries
only what no slice covers (unpartitioned capacity), so the parent and its slices together
never cost more than the GPU: one rule that accounting, waste now and recommendations use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from collector.analysis.gpu_models import GpuModel

#: the price book's ``mig_price_basis`` values
MIG_PRICE_BASES = ("compute", "memory")
#: ``3g.40gb`` -> (3, 40): compute slices and memory in GB (NVML profile names)
_PROFILE = re.compile(r"^(\d+)g\.(\d+(?:\.\d+)?)gb", re.IGNORECASE)
#: a MIG-capable GPU has 7 compute slices (A100, H100, H200, B200)
_COMPUTE_SLICES = 7
#: 3/7 + 2/7 + 2/7 is not exactly 1 in floating point: a remainder below this is none
_ROUNDING = 1e-9


def slice_fraction(
    parent: GpuModel | None,
    profile: str,
    memory_total_bytes: int | None = None,
    basis: str = "compute",
) -> float:
    """Share (0..1) of the parent's price one slice of ``profile`` costs on ``basis``.

    Compute from the profile name (``3g.40gb``: 3/7), else the catalogue; memory from
    the catalogue's profile, else the name (40 GB of the parent's), else the slice's
    reported memory. 1.0 when nothing says (priced as a whole GPU rather than silently free)."""
    if basis not in MIG_PRICE_BASES:
        raise ValueError(f"unknown MIG price basis {basis!r}; expected one of {MIG_PRICE_BASES}")
    known = next((p for p in parent.mig_profiles if p.name == profile), None) if parent else None
    match = _PROFILE.match(profile)
    if basis == "compute":  # g / 7 from the name is exact; the catalogue's is rounded
        if match:
            return _clamp(int(match.group(1)) / _COMPUTE_SLICES)
        return _clamp(known.compute_fraction) if known is not None else 1.0
    if parent is None:
        return 1.0
    if known is not None:
        memory = known.memory_bytes
    elif match:
        memory = float(match.group(2)) * 1e9
    elif memory_total_bytes:
        memory = float(memory_total_bytes)
    else:
        return 1.0
    return _clamp(memory / parent.memory_bytes)


def unpartitioned_fraction(slice_fractions: Iterable[float]) -> float:
    """What a MIG-enabled parent carries of its price: the share no slice covers (0 when
    its slices cover it all; the whole GPU when it has none)."""
    left = 1.0 - math.fsum(slice_fractions)
    return left if left > _ROUNDING else 0.0


def _clamp(fraction: float) -> float:
    return min(1.0, max(0.0, fraction))
