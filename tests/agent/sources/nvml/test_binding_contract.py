"""The private seams of nvidia-ml-py that tests/fakes/nvml_lib.py depends on.

If one of these fails after upgrading nvidia-ml-py, the fake (and maybe agent/nvml*.py)
must follow the binding before the pinned range in pyproject.toml is widened.
"""

from __future__ import annotations

import ctypes
import re
import threading
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tests.fakes.nvml_lib import FakeClock, install_fake_nvml, load_scenario
from tests.paths import REPO

_NVML_DIR = REPO / "agent" / "sources" / "nvml"
_NVML_MODULES = sorted(p for p in _NVML_DIR.glob("*.py") if p.name != "__init__.py")


def test_library_loading_seams_exist() -> None:
    assert hasattr(pynvml, "nvmlLib"), "the loaded CDLL is no longer pynvml.nvmlLib"
    assert isinstance(pynvml._nvmlGetFunctionPointer_cache, dict)
    assert isinstance(pynvml._nvmlLib_refcount, int)
    assert isinstance(pynvml.libLoadLock, type(threading.Lock()))
    assert callable(pynvml._nvmlGetFunctionPointer)  # gpustat's "official binding" check
    assert callable(pynvml._LoadNvmlLibrary)


def test_the_binding_calls_the_installed_library_and_caches_its_symbols() -> None:
    with install_fake_nvml(load_scenario("a100_4x_no_gpm"), FakeClock()) as fake:
        pynvml.nvmlInit()  # must not try to CDLL-load the real library
        assert pynvml.nvmlDeviceGetCount() == 4
        assert pynvml._nvmlGetFunctionPointer_cache["nvmlDeviceGetCount_v2"] is not None
        pynvml.nvmlShutdown()
    assert fake.calls["nvmlInitWithFlags"] == 1 and fake.calls["nvmlDeviceGetCount_v2"] == 1
    assert "nvmlDeviceGetCount_v2" not in pynvml._nvmlGetFunctionPointer_cache  # restored


@pytest.mark.parametrize(
    ("call", "symbol"),
    [
        (lambda h: pynvml.nvmlDeviceGetHandleByIndex(0), "nvmlDeviceGetHandleByIndex_v2"),
        (lambda h: pynvml.nvmlDeviceGetPciInfo(h), "nvmlDeviceGetPciInfo_v3"),
        (
            lambda h: pynvml.nvmlDeviceGetComputeRunningProcesses(h),
            "nvmlDeviceGetComputeRunningProcesses_v3",
        ),
        (
            lambda h: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
            "nvmlDeviceGetMemoryInfo_v2",
        ),
        (
            lambda h: pynvml.nvmlDeviceGetTemperatureV(h, pynvml.NVML_TEMPERATURE_GPU),
            "nvmlDeviceGetTemperatureV",
        ),
        (
            lambda h: pynvml.nvmlEventSetWait(pynvml.nvmlEventSetCreate(), 0),
            "nvmlEventSetWait_v2",
        ),
    ],
)
def test_unversioned_wrappers_call_the_symbols_the_fake_implements(
    call: Callable[[Any], object], symbol: str
) -> None:
    with install_fake_nvml(load_scenario("a100_4x_no_gpm"), FakeClock()) as fake:
        pynvml.nvmlInit()
        try:
            call(pynvml.nvmlDeviceGetHandleByIndex(0))
        except pynvml.NVMLError_Timeout:
            pass  # an empty event set
        finally:
            pynvml.nvmlShutdown()
    assert fake.calls[symbol] >= 1


def test_error_codes_map_to_the_error_classes_the_agent_catches() -> None:
    for name in (
        "NotSupported",
        "GpuIsLost",
        "Timeout",
        "NotFound",
        "FunctionNotFound",
        "LibraryNotFound",
        "DriverNotLoaded",
        "Unknown",
    ):
        cls = getattr(pynvml, f"NVMLError_{name}")
        assert issubclass(cls, pynvml.NVMLError)
        code = getattr(pynvml, "NVML_ERROR_" + _snake(name))
        assert type(pynvml.NVMLError(code)) is cls and pynvml.NVMLError(code).value == code


def test_library_mismatch_error_is_not_an_nvml_error() -> None:
    # the agent catches it separately for the _v3 -> _v2 process fallback
    assert not issubclass(pynvml.NVMLLibraryMismatchError, pynvml.NVMLError)
    scenario = load_scenario("old_driver_no_v3")
    with install_fake_nvml(scenario, FakeClock()):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(pynvml.NVMLLibraryMismatchError):
            pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        pynvml.nvmlShutdown()


@pytest.mark.parametrize(
    ("struct", "fields"),
    [
        (
            "c_nvmlFieldValue_t",
            {"fieldId", "scopeId", "timestamp", "latencyUsec", "valueType", "nvmlReturn", "value"},
        ),
        ("c_nvmlValue_t", {"dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal"}),
        ("c_nvmlGpmMetricsGet_t", {"version", "numMetrics", "sample1", "sample2", "metrics"}),
        ("c_nvmlGpmMetric_t", {"metricId", "nvmlReturn", "value"}),
        ("c_nvmlGpmSupport_t", {"version", "isSupportedDevice"}),
        ("c_nvmlMemory_t", {"total", "free", "used"}),
        ("c_nvmlMemory_v2_t", {"version", "total", "reserved", "free", "used"}),
        ("c_nvmlTemperature_v1_t", {"version", "sensorType", "temperature"}),
        ("c_nvmlUtilization_t", {"gpu", "memory"}),
        ("c_nvmlProcessInfo_v2_t", {"pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"}),
        ("c_nvmlProcessUtilizationSample_t", {"pid", "timeStamp", "smUtil", "memUtil"}),
        ("c_nvmlEventData_t", {"device", "eventType", "eventData", "gpuInstanceId"}),
        ("nvmlPciInfo_t", {"busId", "busIdLegacy"}),
    ],
)
def test_structs_have_the_fields_agent_and_fake_use(struct: str, fields: set[str]) -> None:
    declared = {name for name, *_ in getattr(pynvml, struct)._fields_}
    assert fields <= declared, f"{struct} lost {fields - declared}"


def test_handles_and_samples_are_opaque_pointers() -> None:
    for name in ("c_nvmlDevice_t", "c_nvmlEventSet_t", "c_nvmlGpmSample_t"):
        assert issubclass(getattr(pynvml, name), ctypes._Pointer), name
    assert pynvml.c_nvmlProcessInfo_v3_t is pynvml.c_nvmlProcessInfo_v2_t


def test_constants_the_agent_uses() -> None:
    expected = {
        "NVML_FI_DEV_POWER_INSTANT": 186,
        "NVML_FI_DEV_ENERGY": 191,
        "NVML_FI_DEV_MEMORY_TEMP": 82,
        "NVML_FI_DEV_ECC_SBE_VOL_TOTAL": 3,
        "NVML_FI_DEV_ECC_DBE_VOL_TOTAL": 4,
        "NVML_FI_DEV_REMAPPED_COR": 142,
        "NVML_FI_DEV_REMAPPED_UNC": 143,
        "NVML_FI_DEV_REMAPPED_PENDING": 144,
        "NVML_GPM_METRIC_SM_UTIL": 2,
        "NVML_GPM_METRIC_SM_OCCUPANCY": 3,
        "NVML_GPM_METRIC_ANY_TENSOR_UTIL": 5,
        "NVML_GPM_METRIC_DRAM_BW_UTIL": 10,
        "NVML_GPM_METRICS_GET_VERSION": 1,
        "NVML_GPM_SUPPORT_VERSION": 1,
        "NVML_DEVICE_ARCH_AMPERE": 7,
        "NVML_DEVICE_ARCH_HOPPER": 9,
        "nvmlEventTypeXidCriticalError": 0x8,
        "NVML_POWER_SCOPE_GPU": 0,
        "NVML_DEVICE_MIG_ENABLE": 1,
    }
    assert {name: getattr(pynvml, name, None) for name in expected} == expected


def test_wrappers_the_agent_calls_exist() -> None:
    used = {name for path in _NVML_MODULES for name in re.findall(r"pynvml\.(\w+)", _text(path))}
    assert "nvmlGpmMetricsGet" in used  # the scan sees the modules
    missing = sorted(name for name in used if not hasattr(pynvml, name))
    assert not missing


def test_only_agent_nvml_modules_import_pynvml() -> None:
    importers = {
        str(path.relative_to(REPO))
        for package in ("agent", "collector", "gpufleet")
        for path in (REPO / package).rglob("*.py")
        if re.search(r"^\s*(import|from) pynvml\b", _text(path), re.MULTILINE)
    }
    assert importers == {str(path.relative_to(REPO)) for path in _NVML_MODULES} - {
        "agent/sources/nvml/worker.py"
    }


def test_the_module_is_nvidia_ml_pys() -> None:
    files = metadata.distribution("nvidia-ml-py").files or []
    assert any(str(f) == "pynvml.py" for f in files)
    assert pynvml.__file__.endswith("pynvml.py")


def _snake(camel: str) -> str:
    return "".join(f"_{c}" if c.isupper() else c.upper() for c in camel).lstrip("_")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")
