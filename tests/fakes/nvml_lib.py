"""A fake NVML C library for the real nvidia-ml-py binding (``pynvml``).

``install_fake_nvml(scenario)`` puts a FakeNvml behind ``pynvml.nvmlLib``: the binding's
own wrappers, structs, error classes and version fallbacks then run unchanged, and only
the C symbols are ours. A symbol listed in the scenario's ``missing_symbols`` does not
exist, so the binding raises NVMLError_FunctionNotFound as with an old driver.

Time comes from an injectable clock (FakeClock in tests): the energy counter grows by
power x elapsed time and GPM metrics average over the time between two samples.

Outside the tests package (e.g. bench/), with the repository root on sys.path::

    from tests.fakes.nvml_lib import install_fake_nvml, load_scenario
    with install_fake_nvml(load_scenario("h100_sxm_8x_gpm")) as fake:
        source = NvmlSource(SourceSettings())
        source.read(time.time())
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pynvml

from tests.fakes.nvml_board_symbols import BoardSymbols
from tests.fakes.nvml_gpm_symbols import GPM_METRICS, GPM_TRAFFIC, EventSymbols, GpmSymbols
from tests.fakes.nvml_peer_symbols import PeerSymbols
from tests.fakes.nvml_reading_symbols import ReadingSymbols
from tests.fakes.nvml_scenario import GpmSpec, GpuSpec, MigSpec, Scenario, load_scenario
from tests.fakes.nvml_symbols import (
    MIG_HANDLE_SYMBOLS,
    Fail,
    IdentitySymbols,
    SystemSymbols,
    address_of,
    scalar,
)

HANDLE_BASE = 0x7F0000000000
#: symbols that take no initialised library
_NO_INIT = frozenset({"nvmlInitWithFlags", "nvmlInit_v2", "nvmlErrorString"})


class FakeClock:
    """A monotonic clock that moves only when told to (or when a caller sleeps on it).

    ``sleep(s)`` moves the clock to ``s`` after the last time this thread read it, so
    threads sleeping in parallel move it once, not once each.
    """

    def __init__(self, start_seconds: float = 1000.0) -> None:
        self._now = start_seconds
        self._lock = threading.Lock()
        self._last_read = threading.local()

    def __call__(self) -> float:
        with self._lock:
            self._last_read.value = self._now
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        with self._lock:
            since = getattr(self._last_read, "value", self._now)
            self._now = max(self._now, since + seconds)


class Integral:
    """A piecewise-constant value and its running time integral (value x seconds)."""

    def __init__(self, value: float, start: float, total: float = 0.0) -> None:
        self.value, self._since, self._total = value, start, total

    def total(self, now: float) -> float:
        return self._total + self.value * (now - self._since)

    def set(self, value: float, now: float) -> None:
        self._total, self._since, self.value = self.total(now), now, value

    def restart(self, now: float) -> None:
        """The integral starts again from 0 (a counter reset at a driver reload)."""
        self._total, self._since = 0.0, now


class FakeGpu:
    """Run-time state of one fake GPU (its spec plus what changes)."""

    def __init__(self, index: int, spec: GpuSpec, now: float) -> None:
        self.index, self.spec = index, spec
        self.power = Integral(spec.power_milliwatts, now, spec.energy_start_millijoules)
        self.lost = False
        self.inits_since_lost = 0
        self.reads = 0
        self.wedge_seconds = 0.0
        self.unsupported_fields = _constants(spec.not_supported, "NVML_FI_")
        self.unsupported_gpm = _constants(spec.not_supported, "NVML_GPM_METRIC_")
        #: traffic in MiB/s and its integral (MiB), per GpuSpec field name
        self.traffic = {name: Integral(getattr(spec, name), now) for name in GPM_TRAFFIC.values()}
        self.gpm_counters: dict[int | None, dict[int, Integral]] = {
            # traffic is the physical GPU's: a MIG instance's GPM does not answer it
            None: {
                **_gpm_counters(spec.gpm, now),
                **{metric: self.traffic[name] for metric, name in GPM_TRAFFIC.items()},
            },
            **{m.gpu_instance_id: _gpm_counters(m.gpm or spec.gpm, now) for m in spec.mig},
        }

    @property
    def power_milliwatts(self) -> int:
        return int(self.power.value)

    def energy_millijoules(self, now: float) -> int:
        return int(self.power.total(now))


class FakeNvml(
    SystemSymbols,
    IdentitySymbols,
    ReadingSymbols,
    BoardSymbols,
    GpmSymbols,
    EventSymbols,
    PeerSymbols,
):
    """The fake library's state, the test's controls, and (through the mixins) its symbols."""

    def __init__(self, scenario: Scenario, clock: Callable[[], float] = time.monotonic) -> None:
        self.scenario, self.clock = scenario, clock
        now = clock()
        self.gpus = [FakeGpu(i, spec, now) for i, spec in enumerate(scenario.gpus)]
        self.generation = 0
        self.refcount = 0
        self.init_calls = self.shutdown_calls = 0
        self.calls: Counter[str] = Counter()
        self.device_calls: Counter[tuple[str, str]] = Counter()
        self.stale_handle_calls: list[str] = []
        #: (GPU uuid, field ids asked) per nvmlDeviceGetFieldValues call
        self.field_requests: list[tuple[str, tuple[int, ...]]] = []
        #: metric ids asked per nvmlGpmMetricsGet call
        self.gpm_metric_requests: list[tuple[int, ...]] = []
        #: what nvmlInit answers (a test sets e.g. NVML_ERROR_DRIVER_NOT_LOADED)
        self.init_result = pynvml.NVML_SUCCESS
        self.gpm_samples: dict[int, Any] = {}
        self.gpm_sample_times: dict[tuple[int, int | None], list[float]] = {}
        self.event_sets: dict[int, tuple[list[tuple[int, int]], set[int]]] = {}
        self._next_gpm_sample = self._next_event_set = 0
        self._lock = threading.RLock()
        self.library = _Library(self)

    # -- controls for tests ----------------------------------------------------------

    def gpu(self, uuid: str) -> FakeGpu:
        return next(gpu for gpu in self.gpus if gpu.spec.uuid == uuid)

    def set_power(self, uuid: str, milliwatts: int) -> None:
        with self._lock:
            self.gpu(uuid).power.set(milliwatts, self.clock())

    def set_gpm(self, uuid: str, instance_id: int | None = None, **percents: float) -> None:
        """Change GPM metric values (GpmSpec field names) from now on."""
        by_name = {name: metric_id for metric_id, name in GPM_METRICS.items()}
        with self._lock:
            counters = self.gpu(uuid).gpm_counters[instance_id]
            for name, percent in percents.items():
                counters[by_name[name]].set(percent, self.clock())

    def set_traffic(self, uuid: str, **mib_per_second: float) -> None:
        """Change PCIe/NVLink traffic (GpuSpec ``*_mib_per_second`` names) from now on."""
        with self._lock:
            gpu = self.gpu(uuid)
            for name, rate in mib_per_second.items():
                gpu.traffic[name].set(rate, self.clock())

    def reset_traffic_counters(self, uuid: str) -> None:
        """The byte counters start again from 0, as after a driver reload."""
        with self._lock:
            for integral in self.gpu(uuid).traffic.values():
                integral.restart(self.clock())

    def emit_xid(self, uuid: str, xid: int) -> None:
        with self._lock:
            gpu = self.gpu(uuid)
            for pending, devices in self.event_sets.values():
                if gpu.index in devices:
                    pending.append((gpu.index, xid))

    def wedge(self, uuid: str, seconds: float) -> None:
        """The GPU's next call blocks its caller for ``seconds`` of real time."""
        self.gpu(uuid).wedge_seconds = seconds

    def lose(self, uuid: str) -> None:
        with self._lock:
            gpu = self.gpu(uuid)
            gpu.lost, gpu.inits_since_lost = True, 0

    def recover(self, uuid: str) -> None:
        self.gpu(uuid).lost = False

    # -- plumbing used by the symbols -------------------------------------------------

    def call(self, name: str, implementation: Callable[..., int], args: tuple[Any, ...]) -> Any:
        with self._lock:
            self.calls[name] += 1
            gpu = self._wedged_gpu(name, args)
        if gpu is not None:
            seconds, gpu.wedge_seconds = gpu.wedge_seconds, 0.0
            time.sleep(seconds)  # outside the lock: only this caller is stuck
        with self._lock:
            if name not in _NO_INIT and self.refcount == 0:
                return pynvml.NVML_ERROR_UNINITIALIZED
            try:
                return implementation(*args)
            except Fail as failure:
                return failure.code

    def _wedged_gpu(self, name: str, args: tuple[Any, ...]) -> FakeGpu | None:
        if not args or not isinstance(args[0], pynvml.c_nvmlDevice_t):
            return None
        decoded = _decode(address_of(args[0]))
        if decoded is None or decoded[1] >= len(self.gpus):
            return None
        gpu = self.gpus[decoded[1]]
        return gpu if gpu.wedge_seconds > 0 else None

    def _handle(self, gpu_index: int, mig_slot: int | None = None) -> int:
        slot = 0 if mig_slot is None else mig_slot + 1
        return HANDLE_BASE + (self.generation << 24) + ((gpu_index + 1) << 8) + slot

    def _device(self, handle: Any, symbol: str) -> tuple[FakeGpu, MigSpec | None]:
        decoded = _decode(address_of(handle))
        if decoded is None or decoded[1] >= len(self.gpus):
            raise Fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        generation, gpu_index, mig_slot = decoded
        if generation != self.generation:
            self.stale_handle_calls.append(symbol)
            raise Fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[gpu_index]
        mig = gpu.spec.mig[mig_slot] if mig_slot is not None else None
        self.device_calls[(symbol, mig.uuid if mig else gpu.spec.uuid)] += 1
        if symbol == "nvmlDeviceGetFieldValues" and mig is None:
            self._start_read(gpu)
        if gpu.lost:
            raise Fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        if symbol in gpu.spec.not_supported or (mig and symbol not in MIG_HANDLE_SYMBOLS):
            raise Fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu, mig

    def _start_read(self, gpu: FakeGpu) -> None:
        """A field batch starts one agent read: fall off the bus or raise XIDs on cue."""
        gpu.reads += 1
        if gpu.spec.falls_off_bus_at_read == gpu.reads:
            gpu.lost, gpu.inits_since_lost = True, 0
        for xid in gpu.spec.xids:
            if xid.at_read == gpu.reads:
                self.emit_xid(gpu.spec.uuid, xid.xid)

    def _init(self) -> None:
        self.init_calls += 1
        if self.init_result != pynvml.NVML_SUCCESS:
            raise Fail(self.init_result)
        self.refcount += 1
        for gpu in self.gpus:
            if gpu.lost:
                gpu.inits_since_lost += 1
                after = gpu.spec.recovers_after_inits
                gpu.lost = after is None or gpu.inits_since_lost < after

    def _shutdown(self) -> None:
        self.shutdown_calls += 1
        self.refcount -= 1
        if self.refcount == 0:
            self.generation += 1  # every handle of the ended session is now invalid


def _decode(address: int) -> tuple[int, int, int | None] | None:
    offset = address - HANDLE_BASE
    if offset <= 0 or offset >= 1 << 40:
        return None
    slot = offset & 0xFF
    return offset >> 24, ((offset >> 8) & 0xFFFF) - 1, None if slot == 0 else slot - 1


def _constants(names: frozenset[str], prefix: str) -> frozenset[int]:
    unknown = [n for n in names if n.startswith(prefix) and not hasattr(pynvml, n)]
    if unknown:
        raise ValueError(f"not_supported names unknown to the binding: {unknown}")
    return frozenset(getattr(pynvml, n) for n in names if n.startswith(prefix))


def _gpm_counters(gpm: GpmSpec | None, now: float) -> dict[int, Integral]:
    spec = gpm or GpmSpec()
    return {
        metric_id: Integral(getattr(spec, name), now) for metric_id, name in GPM_METRICS.items()
    }


class _Symbol:
    """One C symbol: callable, and accepts attributes such as ``restype`` like ctypes."""

    def __init__(self, fake: FakeNvml, name: str) -> None:
        self._fake, self._name = fake, name
        self._implementation = getattr(fake, name)

    def __call__(self, *args: Any) -> Any:
        return self._fake.call(self._name, self._implementation, args)


class _Library:
    """What the binding sees as ``nvmlLib``: the symbols the scenario's driver has."""

    def __init__(self, fake: FakeNvml) -> None:
        for name in dir(fake):
            if name.startswith("nvml") and name not in fake.scenario.missing_symbols:
                setattr(self, name, _Symbol(fake, name))


@contextlib.contextmanager
def install_fake_nvml(
    scenario: Scenario, clock: Callable[[], float] = time.monotonic
) -> Iterator[FakeNvml]:
    """Serve ``scenario`` to pynvml until the block ends, then restore the binding."""
    fake = FakeNvml(scenario, clock)
    saved = (pynvml.nvmlLib, dict(pynvml._nvmlGetFunctionPointer_cache), pynvml._nvmlLib_refcount)
    with pynvml.libLoadLock:
        pynvml.nvmlLib = fake.library
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    try:
        yield fake
    finally:
        with pynvml.libLoadLock:
            pynvml.nvmlLib = saved[0]
            pynvml._nvmlGetFunctionPointer_cache.clear()
            pynvml._nvmlGetFunctionPointer_cache.update(saved[1])
            pynvml._nvmlLib_refcount = saved[2]


__all__ = ["FakeClock", "FakeGpu", "FakeNvml", "install_fake_nvml", "load_scenario", "scalar"]
