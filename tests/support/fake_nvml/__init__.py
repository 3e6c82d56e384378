"""A fake NVML (libnvidia-ml.so.1) for tests, built with gcc from fake_nvml.c.

The checker loads it through its documented override
(SCALABLE_DISTRIBUTED_NVML=/path/libnvidia-ml.so.1) or LD_LIBRARY_PATH, so its
real ctypes code runs; the answers come from a key=value file named by
FAKE_NVML_CONFIG (keys are listed at the top of fake_nvml.c); FAKE_NVML_MODE
makes it fail the way broken drivers do (segv-init, hang-init, spin-constructor).
Nothing here is shipped in the skill.
"""

import os
import shutil
import subprocess

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nvml.c")
SONAME = "libnvidia-ml.so.1"

# NVML return codes (nvml.h) the tests make the fake return.
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

# GPUs as NVML names them, with their compute capability and memory.
V100 = {"name": "Tesla V100-SXM2-32GB", "capability": "7.0", "memory_total": 34359738368}
P100 = {"name": "Tesla P100-PCIE-16GB", "capability": "6.0", "memory_total": 17179869184}
H100 = {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_total": 85520809984}
L4 = {"name": "NVIDIA L4", "capability": "8.9", "memory_total": 24152899584}

# Driver branches: (driver version, CUDA version NVML reports as 1000*major + 10*minor).
DRIVER_580 = ("580.95.05", 13000)   # CUDA 13.0
DRIVER_570 = ("570.172.08", 12080)  # CUDA 12.8: one CUDA major behind a cu130 torch
DRIVER_550 = ("550.163.01", 12040)  # CUDA 12.4


def build(directory):
    """Compile the fake into ``directory``/libnvidia-ml.so.1 and return its path."""
    if shutil.which("gcc") is None:
        raise RuntimeError("tests/support/fake_nvml needs gcc")
    os.makedirs(directory, exist_ok=True)
    library = os.path.join(directory, SONAME)
    done = subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", library, "-Wl,-soname," + SONAME, SOURCE],
                          capture_output=True, text=True, env=dict(os.environ, TMPDIR=directory))
    if done.returncode != 0:
        raise RuntimeError("gcc failed building the fake NVML:\n" + done.stderr)
    return library


def uuid(index, prefix="GPU"):
    """A well-formed, distinct UUID per device index."""
    return "%s-%08x-1111-2222-3333-%012x" % (prefix, 0x5eed0000 + index, index)


def host_config(gpu=H100, count=4, driver=DRIVER_580, **extra):
    """Config lines for ``count`` identical GPUs behind ``driver``; ``extra`` adds raw keys."""
    lines = {"driver_version": driver[0], "cuda_driver_version": driver[1], "device_count": count}
    for index in range(count):
        for key, value in gpu.items():
            lines["device.%d.%s" % (index, key)] = value
        lines["device.%d.uuid" % index] = uuid(index)
    lines.update(extra)
    return lines


def escape_text(text):
    """A config value holding any bytes: %XX for '%', controls, '=' and everything outside printable ASCII."""
    out = []
    for byte in text.encode("utf-8"):
        out.append(chr(byte) if 0x20 < byte < 0x7f and chr(byte) not in "%=" else "%%%02x" % byte)
    return "".join(out)


def write_config(path, lines):
    with open(path, "w") as handle:
        for key, value in lines.items():
            handle.write("%s=%s\n" % (key, value))
    return path
