"""dcgm-exporter's two namings: 4.8.x (DCGM's legacy field names) and 4.9 (DCGM 4.7's).

dcgm-exporter 4.9.0 renamed the default and profiling fields that DCGM 4.7 deprecates, and
changed the units of some: clocks MHz -> Hz, energy mJ -> J, utilisation % -> ratio, fan
% -> ratio. It also renamed the driver-version label to ``DCGM_FI_SYSTEM_DRIVER_VERSION``
(and 4.8.3 already renamed ``Hostname`` to ``hostname``). ``exporter.dcgm_naming`` picks
one. A renamed field reports its 4.8 twin's value; one whose unit changed is computed
from our SI sample under its own name (agent/metrics/dcgm.py), never by scaling a
converted value back.

Sources for the 4.9 names (research/dcgm-exporter.md 1.4): DCGM's deprecated-alias table
(go-dcgm / dcgm_fields.py, same field ids) and its base-unit fields (new ids 1603, 1604,
1611, 1612). Fields whose 4.9 name we could not verify keep their 4.8 name and unit in
both namings (``UNVERIFIED_4_9``) rather than carry a made-up name; the 4.9.0 CSV itself
was not at hand.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, NamedTuple

from agent.metrics.dcgm_fields import DCGM_LABELS, DCGM_METRICS, XID_LABELS, DcgmSpec

DcgmNaming = Literal["4.8", "4.9"]
NAMINGS: tuple[DcgmNaming, ...] = ("4.8", "4.9")


class Rename(NamedTuple):
    name: str
    #: where the unit changed: the new unit and help (else the 4.8 ones are kept)
    unit: str | None = None
    help: str | None = None


RENAMES_4_9: dict[str, Rename] = {
    "DCGM_FI_DEV_SM_CLOCK": Rename(
        "DCGM_FI_DEV_SM_CLOCK_HERTZ", "Hz", "SM clock frequency (in Hz)."
    ),
    "DCGM_FI_DEV_MEM_CLOCK": Rename(
        "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "Hz", "Memory clock frequency (in Hz)."
    ),
    "DCGM_FI_DEV_MEMORY_TEMP": Rename("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS"),
    "DCGM_FI_DEV_GPU_TEMP": Rename("DCGM_FI_DEV_GPU_TEMP_CELSIUS"),
    "DCGM_FI_DEV_POWER_USAGE": Rename("DCGM_FI_DEV_BOARD_POWER_WATTS"),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": Rename(
        "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
        "J",
        "Total energy consumption since the driver was loaded (in J).",
    ),
    "DCGM_FI_DEV_GPU_UTIL": Rename(
        "DCGM_FI_DEV_GPU_UTIL_RATIO", "ratio", "GPU utilization (ratio 0..1)."
    ),
    "DCGM_FI_DEV_XID_ERRORS": Rename("DCGM_FI_DEV_XID_ERROR"),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": Rename("DCGM_FI_DEV_PCIE_REPLAY_TOTAL"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": Rename("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": Rename("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"),
    "DCGM_FI_DEV_RETIRED_PENDING": Rename("DCGM_FI_DEV_PAGE_RETIRED_PENDING"),
    "DCGM_FI_DEV_FAN_SPEED": Rename(
        "DCGM_FI_DEV_FAN_SPEED_RATIO", "ratio", "Fan speed (ratio 0..1)."
    ),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": Rename("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"),
    "DCGM_FI_PROF_SM_ACTIVE": Rename("DCGM_FI_PROF_SM_UTIL_RATIO"),
    "DCGM_FI_PROF_SM_OCCUPANCY": Rename("DCGM_FI_PROF_SM_OCCUPANCY_RATIO"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": Rename("DCGM_FI_PROF_TENSOR_UTIL_RATIO"),
    "DCGM_FI_PROF_DRAM_ACTIVE": Rename("DCGM_FI_PROF_DRAM_UTIL_RATIO"),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": Rename("DCGM_FI_PROF_FP64_UTIL_RATIO"),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": Rename("DCGM_FI_PROF_FP32_UTIL_RATIO"),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": Rename("DCGM_FI_PROF_FP16_UTIL_RATIO"),
}

#: fields the 4.9 release renamed or re-unitted (per its notes) whose new name we could not
#: verify: exported under the 4.8 name and unit in both namings
UNVERIFIED_4_9: frozenset[str] = frozenset(
    {
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_DEC_UTIL",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_RESERVED",
    }
)

_LABELS_4_9 = {"Hostname": "hostname", "DCGM_FI_DRIVER_VERSION": "DCGM_FI_SYSTEM_DRIVER_VERSION"}


def dcgm_labels(naming: DcgmNaming, labels: tuple[str, ...] = DCGM_LABELS) -> tuple[str, ...]:
    """The GPU template's label names in ``naming`` (same order, same values)."""
    if naming == "4.8":
        return labels
    return tuple(_LABELS_4_9.get(label, label) for label in labels)


def dcgm_specs(naming: DcgmNaming) -> tuple[DcgmSpec, ...]:
    """Every field we export, named, unitted and labelled as ``naming`` does."""
    if naming == "4.8":
        return DCGM_METRICS
    return tuple(_in_4_9(spec) for spec in DCGM_METRICS)


def _in_4_9(spec: DcgmSpec) -> DcgmSpec:
    rename = RENAMES_4_9.get(spec.name, Rename(spec.name))
    return dataclasses.replace(
        spec,
        name=rename.name,
        source="" if rename.unit else spec.name,
        help=rename.help or spec.help,
        unit=rename.unit or spec.unit,
        labels=dcgm_labels("4.9", XID_LABELS if spec.labels == XID_LABELS else DCGM_LABELS),
    )
