"""A small GPU load generator that needs nothing but the NVIDIA driver: libcuda through ctypes.

``CudaLoad`` creates one context on one GPU, loads a PTX busy-loop kernel (spins on
``%clock64`` for a number of cycles) with cuModuleLoadData, and runs, on a thread of its
own, either kernel launches that keep every SM busy or host<->device copies from pinned
memory that keep PCIe busy. ``close`` stops the thread, frees the memory and destroys the
context, so the GPU is left as it was found (no persistence mode, no clock changes: this
module sets neither).

This is device-check's lowest layer (gpufleet/cli/device_check.py); it runs only on a
machine with a GPU, and tests replace it with a fake that raises the fake GPU's activity.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

#: spin until %clock64 has advanced ``cycles`` (one thread per lane, every lane spinning)
SPIN_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 cycles)
{
    .reg .u64 %rd<4>;
    .reg .pred %p;
    ld.param.u64 %rd1, [cycles];
    mov.u64 %rd2, %clock64;
LOOP:
    mov.u64 %rd3, %clock64;
    sub.u64 %rd3, %rd3, %rd2;
    setp.lt.u64 %p, %rd3, %rd1;
    @%p bra LOOP;
    ret;
}
\x00"""
#: ~0.1 s per launch at 2 GHz: short enough to stop promptly
SPIN_CYCLES = 200_000_000
BLOCKS, THREADS_PER_BLOCK = 1024, 256
COPY_BYTES = 256 * 1024 * 1024


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the CUresult."""


class CudaLoad:
    """Compute or PCIe load on GPU ``device_index`` (CUDA's ordinal, which follows
    CUDA_VISIBLE_DEVICES; device-check sets CUDA_DEVICE_ORDER=PCI_BUS_ID so it is NVML's)."""

    def __init__(self, device_index: int = 0, library: str = "libcuda.so.1") -> None:
        self._cuda: Any = ctypes.CDLL(library)
        self._call("cuInit", ctypes.c_uint(0))
        device = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(device_index))
        self._context = ctypes.c_void_p()
        self._call("cuCtxCreate_v2", ctypes.byref(self._context), ctypes.c_uint(0), device)
        self._module = ctypes.c_void_p()
        self._call("cuModuleLoadData", ctypes.byref(self._module), ctypes.c_char_p(SPIN_PTX))
        self._kernel = ctypes.c_void_p()
        self._call("cuModuleGetFunction", ctypes.byref(self._kernel), self._module, b"spin")
        self._device_buffer = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(self._device_buffer), ctypes.c_size_t(COPY_BYTES))
        self._host_buffer = ctypes.c_void_p()
        self._call(
            "cuMemAllocHost_v2", ctypes.byref(self._host_buffer), ctypes.c_size_t(COPY_BYTES)
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def compute(self) -> None:
        """Keep every SM spinning until ``idle``."""
        self._run(self._spin_once)

    def copy(self) -> None:
        """Copy 256 MiB host->device and back, over and over, until ``idle``."""
        self._run(self._copy_once)

    def idle(self) -> None:
        """Stop the load and wait for the GPU to finish what was launched."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self._call("cuCtxSynchronize")

    def close(self) -> None:
        """Stop, free the buffers, destroy the context (the GPU as it was found)."""
        self.idle()
        self._call("cuMemFreeHost", self._host_buffer)
        self._call("cuMemFree_v2", self._device_buffer)
        self._call("cuModuleUnload", self._module)
        self._call("cuCtxDestroy_v2", self._context)

    def _run(self, step: Any) -> None:
        self.idle()
        self._stop.clear()
        context = self._context

        def loop() -> None:
            self._call("cuCtxSetCurrent", context)  # a context is current per thread
            while not self._stop.is_set():
                step()
            self._call("cuCtxSynchronize")

        self._thread = threading.Thread(target=loop, name="cuda-load", daemon=True)
        self._thread.start()

    def _spin_once(self) -> None:
        cycles = ctypes.c_uint64(SPIN_CYCLES)
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(cycles), ctypes.c_void_p))
        grid, block = ctypes.c_uint(BLOCKS), ctypes.c_uint(THREADS_PER_BLOCK)
        one = ctypes.c_uint(1)
        self._call(
            "cuLaunchKernel", self._kernel, grid, one, one, block, one, one,
            ctypes.c_uint(0), None, params, None,
        )  # fmt: skip
        self._call("cuCtxSynchronize")

    def _copy_once(self) -> None:
        size = ctypes.c_size_t(COPY_BYTES)
        self._call("cuMemcpyHtoD_v2", self._device_buffer, self._host_buffer, size)
        self._call("cuMemcpyDtoH_v2", self._host_buffer, self._device_buffer, size)

    def _call(self, name: str, *args: Any) -> None:
        result = getattr(self._cuda, name)(*args)
        if result != 0:
            raise CudaError(f"{name} failed: CUresult {result}")
