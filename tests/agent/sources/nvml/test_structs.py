"""The plain twins of the binding's structs: the same bytes as the binding's, read faster."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from agent.sources.nvml.fields import FIELD_IDS
from agent.sources.nvml.structs import (
    LISTING_INITIAL_LENGTH,
    FieldValue,
    GpmMetricsGet,
    engine_utilisation_query,
    get_field_values,
    out_query,
    plain_twin,
    process_utilisation_query,
    processes_query,
)
from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario
from tests.fakes.nvml_scenario import ProcessSpec, with_gpu


def _offsets(struct: type) -> list[tuple[str, int, int]]:
    return [
        (name, getattr(struct, name).offset, getattr(struct, name).size)
        for name, *_ in struct._fields_  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize(
    "struct",
    [pynvml.c_nvmlFieldValue_t, pynvml.c_nvmlGpmMetricsGet_t, pynvml.c_nvmlGpmMetric_t],
)
def test_a_twin_has_the_binding_layout_member_by_member(struct: type) -> None:
    twin = plain_twin(struct)
    assert ctypes.sizeof(twin) == ctypes.sizeof(struct)
    assert _offsets(twin) == _offsets(struct)
    assert twin.__mro__[1] in (ctypes.Structure, ctypes.Union)  # no Python attribute hooks


def test_twins_used_by_the_agent_are_the_binding_structs_twins() -> None:
    assert FieldValue is plain_twin(pynvml.c_nvmlFieldValue_t)
    assert GpmMetricsGet is plain_twin(pynvml.c_nvmlGpmMetricsGet_t)


def test_a_prepared_request_reads_what_the_binding_wrapper_reads() -> None:
    """The binding's seams the agent calls (its symbol cache and return check) still exist,
    and a reused request answers as a fresh one, read after read."""
    assert callable(pynvml._nvmlGetFunctionPointer) and callable(pynvml._nvmlCheckReturn)
    clock = FakeClock()
    ids = list(FIELD_IDS.values())
    with install_fake_nvml(load_scenario("h100_sxm_8x_gpm"), clock):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        request = (FieldValue * len(ids))()
        for element, field_id in zip(request, ids, strict=True):
            element.fieldId, element.scopeId = (
                field_id if isinstance(field_id, tuple) else (field_id, 0)
            )
        for _ in range(3):
            clock.advance(1.0)
            ours = get_field_values(handle, request)
            theirs = pynvml.nvmlDeviceGetFieldValues(handle, ids)
            assert [(e.nvmlReturn, e.valueType, e.value.ullVal) for e in ours] == [
                (e.nvmlReturn, e.valueType, e.value.ullVal) for e in theirs
            ]
        pynvml.nvmlShutdown()


@pytest.mark.parametrize(
    "symbol", ["nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization"]
)
def test_a_prepared_engine_query_answers_the_binding_wrappers_percent(symbol: str) -> None:
    scenario = with_gpu(
        load_scenario("h100_sxm_8x_gpm"),
        0,
        encoder_utilization_percent=37,
        decoder_utilization_percent=88,
    )
    with install_fake_nvml(scenario, FakeClock()):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        query = engine_utilisation_query(handle, symbol)
        for _ in range(2):
            assert query() == getattr(pynvml, symbol)(handle)[0]
        assert query() in (37, 88)
        pynvml.nvmlShutdown()


def _many_processes(count: int) -> tuple[ProcessSpec, ...]:
    return tuple(
        ProcessSpec(pid=5000 + n, used_memory_bytes=(n + 1) << 20, sm_util_percent=n % 100)
        for n in range(count)
    )


@pytest.mark.parametrize("count", [0, 3, LISTING_INITIAL_LENGTH + 25])
def test_a_prepared_listing_answers_what_the_binding_wrappers_answer(count: int) -> None:
    """One call per listing once the array is long enough, the same processes and
    utilisation samples as the binding's two-call wrappers (the fake fills either)."""
    processes = _many_processes(count)
    scenario = with_gpu(load_scenario("h100_sxm_8x_gpm"), 0, processes=processes)
    clock = FakeClock()
    with install_fake_nvml(scenario, clock) as fake:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        listing = processes_query(handle, "nvmlDeviceGetComputeRunningProcesses_v3")
        utilisation = process_utilisation_query(handle)
        for _ in range(2):
            clock.advance(1.0)
            ours = [(p.pid, p.usedGpuMemory) for p in listing()]
            theirs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            assert ours == [(p.pid, p.usedGpuMemory) for p in theirs]
            if count:
                samples = [(s.pid, s.timeStamp, s.smUtil) for s in utilisation(0)]
                wrapper = pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
                assert samples == [(s.pid, s.timeStamp, s.smUtil) for s in wrapper]
        calls_before = fake.calls["nvmlDeviceGetComputeRunningProcesses_v3"]
        listing()
        assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == calls_before + 1
        pynvml.nvmlShutdown()
    assert ours == [(p.pid, p.used_memory_bytes) for p in processes]


def test_prepared_one_number_queries_answer_the_binding_wrappers_numbers() -> None:
    with install_fake_nvml(load_scenario("h100_sxm_8x_gpm"), FakeClock()):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(2)
        for clock_type in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM):
            query = out_query("nvmlDeviceGetClockInfo", handle, ctypes.c_uint(clock_type))
            assert query() == pynvml.nvmlDeviceGetClockInfo(handle, clock_type) > 0
        reasons = out_query(
            "nvmlDeviceGetCurrentClocksEventReasons", handle, out=ctypes.c_ulonglong
        )
        assert reasons() == pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        pynvml.nvmlShutdown()
