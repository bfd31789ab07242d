"""Simulated MIG: a physical GPU split into slices of different profiles, each with its
own holder (or none), as NVML shows it.

The parent board draws the power and keeps the energy counter; NVML has neither per
instance, so a slice's samples carry activity, memory, processes and holders only. The
parent's own activity is optional (``reports_activity``): under MIG, NVML's utilisation
is unsupported and only GPM (Hopper) can say. Ground truth: a slice's energy is its
parent's, split segment by segment by the slices' SM activity (equally when none is
active), the rule of DESIGN section 4, so ``true_workload_energy_joules`` of a slice's
holder is exact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from agent.model import GpuInfo, GpuSample
from agent.sources.simulated.gpu import SimulatedGpu
from agent.sources.simulated.hardware import GpuModel, board_gain, board_power_watts, gpu_model
from agent.sources.simulated.plan import (
    CUDA_VERSION,
    DRIVER_VERSION,
    board_info,
    deterministic_uuid,
    make_workload,
)
from agent.sources.simulated.workloads import ActivityKind, SimJob, make_pattern, stable_key

#: a MIG-capable GPU has 7 compute slices
COMPUTE_SLICES = 7


@dataclass(frozen=True)
class SliceSlot:
    """One MIG instance: its profile (``3g.40gb``) and the kind of job holding it (None:
    free)."""

    profile: str
    kind: ActivityKind | None = None

    @property
    def compute_slices(self) -> int:
        return int(self.profile.split("g.", 1)[0])

    @property
    def memory_bytes(self) -> int:
        return int(float(self.profile.split(".", 1)[1].removesuffix("gb")) * 1e9)


@dataclass(frozen=True)
class MigLayout:
    """A physical GPU in MIG mode: its model key, its slices, whether the parent reports
    its own activity (GPM) besides its power and energy."""

    model: str
    slots: tuple[SliceSlot, ...]
    parent_reports_activity: bool = True


#: a node of two H100s in MIG mode, slices of mixed profiles and holders: GPU 0 (parent
#: with GPM activity) 3g training, 2g inference, 1g stuck, 1g free; GPU 1 (parent without
#: activity) 4g notebook, 2g stuck, 1g free. ``gpufleet demo --mig`` and tests/e2e use it.
EXAMPLE_LAYOUTS = (
    MigLayout("H100", (SliceSlot("3g.40gb", ActivityKind.TRAINING),
                       SliceSlot("2g.20gb", ActivityKind.INFERENCE),
                       SliceSlot("1g.10gb", ActivityKind.STUCK), SliceSlot("1g.10gb"))),
    MigLayout("H100", (SliceSlot("4g.40gb", ActivityKind.NOTEBOOK),
                       SliceSlot("2g.20gb", ActivityKind.STUCK), SliceSlot("1g.10gb")),
              parent_reports_activity=False),
)  # fmt: skip


class SimulatedSlice(SimulatedGpu):
    """A MIG instance: its own jobs and activity; its power is its share of the parent's
    (ground truth only: its samples carry no power or energy)."""

    parent: SimulatedMigParent

    def power_watts(self, segment: int) -> float:
        return self.parent.power_watts(segment) * self.parent.share(self, segment)

    def sample(self, now: float) -> GpuSample:
        return msgspec.structs.replace(
            super().sample(now),
            power_watts=None,
            energy_joules=None,
            temperature_celsius=None,
            memory_temperature_celsius=None,
            sm_clock_hertz=None,
            throttle_reasons=None,
            ecc_corrected_total=None,
            ecc_uncorrected_total=None,
            encoder_activity=None,  # NVML: NotSupported on MIG instances
            decoder_activity=None,
        )


class SimulatedMigParent(SimulatedGpu):
    """The physical board of a MIG GPU: power from its slices' activity, the counter."""

    def __init__(
        self,
        info: GpuInfo,
        model: GpuModel,
        *,
        gain: float,
        key: int,
        epoch: float,
        slices: Sequence[SimulatedSlice],
        reports_activity: bool,
    ) -> None:
        super().__init__(info, model, gain=gain, key=key, epoch=epoch, jobs=())
        self.slices = tuple(slices)
        self.reports_activity = reports_activity
        self._weights = {
            s.info.uuid: int(str(s.info.mig_profile).split("g.")[0]) / COMPUTE_SLICES
            for s in self.slices
        }

    def state(self, segment: int) -> tuple[SimJob | None, float, float, float]:
        """The board: SM and DRAM activity of its slices weighted by their compute share,
        a context's idle floor while any slice is held."""
        start = self.segment_start(segment)
        sm = dram = 0.0
        held = False
        for piece in self.slices:
            s_sm, s_dram = piece.activity(segment)
            weight = self._weights[piece.info.uuid]
            sm, dram = sm + s_sm * weight, dram + s_dram * weight
            held = held or piece.job_at(start) is not None
        sm, dram = min(1.0, sm), min(1.0, dram)
        return None, sm, dram, board_power_watts(self.model, self.gain, sm, dram, context=held)

    def share(self, piece: SimulatedSlice, segment: int) -> float:
        """``piece``'s part of the board's energy in ``segment``: by SM activity, equal
        when no slice is active."""
        activity = [s.activity(segment)[0] for s in self.slices]
        total = sum(activity)
        if total <= 0:
            return 1.0 / len(self.slices)
        return piece.activity(segment)[0] / total

    def sample(self, now: float) -> GpuSample:
        # NVML's video engine utilisation is NotSupported in MIG mode, like utilisation
        sample = msgspec.structs.replace(
            super().sample(now), encoder_activity=None, decoder_activity=None
        )
        if self.reports_activity:
            return sample
        return msgspec.structs.replace(
            sample, sm_activity=None, dram_activity=None, sm_occupancy=None, tensor_activity=None
        )


def build_mig_gpus(
    node: str, index: int, layout: MigLayout, seed: int, epoch: float
) -> list[SimulatedGpu]:
    """The parent and its slices (in that order), slices held as ``layout`` says."""
    model = gpu_model(layout.model)
    parent_info = board_info(node, index, model, seed, mig_enabled=True)
    parent_uuid = parent_info.uuid
    slices = []
    for number, slot in enumerate(layout.slots):
        info = GpuInfo(
            uuid="MIG-" + deterministic_uuid(seed, node, index, number, "mig"),
            index=index,
            name=f"{model.name} MIG {slot.profile}",
            architecture=model.architecture,
            memory_total_bytes=slot.memory_bytes,
            mig_parent_uuid=parent_uuid,
            mig_profile=slot.profile,
            mig_gpu_instance_id=number + 1,
            driver_version=DRIVER_VERSION,
            cuda_version=CUDA_VERSION,
        )
        jobs = () if slot.kind is None else (_slice_job(node, index, number, slot.kind, seed),)
        slices.append(
            SimulatedSlice(
                info,
                dataclasses.replace(model, memory_total_bytes=slot.memory_bytes),
                gain=1.0,
                key=stable_key(seed, node, index, number, "noise"),
                epoch=epoch,
                jobs=jobs,
            )
        )
    parent = SimulatedMigParent(
        parent_info,
        model,
        gain=board_gain(f"{seed}/{node}/{index}/gain"),
        key=stable_key(seed, node, index, "noise"),
        epoch=epoch,
        slices=slices,
        reports_activity=layout.parent_reports_activity,
    )
    for piece in slices:
        piece.parent = parent
    return [parent, *slices]


def _slice_job(node: str, index: int, number: int, kind: ActivityKind, seed: int) -> SimJob:
    slot = 100 + index * 10 + number  # apart from the whole-GPU slots of plan_jobs
    return SimJob(
        workload=make_workload(kind, False, seed, node, slot),
        pattern=make_pattern(kind, stable_key(seed, node, slot, "pattern")),
        node=node,
        gpu_indexes=(index,),
        process_name="python",
    )
