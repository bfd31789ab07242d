"""One minute of one holder's GPU, as the bottleneck windows keep it (collector/fleet/
windows.py): column sums folded a run of samples at a time.

The rule is ``fold``: what a minute counts and sums of its samples. It runs over a run of
one GPU's samples (a 5-second batch is mostly one run) in local variables and is stored once
per run, so a sample costs a few dozen bytecodes rather than a score of attribute updates
(bench/collector_instructions). A minute's sums do not care in which order its samples come.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.model import GpuSample
from collector.analysis.verdicts import HARDWARE_XIDS, THROTTLE_MASK

#: a GPU counts as busy (its clocks and throttle reasons matter) at this SM activity
BUSY_SM = 0.05
#: PCIe bytes per second per lane and direction, by generation (after line encoding)
PCIE_LANE_BYTES_PER_SECOND = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}

#: a minute's sums, one column each (``Minute.sums``); counts are ints, the rest floats:
#: samples, those lost (unhealthy or no SM activity), with a hardware XID, with SM activity,
#: its sum and sum of squares, DRAM and tensor activity (count, sum), SM activity x clock
#: ratio, busy samples' clock ratio (count, sum), busy samples, throttled busy samples, PCIe
#: RX share of the link (count, sum), NVLink bytes per second (count, sum), remaps pending
(N, LOST, XID, SM_N, SM, SM2, DRAM_N, DRAM, TENSOR_N, TENSOR, USED, CLOCK_N, CLOCK, BUSY,
 THROTTLED, RX_N, RX, NV_N, NV, REMAP) = range(20)  # fmt: skip


#: a minute before its first sample (counts as ints, sums as floats)
_EMPTY = [0, 0, 0, 0, 0.0, 0.0, 0, 0.0, 0, 0.0, 0.0, 0, 0.0, 0, 0, 0, 0.0, 0, 0.0, 0]


class Minute:
    """One minute of one holder's GPU: the column sums (``sums``, replaced, never changed in
    place), the highest PCIe RX share, the lowest and highest uncorrected ECC counter
    (None: none read), and the hardware XID codes seen (rare: only faulted GPUs pay for
    the set)."""

    __slots__ = ("ecc_high", "ecc_low", "rx_max", "sums", "xids")

    def __init__(self) -> None:
        self.sums: list[float] = _EMPTY
        self.rx_max = 0.0
        self.ecc_low: int | None = None
        self.ecc_high: int | None = None
        self.xids: frozenset[int] = frozenset()

    def fold(self, run: Sequence[GpuSample]) -> None:
        """Add ``run``, samples of the GPU in this minute: the one rule a minute is folded
        by, in local variables, its sums stored once per run (bench/collector_instructions)."""
        (n, lost, xid, sm_n, sm, sm2, dram_n, dram, tensor_n, tensor, used, clock_n, clock,
         busy, throttled, rx_n, rx, nv_n, nv, remap) = self.sums  # fmt: skip
        low, high = self.ecc_low, self.ecc_high
        links: list[GpuSample] = []
        for s in run:
            if s.xid_errors and not HARDWARE_XIDS.isdisjoint(s.xid_errors):
                xid += 1
                self.xids |= HARDWARE_XIDS.intersection(s.xid_errors)
            if (a := s.sm_activity) is None or not s.healthy:
                lost += 1
                continue
            sm_n, sm, sm2 = sm_n + 1, sm + a, sm2 + a * a
            if (d := s.dram_activity) is not None:
                dram_n, dram = dram_n + 1, dram + d
            if (t := s.tensor_activity) is not None:
                tensor_n, tensor = tensor_n + 1, tensor + t
            c, default = s.sm_clock_hertz, s.sm_clock_default_hertz
            ratio = (c / default if c < default else 1.0) if c and default else None
            used += a if ratio is None else a * ratio
            if a >= BUSY_SM:
                busy += 1
                if ratio is not None:
                    clock_n, clock = clock_n + 1, clock + ratio
                if (reasons := s.throttle_reasons) and reasons & THROTTLE_MASK:
                    throttled += 1
            if (
                s.pcie_rx_bytes_per_second is not None
                or s.nvlink_tx_bytes_per_second is not None
                or s.nvlink_rx_bytes_per_second is not None
            ):
                links.append(s)
            remap += bool(s.remapped_rows_pending)
            if (e := s.ecc_uncorrected_total) is not None:
                low = e if low is None or e < low else low
                high = e if high is None or e > high else high
        if links:
            rx_n, rx, nv_n, nv = self._links(links, rx_n, rx, nv_n, nv)
        self.sums = [
            n + len(run), lost, xid, sm_n, sm, sm2, dram_n, dram, tensor_n, tensor, used,
            clock_n, clock, busy, throttled, rx_n, rx, nv_n, nv, remap,
        ]  # fmt: skip
        self.ecc_low, self.ecc_high = low, high

    def _links(
        self, samples: Sequence[GpuSample], rx_n: float, rx: float, nv_n: float, nv: float
    ) -> tuple[float, float, float, float]:
        """The PCIe RX share of the link (count, sum; its highest in ``rx_max``) and NVLink
        TX + RX bytes per second (count, sum), continued over the samples that read either."""
        for s in samples:
            lane = PCIE_LANE_BYTES_PER_SECOND.get(s.pcie_link_generation_max or 0)
            width = s.pcie_link_width_max or s.pcie_link_width
            if (bytes_rx := s.pcie_rx_bytes_per_second) is not None and lane and width:
                share = bytes_rx / (lane * width)
                rx_n, rx, self.rx_max = rx_n + 1, rx + share, max(self.rx_max, share)
            tx, rx_nv = s.nvlink_tx_bytes_per_second, s.nvlink_rx_bytes_per_second
            if tx is not None or rx_nv is not None:
                nv_n, nv = nv_n + 1, nv + (tx or 0.0) + (rx_nv or 0.0)
        return rx_n, rx, nv_n, nv
