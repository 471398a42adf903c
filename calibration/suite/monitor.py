"""Power, temperature and clock readings of this rank's GPU (NVML or amdsmi), sampled in a thread.

NVIDIA, through nvidia-ml-py (``import pynvml``; NVML API Reference Guide, "Device Queries"):

=====================  ==============================================================  ==========
sample field           NVML call                                                       unit
=====================  ==============================================================  ==========
power_w                nvmlDeviceGetPowerUsage (mW; on recent GPUs a ~1 s average)     W
temp_c                 nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)                  degC
mem_temp_c             nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP), HBM GPUs     degC
sm_clock_mhz           nvmlDeviceGetClockInfo(NVML_CLOCK_SM)                           MHz
clock_event_reasons    nvmlDeviceGetCurrentClocksEventReasons (the former              bitmask
                       ...ThrottleReasons: 0x4 SW power cap, 0x20 SW thermal, 0x40 HW
                       thermal slowdown, 0x80 HW power brake; nvml.h
                       ``nvmlClocksEventReason*``)
util_gpu_pct,          nvmlDeviceGetUtilizationRates .gpu / .memory                    %
util_mem_pct
power_limit_w          nvmlDeviceGetEnforcedPowerLimit (mW)                            W
power_instant_w        NVML_FI_DEV_POWER_INSTANT (extra field; newer drivers)          W
=====================  ==============================================================  ==========

Power limits: nvmlDeviceGetPowerManagementLimitConstraints (min, max), ...DefaultLimit, and
nvmlDeviceSetPowerManagementLimit (root only: NVML_ERROR_NO_PERMISSION otherwise).

AMD, through amdsmi (AMD SMI Python API reference): amdsmi_get_power_info (W),
amdsmi_get_temp_metric (EDGE, else HOTSPOT; VRAM for memory), amdsmi_get_clock_info(GFX),
amdsmi_get_gpu_activity, amdsmi_get_power_cap_info (uW); no clock-event reasons (null).

A reading the GPU does not support is null; a monitor that cannot start says why
(:attr:`Monitor.why_not`) and the suite writes that as a note.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time

SAMPLE_FIELDS = ("power_w", "temp_c", "mem_temp_c", "sm_clock_mhz", "clock_event_reasons", "util_gpu_pct",
                 "util_mem_pct", "power_limit_w")


def _s(v):
    return v.decode() if isinstance(v, bytes) else (str(v) if v is not None else None)


def gpu_id(uuid) -> str | None:
    """Serial-free GPU id: the first 16 hex digits of SHA-256 of the UUID string (None if no UUID)."""
    if not uuid:
        return None
    return hashlib.sha256(str(uuid).encode()).hexdigest()[:16]


class Monitor:
    """No monitor: every reading None.  Base class of :class:`NvmlMonitor` / :class:`AmdSmiMonitor`.

    Attributes:
        kind: ``"nvml"``, ``"amdsmi"`` or None.
        why_not: why there is no monitor (None when there is one).
        slot: local GPU index (NVML / amdsmi index), name, uuid, pci_bus_id, driver_version.
    """

    kind = None

    def __init__(self, why_not: str = "no GPU"):
        self.why_not = why_not
        self.slot = self.name = self.uuid = self.pci_bus_id = self.driver_version = None

    def read(self) -> dict:
        """One sample: the fields of :data:`SAMPLE_FIELDS` (None where unsupported) + extras."""
        return {f: None for f in SAMPLE_FIELDS}

    def power_limit_w(self):
        """Enforced power limit in W, or None."""
        return None

    def power_limit_range_w(self):
        """[min, max] settable power limit in W, or None."""
        return None

    def default_power_limit_w(self):
        """Default (board) power limit in W, or None."""
        return None

    def set_power_limit_w(self, watts: float):
        """Set the power limit.  Raises PermissionError (not root) or NotImplementedError."""
        raise NotImplementedError(f"cannot set power limits: {self.why_not or 'unsupported'}")

    def close(self):
        """Release the library handle."""


class NvmlMonitor(Monitor):
    """NVML readings of one NVIDIA GPU (module docstring).

    Args:
        nvml: the imported ``pynvml`` module, already ``nvmlInit``-ed.
        handle: the device handle.
    """

    kind = "nvml"

    def __init__(self, nvml, handle):
        super().__init__(None)
        self.nv, self.h = nvml, handle
        self._off: set[str] = set()  # readings that raised NotSupported once
        self.slot = self._get("index", lambda: nvml.nvmlDeviceGetIndex(handle))
        self.name = _s(self._get("name", lambda: nvml.nvmlDeviceGetName(handle)))
        self.uuid = _s(self._get("uuid", lambda: nvml.nvmlDeviceGetUUID(handle)))
        pci = self._get("pci", lambda: nvml.nvmlDeviceGetPciInfo(handle))
        self.pci_bus_id = _s(getattr(pci, "busId", None)) if pci is not None else None
        self.driver_version = _s(self._get("driver", nvml.nvmlSystemGetDriverVersion))
        self._reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        self._fields = [getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", 82), getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", 186)]

    def _get(self, key, fn):
        if key in self._off:
            return None
        try:
            return fn()
        except self.nv.NVMLError as e:
            if isinstance(e, getattr(self.nv, "NVMLError_NotSupported", ())):
                self._off.add(key)
            return None
        except Exception:  # noqa: BLE001 - a missing binding in an old pynvml
            self._off.add(key)
            return None

    def _field_values(self):
        vals = self._get("fields", lambda: self.nv.nvmlDeviceGetFieldValues(self.h, self._fields))
        out = [None, None]
        if vals is None:
            return out
        members = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
        for i, v in enumerate(vals):
            if getattr(v, "nvmlReturn", 1) == 0:
                out[i] = getattr(v.value, members.get(v.valueType, "uiVal"), None)
        return out

    def read(self) -> dict:
        nv, h = self.nv, self.h
        mem_temp, p_inst = self._field_values()
        p = self._get("power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        util = self._get("util", lambda: nv.nvmlDeviceGetUtilizationRates(h))
        lim = self.power_limit_w()
        return dict(power_w=p / 1000.0 if p is not None else None,
                    temp_c=self._get("temp", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                    mem_temp_c=mem_temp or None,  # 0 = sensor absent on GDDR boards
                    sm_clock_mhz=self._get("sm", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                    clock_event_reasons=self._get("reasons", lambda: self._reasons(h)) if self._reasons else None,
                    util_gpu_pct=getattr(util, "gpu", None), util_mem_pct=getattr(util, "memory", None),
                    power_limit_w=lim, power_instant_w=p_inst / 1000.0 if p_inst else None)

    def power_limit_w(self):
        v = self._get("limit", lambda: self.nv.nvmlDeviceGetEnforcedPowerLimit(self.h))
        return v / 1000.0 if v is not None else None

    def power_limit_range_w(self):
        v = self._get("limits", lambda: self.nv.nvmlDeviceGetPowerManagementLimitConstraints(self.h))
        return [v[0] / 1000.0, v[1] / 1000.0] if v else None

    def default_power_limit_w(self):
        v = self._get("default_limit", lambda: self.nv.nvmlDeviceGetPowerManagementDefaultLimit(self.h))
        return v / 1000.0 if v is not None else None

    def set_power_limit_w(self, watts: float):
        try:
            self.nv.nvmlDeviceSetPowerManagementLimit(self.h, int(round(watts * 1000)))
        except self.nv.NVMLError as e:
            if isinstance(e, getattr(self.nv, "NVMLError_NoPermission", ())):
                raise PermissionError(f"nvmlDeviceSetPowerManagementLimit: {e} (needs root)") from None
            raise RuntimeError(f"nvmlDeviceSetPowerManagementLimit({watts:.0f} W): {e}") from None

    def close(self):
        try:
            self.nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


class AmdSmiMonitor(Monitor):
    """amdsmi readings of one AMD GPU (module docstring); untested without AMD hardware, every
    reading guarded (None on any error)."""

    kind = "amdsmi"

    def __init__(self, amdsmi, handle, index):
        super().__init__(None)
        self.a, self.h, self.slot = amdsmi, handle, index
        asic = self._get(lambda: amdsmi.amdsmi_get_gpu_asic_info(handle)) or {}
        self.name = asic.get("market_name")
        self.uuid = self._get(lambda: amdsmi.amdsmi_get_gpu_device_uuid(handle))
        self.pci_bus_id = self._get(lambda: amdsmi.amdsmi_get_gpu_device_bdf(handle))
        drv = self._get(lambda: amdsmi.amdsmi_get_gpu_driver_info(handle)) or {}
        self.driver_version = drv.get("driver_version")

    def _get(self, fn):
        try:
            return fn()
        except Exception:  # noqa: BLE001
            return None

    @staticmethod
    def _num(v):
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def _temp(self, *types):
        a = self.a
        for t in types:
            v = self._num(self._get(lambda: a.amdsmi_get_temp_metric(
                self.h, getattr(a.AmdSmiTemperatureType, t), a.AmdSmiTemperatureMetric.CURRENT)))
            if v is not None:
                return v
        return None

    def read(self) -> dict:
        a, h = self.a, self.h
        pw = self._get(lambda: a.amdsmi_get_power_info(h)) or {}
        power = self._num(pw.get("current_socket_power"))
        if power is None:
            power = self._num(pw.get("average_socket_power"))
        clk = self._get(lambda: a.amdsmi_get_clock_info(h, a.AmdSmiClkType.GFX)) or {}
        act = self._get(lambda: a.amdsmi_get_gpu_activity(h)) or {}
        return dict(power_w=power, temp_c=self._temp("EDGE", "HOTSPOT"), mem_temp_c=self._temp("VRAM"),
                    sm_clock_mhz=self._num(clk.get("clk", clk.get("cur_clk"))), clock_event_reasons=None,
                    util_gpu_pct=self._num(act.get("gfx_activity")), util_mem_pct=self._num(act.get("umc_activity")),
                    power_limit_w=self.power_limit_w())

    def _cap(self, key):
        info = self._get(lambda: self.a.amdsmi_get_power_cap_info(self.h)) or {}
        v = self._num(info.get(key))
        return v / 1e6 if v is not None else None  # microwatts

    def power_limit_w(self):
        return self._cap("power_cap")

    def power_limit_range_w(self):
        lo, hi = self._cap("min_power_cap"), self._cap("max_power_cap")
        return [lo, hi] if lo is not None and hi is not None else None

    def default_power_limit_w(self):
        return self._cap("default_power_cap")

    def set_power_limit_w(self, watts: float):
        try:
            self.a.amdsmi_set_power_cap(self.h, 0, int(round(watts * 1e6)))
        except Exception as e:  # noqa: BLE001
            if "PERMISSION" in str(e).upper() or "NO_PERM" in str(e).upper():
                raise PermissionError(f"amdsmi_set_power_cap: {e} (needs root)") from None
            raise RuntimeError(f"amdsmi_set_power_cap({watts:.0f} W): {e}") from None

    def close(self):
        try:
            self.a.amdsmi_shut_down()
        except Exception:  # noqa: BLE001
            pass


def _torch_ids(device):
    """(uuid string, PCI bus id 'dddddddd:bb:dd.0') of a torch CUDA device, None where unknown."""
    import torch
    p = torch.cuda.get_device_properties(device)
    uuid = getattr(p, "uuid", None)
    uuid = str(uuid) if uuid is not None else None
    bus = getattr(p, "pci_bus_id", None)
    pci = None
    if bus is not None:
        pci = f"{getattr(p, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"
    return uuid, pci


def _visible_index(idx: int, var: str) -> int | None:
    """Physical index of visible device ``idx`` under ``var`` (CUDA_VISIBLE_DEVICES...), None if it
    names devices by UUID."""
    vis = os.environ.get(var)
    if not vis:
        return idx
    items = [x.strip() for x in vis.split(",") if x.strip()]
    try:
        return int(items[idx])
    except (ValueError, IndexError):
        return None


def open_monitor(device) -> Monitor:
    """The monitor of ``device`` (torch device): NVML on NVIDIA, amdsmi on AMD, else a null one.

    The NVML device is found by UUID (torch's device properties), else PCI bus id, else the
    CUDA_VISIBLE_DEVICES index.  Never raises: failures give a :class:`Monitor` with ``why_not``.
    """
    if device.type != "cuda":
        return Monitor("no GPU (CPU run), so no NVML or amdsmi")
    import torch
    if torch.version.hip:
        return _open_amdsmi(device)
    try:
        import pynvml as nv
    except ImportError:
        return Monitor("pynvml is not installed (pip install nvidia-ml-py)")
    try:
        nv.nvmlInit()
    except Exception as e:  # noqa: BLE001
        return Monitor(f"nvmlInit failed: {e}")
    uuid, pci = _torch_ids(device)
    tries = []
    if uuid:
        tries.append(lambda: nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid))
    if pci:
        tries.append(lambda: nv.nvmlDeviceGetHandleByPciBusId(pci))
    phys = _visible_index(device.index, "CUDA_VISIBLE_DEVICES")
    if phys is not None:
        tries.append(lambda: nv.nvmlDeviceGetHandleByIndex(phys))
    for t in tries:
        try:
            return NvmlMonitor(nv, t())
        except Exception:  # noqa: BLE001
            continue
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001
        pass
    return Monitor(f"NVML has no device matching torch's {device} (uuid {uuid}, pci {pci})")


def _open_amdsmi(device) -> Monitor:
    try:
        import amdsmi
    except ImportError:
        return Monitor("amdsmi is not importable (ROCm's AMD SMI Python package)")
    try:
        amdsmi.amdsmi_init()
        handles = amdsmi.amdsmi_get_processor_handles()
    except Exception as e:  # noqa: BLE001
        return Monitor(f"amdsmi_init failed: {e}")
    _, pci = _torch_ids(device)
    if pci:
        for i, h in enumerate(handles):
            try:
                if str(amdsmi.amdsmi_get_gpu_device_bdf(h)).lower().endswith(pci.lower()[-7:]):
                    return AmdSmiMonitor(amdsmi, h, i)
            except Exception:  # noqa: BLE001
                continue
    phys = _visible_index(device.index, "HIP_VISIBLE_DEVICES")
    phys = _visible_index(phys, "ROCR_VISIBLE_DEVICES") if phys is not None else None
    if phys is not None and phys < len(handles):
        return AmdSmiMonitor(amdsmi, handles[phys], phys)
    return Monitor(f"amdsmi has no device matching torch's {device}")


class Sampler:
    """Background thread reading ``monitor`` every 1/hz s into a list of sample dicts.

    Args:
        monitor: :class:`Monitor`; hz: samples per second (> 0).
    Attributes:
        samples: dicts with ``t_unix`` (time of the reading, Unix s) and the :data:`SAMPLE_FIELDS`.
    """

    def __init__(self, monitor: Monitor, hz: float):
        self.monitor, self.period = monitor, 1.0 / float(hz)
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="calibration-sampler", daemon=True)

    def start(self):
        """Start sampling (no-op for a null monitor)."""
        if self.monitor.kind is not None:
            self._thread.start()
        return self

    def _loop(self):
        nxt = time.monotonic()
        while not self._stop.is_set():
            t = time.time()
            try:
                s = self.monitor.read()
            except Exception:  # noqa: BLE001 - a driver hiccup must not stop sampling
                s = None
            if s is not None:
                s["t_unix"] = t
                self.samples.append(s)
            nxt += self.period
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> list[dict]:
        """Stop the thread and return the samples."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return self.samples

    def write(self, rec, slot):
        """Append every sample to ``rec`` as ``sample`` records of GPU ``slot``."""
        for s in self.samples:
            rec.add("sample", slot=slot, **s)
