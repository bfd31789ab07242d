"""Fixed logarithmic buckets for right-sizing histograms (memory bytes, SM activity).

Bucket 0 holds ``[0, floor)``; bucket ``i >= 1`` holds ``[floor * ratio**(i-1),
floor * ratio**i)``. The buckets never change, so histograms from any number of commits
merge by adding seconds per bucket, and a quantile read from the merged histogram is the
upper edge of the bucket holding the exact quantile, clipped to the exact peak: it never
under-states and over-states by less than ``ratio - 1`` (4 %). Below ``floor`` the error is
absolute (< 1 MiB of memory, < 0.001 of activity).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LogBuckets:
    floor: float
    ratio: float
    _log_ratio: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_log_ratio", math.log(self.ratio))

    def index(self, value: float) -> int:
        """The bucket holding ``value`` (negative values go to bucket 0)."""
        if value < self.floor:
            return 0
        return int(math.log(value / self.floor) / self._log_ratio) + 1

    def upper(self, index: int) -> float:
        """The upper edge of bucket ``index``."""
        return self.floor * self.ratio**index


#: memory used on one GPU; 311 buckets reach 200 GB
MEMORY_BUCKETS = LogBuckets(floor=float(2**20), ratio=1.04)
#: SM activity 0..1; 177 buckets reach 1.0
SM_ACTIVITY_BUCKETS = LogBuckets(floor=1e-3, ratio=1.04)


def histogram_quantile(
    seconds_by_bucket: Mapping[int, float], q: float, buckets: LogBuckets, peak: float
) -> float:
    """The ``q`` quantile (0..1, weighted nearest rank) of a histogram; 0.0 when empty.

    Nearest rank: the smallest value v with (seconds at or below v) >= q * total seconds.
    """
    total = math.fsum(seconds_by_bucket.values())
    if total <= 0.0:
        return 0.0
    rank = q * total * (1.0 - 1e-9)  # forgive rounding in sums of float seconds
    cumulative = 0.0
    for index in sorted(seconds_by_bucket):
        cumulative += seconds_by_bucket[index]
        if cumulative >= rank:
            return min(buckets.upper(index), peak)
    return peak
