"""The GPU half of the checker, without a GPU: a fake NVML and a real CUDA build of torch.

The fake libnvidia-ml.so.1 (tests/support/fake_nvml) answers NVML's calls from a
config file, so the checker's real ctypes code runs against it. The torch
side is real: a venv with torch 2.14.1+cu130 (no driver here), pointed at
with --python; its facts (CUDA version, arch list, NCCL, cuDNN) come from
the build itself. Tests needing that venv skip when it is absent, except
under CI=true, where they fail (.ci/run prepares it).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import fake_nvml
from support.docs_text import TROUBLESHOOTING, section_text
from conftest import (CHECKER, CUDA_PYTHON_VARIABLE, ENABLE, DEFAULT_CUDA_PYTHON, ROOT, clean_env,
                      invoke_checker)

DEVICE_CHECK = ROOT / "tests" / "gpu" / "device_check.sh"
EXIT_NO_GPU = 77  # device_check.sh: no nvidia-smi, nothing was checked

OWN_CUDA_VIEW = (
    "import json, torch, torch.cuda.nccl; from torch._C import _cudnn; "
    "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
    "'arch': torch._C._cuda_getArchFlags().split(), 'nccl': list(torch.cuda.nccl.version()), "
    "'cudnn': _cudnn.getVersionInt()}))")


@pytest.fixture(scope="session")
def cuda_python():
    """The interpreter of a real CUDA build of torch, and torch's own view of that build."""
    python = os.environ.get(CUDA_PYTHON_VARIABLE) or DEFAULT_CUDA_PYTHON
    view = None
    if os.access(python, os.X_OK):
        out = subprocess.run([python, "-c", OWN_CUDA_VIEW], capture_output=True, text=True, timeout=300,
                             env=clean_env())
        if out.returncode == 0:
            view = json.loads(out.stdout.strip().splitlines()[-1])
    if view is None or not view["cuda"]:
        message = "no CUDA build of torch at %s; enable: %s" % (python, ENABLE["cuda"])
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    view["python"] = python
    view["release"] = view["version"].split("+")[0]
    return view


@pytest.fixture(scope="session")
def nvml_library(tmp_path_factory):
    return fake_nvml.build(str(tmp_path_factory.mktemp("fake_nvml")))


class FakeHost:
    """Runs the checker on a simulated GPU host: the fake NVML answers from `lines`."""

    def __init__(self, library, directory):
        self.library, self.directory = library, Path(directory)

    def env(self, lines, extra=None, override=True, drop=("CUDA_VISIBLE_DEVICES",)):
        config = fake_nvml.write_config(str(self.directory / ("nvml-%d.cfg" % len(os.listdir(self.directory)))),
                                        lines)
        env = clean_env(dict(extra or {}, FAKE_NVML_CONFIG=config), drop=drop)
        if override:
            env["SCALABLE_DISTRIBUTED_NVML"] = self.library
        else:
            env.pop("SCALABLE_DISTRIBUTED_NVML", None)
        return env

    def run(self, lines, *args, python=None, extra=None, override=True):
        interpreter = ["--python", python] if python else []
        return invoke_checker(*(interpreter + list(args)), env=self.env(lines, extra, override))


@pytest.fixture(scope="module")
def host(nvml_library, tmp_path_factory):
    return FakeHost(nvml_library, tmp_path_factory.mktemp("hosts"))


def gpu_findings(result):
    return [f["id"] for f in result.json["findings"]
            if f["id"].startswith(("cuda-", "nvml-", "gpu-"))]


# ---------------------------------------------------------------------------
# Shared runs of the real CUDA build on simulated hosts
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def h100_host(host, cuda_python):
    """4 x H100 behind a CUDA 13.0 driver: everything torch cu130 needs."""
    return host.run(fake_nvml.host_config(fake_nvml.H100, 4, fake_nvml.DRIVER_580), "--require-cuda", "--full",
                    python=cuda_python["python"])  # --full: replays feed its facts back to the rules


@pytest.fixture(scope="module")
def v100_host(host, cuda_python):
    """4 x V100 (sm_70) under torch cu130, whose kernels start at sm_75."""
    return host.run(fake_nvml.host_config(fake_nvml.V100, 4, fake_nvml.DRIVER_580), "--require-cuda",
                    python=cuda_python["python"])


@pytest.fixture(scope="module")
def old_driver_host(host, cuda_python):
    """4 x H100 behind a 570 driver (CUDA 12.8): one CUDA major behind torch cu130."""
    return host.run(fake_nvml.host_config(fake_nvml.H100, 4, fake_nvml.DRIVER_570), "--require-cuda",
                    python=cuda_python["python"])


def test_facts_come_from_nvml_and_the_real_cuda_build(h100_host, cuda_python):
    cuda = h100_host.json["cuda"]
    # torch's side: exactly what the build says of itself.
    assert cuda["built_with"] == cuda_python["cuda"] == "13.0"
    assert cuda["arch_list"] == cuda_python["arch"]
    assert cuda["nccl_version"] == cuda_python["nccl"]
    assert cuda["cudnn_version"] == cuda_python["cudnn"]
    assert "sm_70" not in cuda["arch_list"] and "sm_90" in cuda["arch_list"]
    # NVML's side: what the fake was told, through the checker's ctypes code.
    nvml = cuda["nvml"]
    assert nvml["available"] is True and nvml["library_override"] is True
    assert (nvml["driver_version"], nvml["cuda_driver_version"]) == ("580.95.05", "13.0")
    assert [d["name"] for d in nvml["devices"]] == ["NVIDIA H100 80GB HBM3"] * 4
    assert [d["uuid"] for d in nvml["devices"]] == [fake_nvml.uuid(i) for i in range(4)]
    assert {d["capability"] for d in nvml["devices"]} == {"9.0"}
    assert {d["memory_total_bytes"] for d in nvml["devices"]} == {fake_nvml.H100["memory_total"]}
    assert {d["mig_mode"] for d in nvml["devices"]} == {None}  # NVML_ERROR_NOT_SUPPORTED
    # torch could really use them, and the checker made no CUDA call to find out.
    assert cuda["available"] is True and cuda["device_count"] == 4 and cuda["blocked_by"] == []
    assert cuda["context_created"] is False
    assert h100_host.returncode == 0 and h100_host.json["gates"]["cuda"] == {"passed": True, "device_count": 4}
    assert gpu_findings(h100_host) == ["gpu-sampling-needs-cugraph"]


def test_override_is_documented_and_ld_library_path_also_works(host, run_checker):
    help_text = run_checker("--help", expect_json=False).stdout
    assert "SCALABLE_DISTRIBUTED_NVML=/path/libnvidia-ml.so.1" in help_text
    # No override: the dynamic loader finds the fake by its soname, as it finds the driver's.
    env = host.env(fake_nvml.host_config(fake_nvml.L4, 2), override=False,
                   extra={"LD_LIBRARY_PATH": os.path.dirname(host.library)})
    nvml = invoke_checker(env=env).json["cuda"]["nvml"]
    assert nvml["library"] == "libnvidia-ml.so.1" and nvml["library_override"] is False
    assert [d["name"] for d in nvml["devices"]] == ["NVIDIA L4", "NVIDIA L4"]


def test_no_driver_on_the_real_cuda_build(cuda_python):
    """This machine as it is: a CUDA torch, no libnvidia-ml: unavailable, and nothing more to say."""
    result = invoke_checker("--python", cuda_python["python"], env=clean_env(drop=("CUDA_VISIBLE_DEVICES",)))
    cuda = result.json["cuda"]
    assert cuda["nvml"]["available"] is False and cuda["nvml"]["reason"] == "library-not-found"
    assert cuda["available"] is False and cuda["blocked_by"] == ["no-nvidia-driver"]
    assert cuda["arch_list"] == cuda_python["arch"]
    assert gpu_findings(result) == ["cuda-unavailable"]


@pytest.mark.finding("cuda-arch-not-compiled")
def test_v100_under_cu130_has_no_kernels(v100_host, cuda_python):
    found = v100_host.only("cuda-arch-not-compiled")
    assert found["severity"] == "error"
    assert [g["capability"] for g in found["evidence"]["gpus"]] == ["7.0"] * 4
    assert found["evidence"]["arch_list"] == cuda_python["arch"]
    assert "no kernel image is available for execution on the device" in found["evidence"]["predicted_error"]
    assert "SM < 7.5" in found["evidence"]["cudnn"]  # cuDNN 9.24 refuses Volta too
    # torch's own table of its builds: only CUDA 12.6 still has sm_70.
    assert found["evidence"]["builds_with_kernels"] == ["cu126"]
    assert found["fix"].startswith("%s -m pip install torch==%s+cu126 --index-url https://download.pytorch.org/whl/cu126"
                                   % (cuda_python["python"], cuda_python["release"]))
    cuda = v100_host.json["cuda"]
    assert cuda["available"] is False and cuda["blocked_by"] == ["cuda-arch-not-compiled"]
    assert v100_host.returncode == 1 and v100_host.json["gates"]["cuda"]["passed"] is False


def test_pascal_is_flagged_and_a_newer_gpu_beside_it_is_not(host, cuda_python):
    """A P100 (6.0) beside an L4 (8.9, served by sm_86 code): only the P100 lacks kernels."""
    lines = fake_nvml.host_config(fake_nvml.P100, 2)
    for key, value in fake_nvml.L4.items():
        lines["device.1.%s" % key] = value
    result = host.run(lines, python=cuda_python["python"])
    found = result.only("cuda-arch-not-compiled")
    assert [(g["index"], g["capability"]) for g in found["evidence"]["gpus"]] == [(0, "6.0")]
    assert found["evidence"]["builds_with_kernels"] == ["cu126"]
    assert result.json["cuda"]["available"] is True  # the L4 is usable
    assert [a["kernels"] for a in result.json["cuda"]["device_archs"]] == [False, True]


@pytest.mark.finding("cuda-driver-too-old")
def test_driver_one_cuda_major_behind(old_driver_host, cuda_python):
    found = old_driver_host.only("cuda-driver-too-old")
    assert found["severity"] == "error"
    evidence = found["evidence"]
    assert (evidence["driver_cuda"], evidence["torch_cuda"]) == ("12.8", "13.0")
    assert evidence["minimum_driver_for_cuda_13"] == ">= 580"
    assert "The NVIDIA driver on your system is too old (found version 12080)" in evidence["predicted_error"]
    # The same release built for CUDA 12.6 runs on this driver and has sm_90 kernels.
    assert found["fix"].startswith("%s -m pip install torch==%s+cu126 --index-url https://download.pytorch.org/whl/cu126"
                                   % (cuda_python["python"], cuda_python["release"]))
    cuda = old_driver_host.json["cuda"]
    assert cuda["available"] is False and cuda["blocked_by"] == ["cuda-driver-too-old"]
    assert old_driver_host.returncode == 1


def test_driver_one_cuda_minor_behind_is_a_warning(h100_host):
    """Minor-version compatibility, replayed: a CUDA 13.2 build on the CUDA 13.0 driver."""
    from test_checker_diagnoses import one, replay

    def cu132(facts):
        facts["cuda"]["built_with"] = "13.2"
    found = one(replay(h100_host.json, cu132), "cuda-driver-too-old")
    assert found["severity"] == "warning"
    assert "unsupported toolchain" in found["evidence"]["compatibility"]
    assert "--index-url https://download.pytorch.org/whl/cu130" in found["fix"]


@pytest.mark.finding("cuda-torch-cpu-only")
def test_cpu_only_torch_on_a_gpu_host(host):
    """This venv's real torch (+cpu) on a simulated 4 x H100 host."""
    code = "import torch; print(torch.__version__, torch.version.cuda)"
    version, cuda = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                   env=clean_env(), check=True).stdout.split()
    if cuda != "None":
        pytest.skip("the test interpreter's torch is a CUDA build (%s)" % version)
    result = host.run(fake_nvml.host_config(fake_nvml.H100, 4, fake_nvml.DRIVER_580), "--require-cuda")
    found = result.only("cuda-torch-cpu-only")
    assert found["severity"] == "warning"
    assert found["evidence"]["builds_with_kernels"][0] == "cu130"  # newest build the 13.0 driver runs
    assert found["fix"].startswith("%s -m pip install torch==%s+cu130 --index-url https://download.pytorch.org/whl/cu130"
                                   % (sys.executable, version.split("+")[0]))
    assert result.json["cuda"]["blocked_by"] == ["torch-not-a-cuda-build"]
    assert result.returncode == 1


@pytest.mark.finding("cuda-visible-devices-hides-all")
@pytest.mark.parametrize("value, reason", [
    ("", "empty"),
    ("-1", "a negative index"),
    ("4", "no device 4: NVML lists 4 (indices 0-3)"),
    ("GPU-deadbeef", "matches no device UUID NVML lists"),
    ("0,0", "repeats an earlier entry"),
])
def test_visible_devices_that_hide_every_gpu(host, cuda_python, value, reason):
    result = host.run(fake_nvml.host_config(fake_nvml.H100, 4), python=cuda_python["python"],
                      extra={"CUDA_VISIBLE_DEVICES": value})
    found = result.only("cuda-visible-devices-hides-all")
    assert found["severity"] == "error"
    assert found["evidence"]["CUDA_VISIBLE_DEVICES"] == value
    assert reason in found["evidence"]["unmatched"][-1]["reason"]
    assert found["fix"].startswith("export CUDA_VISIBLE_DEVICES=0,1,2,3")
    cuda = result.json["cuda"]
    assert cuda["available"] is False and cuda["blocked_by"] == ["cuda-visible-devices-hides-all"]


@pytest.mark.finding("cuda-visible-devices-unknown-device")
def test_visible_devices_naming_a_gpu_that_does_not_exist(host, cuda_python):
    result = host.run(fake_nvml.host_config(fake_nvml.H100, 4), python=cuda_python["python"],
                      extra={"CUDA_VISIBLE_DEVICES": "0,7,1"})
    found = result.only("cuda-visible-devices-unknown-device")
    assert found["severity"] == "warning"
    assert found["evidence"]["visible"] == ["0"]
    assert found["evidence"]["ignored_after_it"] == ["1"]  # CUDA stops at the first bad entry
    assert found["fix"] == "export CUDA_VISIBLE_DEVICES=0,1"
    assert result.json["cuda"]["device_count"] == 1


def test_visible_devices_by_uuid_prefix_and_mig_instance(host, cuda_python):
    lines = fake_nvml.host_config(fake_nvml.H100, 2, **{
        "device.1.mig_mode": 1, "device.1.mig.0.uuid": fake_nvml.uuid(10, "MIG"),
        "device.1.mig.3.uuid": fake_nvml.uuid(13, "MIG")})
    by_uuid = host.run(lines, python=cuda_python["python"],
                       extra={"CUDA_VISIBLE_DEVICES": fake_nvml.uuid(1)[:16]})
    assert [v["index"] for v in by_uuid.json["cuda"]["visible_devices"]["visible"]] == [1]
    assert gpu_findings(by_uuid) == ["gpu-sampling-needs-cugraph"]
    by_mig = host.run(lines, python=cuda_python["python"],
                      extra={"CUDA_VISIBLE_DEVICES": fake_nvml.uuid(13, "MIG")})
    devices = by_mig.json["cuda"]["nvml"]["devices"]
    assert devices[1]["mig_mode"] == {"current": 1, "pending": 1}
    assert [m["uuid"] for m in devices[1]["mig_devices"]] == [fake_nvml.uuid(10, "MIG"), fake_nvml.uuid(13, "MIG")]
    assert by_mig.json["cuda"]["visible_devices"]["visible"][0]["mig"] == fake_nvml.uuid(13, "MIG")
    assert by_mig.json["cuda"]["available"] is True


# How CUDA reads CUDA_VISIBLE_DEVICES and which arch lists cover which GPU: tests/fast/test_checker_gpu_facts.py


@pytest.mark.finding("nvml-init-failed")
@pytest.mark.parametrize("code, name, message, severity, fix", [
    (fake_nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
     "Driver/library version mismatch", "error", "sudo reboot"),
    (fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED", "Driver Not Loaded", "error",
     "sudo modprobe nvidia"),
    (fake_nvml.NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION", "Insufficient Permissions", "warning",
     "ls -l /dev/nvidia*"),
])
def test_nvml_that_fails_to_initialise(host, cuda_python, code, name, message, severity, fix):
    result = host.run(fake_nvml.host_config(init_error=code), python=cuda_python["python"])
    found = result.only("nvml-init-failed")
    assert found["severity"] == severity
    assert found["evidence"]["error"] == {"code": code, "name": name, "message": message}
    assert found["evidence"]["nvidia_smi_says"] == "Failed to initialize NVML: " + message
    assert found["fix"].startswith(fix)
    # Only a fatal error settles availability; otherwise it is unknown without a CUDA call.
    assert result.json["cuda"]["available"] is (False if severity == "error" else None)


@pytest.mark.finding("gpu-sampling-needs-cugraph")
def test_gpu_sampling_means_cugraph(h100_host, cuda_python):
    found = h100_host.only("gpu-sampling-needs-cugraph")
    assert found["severity"] == "info"
    assert found["evidence"]["visible_gpus"] == 4 and found["evidence"]["sampling_device"] == "cpu"
    # cuGraph-PyG needs PyG < 2.8: a separate venv, NVIDIA's index, PyG pinned below 2.8 -- never this env.
    assert found["fix"].startswith("python3 -m venv ~/.venvs/cugraph-pyg && ~/.venvs/cugraph-pyg/bin/python -m pip "
                                   "install --extra-index-url=https://pypi.nvidia.com cugraph-pyg-cu13 "
                                   "'torch_geometric>=2.5,<2.8'")
    assert cuda_python["python"] not in found["fix"]


def test_gpu_sampling_finding_needs_gpus(cuda_python):
    result = invoke_checker("--python", cuda_python["python"], env=clean_env(drop=("CUDA_VISIBLE_DEVICES",)))
    assert "gpu-sampling-needs-cugraph" not in result.ids()


# ---------------------------------------------------------------------------
# No CUDA call, no extra process: proved under strace
# ---------------------------------------------------------------------------

def traced(command, env, trace):
    subprocess.run(["strace", "-f", "-qq", "-o", str(trace), "-e",
                    "trace=openat,open,creat,execve,socket,connect,bind,mkdir,mkdirat,rename,renameat,renameat2,"
                    "unlink,unlinkat"] + command,
                   capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
    text = trace.read_text()
    lines = text.splitlines()
    return {
        "writes": [line for line in lines if "= -1" not in line and "/dev/" not in line and (
            re.search(r"\bopen(at)?\(.*O_(WRONLY|RDWR|CREAT)", line)
            or re.search(r"\b(mkdir|mkdirat|rename\w*|unlink\w*|creat)\(", line))],
        "sockets": [line for line in lines if re.search(r"\b(socket|connect|bind)\(", line) and "= -1" not in line],
        # The CUDA runtime dlopens libcuda.so.1 before cuInit; CUDA's math
        # libraries also try it when they load, so every `import torch` does.
        "libcuda": len(re.findall(r'open(?:at)?\(.*"[^"]*/libcuda\.so[^"]*"', text)),
        "devices": re.findall(r'open(?:at)?\(.*"(/dev/nvidia[^"]*)"', text),
        "programs": executed(lines),
    }


def executed(lines):
    """Programs a strace -f log shows started, in order. Under load strace splits a call across two lines
    (`execve("x", ... <unfinished ...>` then `<... execve resumed>... = 0`): both halves are read."""
    programs, pending = [], {}
    for line in lines:
        pid = line.split(" ", 1)[0]
        started = re.search(r'execve\("([^"]+)"', line)
        if started and line.endswith("<unfinished ...>"):
            pending[pid] = started.group(1)
        elif started and line.endswith("= 0"):
            programs.append(started.group(1))
        elif "<... execve resumed>" in line and pid in pending:
            program = pending.pop(pid)
            if line.endswith("= 0"):
                programs.append(program)
    return programs


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (.ci/run installs it)")
def test_no_cuda_call_and_no_extra_process(host, cuda_python, tmp_path):
    python = cuda_python["python"]
    env = host.env(fake_nvml.host_config(fake_nvml.H100, 4))
    checker = traced([sys.executable, str(CHECKER), "--python", python], env, tmp_path / "checker.trace")
    imports = traced([python, "-B", "-c", "import torch, torch_geometric.typing"], env, tmp_path / "import.trace")
    imports_torch = traced([python, "-B", "-c", "import torch"], env, tmp_path / "torch.trace")
    cuda_call = traced([python, "-B", "-c", "import torch; torch.cuda.is_available()"], env, tmp_path / "call.trace")
    # The measure can fail: one runtime call (cudaGetDeviceCount) adds libcuda attempts,
    # and so does a plain `import torch_geometric` (its typing.py calls torch.__config__.show()).
    assert cuda_call["libcuda"] > imports_torch["libcuda"]
    assert imports["libcuda"] > imports_torch["libcuda"]
    # The checker's probe, which imports torch and PyG, tries libcuda exactly as often as
    # `import torch` alone: no CUDA runtime call, hence no cuInit and no context.
    assert checker["libcuda"] == imports_torch["libcuda"]
    assert checker["devices"] == []
    assert checker["writes"] == [] and checker["sockets"] == []
    # Processes: the checker, the one-line question of what --python is (sandboxed, imports
    # nothing), its one probe child, and what `import torch` itself starts.
    # (Counted, not ordered: the probe's own children may start while the question's exec is reported.)
    assert checker["programs"][0] == sys.executable
    assert sorted(checker["programs"]) == sorted([sys.executable, python, python] + imports_torch["programs"][1:])


# ---------------------------------------------------------------------------
# The device script, in the dry mode any machine without a GPU gets
# ---------------------------------------------------------------------------

def test_device_check_without_nvidia_smi_says_so(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "python3", "date", "mkdir", "cat", "dirname"):  # a PATH without nvidia-smi
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = clean_env({"OUT": str(out), "PATH": str(bin_dir), "DEVICE_CHECK_PYTHON": sys.executable})
    done = subprocess.run(["bash", str(DEVICE_CHECK)], capture_output=True, text=True, env=env, timeout=600,
                          cwd=str(ROOT))
    assert done.returncode == EXIT_NO_GPU, done.stdout + done.stderr
    assert "no nvidia-smi" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "dry" and summary["gpu"] is False
    assert summary["checks"] == {}


FAKE_NVIDIA_SMI = """#!/bin/sh
# nvidia-smi as a simulated host's shows it: the GPU list, and no compute apps.
case "$*" in
  *--query-gpu=*) cat {csv} ;;
  *--query-compute-apps=*) ;;
  *) echo "NVIDIA-SMI (fake for tests)" ;;
esac
"""


def test_device_check_plumbing_on_a_simulated_host(host, tmp_path):
    """GPU mode end to end against the fake NVML and a fake nvidia-smi that agree.

    Its NVML-versus-nvidia-smi and no-context checks pass, and the checker's verdict
    on this CPU-only torch (no usable GPU) agrees with torch's own; what needs a
    real GPU (nccl, the batch on the GPU) fails here, as it must.
    """
    out = tmp_path / "out"
    out.mkdir()
    lines = fake_nvml.host_config(fake_nvml.H100, 2, fake_nvml.DRIVER_580)
    csv_file = tmp_path / "gpus.csv"
    csv_file.write_text("".join("%s, %s, %s, %d MiB, %s\n" % (
        fake_nvml.H100["name"], fake_nvml.uuid(i), fake_nvml.H100["capability"],
        fake_nvml.H100["memory_total"] // 2 ** 20, fake_nvml.DRIVER_580[0]) for i in range(2)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI.format(csv=csv_file))
    smi.chmod(0o755)
    env = host.env(lines, extra={"OUT": str(out), "DEVICE_CHECK_PYTHON": sys.executable,
                                 "PATH": "%s:%s" % (bin_dir, os.environ["PATH"])})
    done = subprocess.run(["bash", str(DEVICE_CHECK)], capture_output=True, text=True, env=env, timeout=900,
                          cwd=str(ROOT))
    summary = json.loads((out / "summary.json").read_text())
    checks = summary["checks"]
    assert summary["mode"] == "gpu" and done.returncode == 1, done.stdout + done.stderr
    assert checks["nvml_vs_nvidia_smi"]["passed"] is True, checks["nvml_vs_nvidia_smi"]
    assert checks["no_cuda_context"]["passed"] is True and checks["no_cuda_context"]["polls"] > 0
    assert checks["checker_vs_torch"]["passed"] is True
    assert checks["checker_vs_torch"]["checker"]["blocked_by"] == ["torch-not-a-cuda-build"]
    assert checks["checker_vs_torch"]["torch"]["available"] is False
    assert checks["nccl_all_reduce"]["passed"] is False
    assert checks["neighbor_loader_to_gpu"]["passed"] is False


@pytest.mark.finding("doctor-log-duplicate-device")
def test_the_launch_doctor_knows_the_two_ranks_on_one_gpu_error_of_the_nccl_in_the_cuda_build(cuda_python):
    """NCCL 2.30 reworded its error for two ranks on one GPU: the message the launch doctor reads in a log is
    the one in the tested CUDA build's libnccl (the old one is gone from it)."""
    from launch_doctor import logs
    assert cuda_python["nccl"][:2] >= [2, 30], cuda_python["nccl"]
    site = subprocess.run([cuda_python["python"], "-c", "import nvidia.nccl, os; print(os.path.dirname("
                           "nvidia.nccl.__path__[0]))"], capture_output=True, text=True, timeout=120,
                          env=clean_env()).stdout.strip()
    library = Path(site) / "nccl" / "lib" / "libnccl.so.2"
    text = library.read_bytes()
    message = b"Multiple Ranks are using the same GPU/Partition"
    assert message in text and b"Duplicate GPU detected" not in text
    [pattern] = [pattern for finding_id, pattern in logs.SIGNATURES if finding_id == "doctor-log-duplicate-device"]
    assert pattern.search(message.decode())
    assert "`%s`" % message.decode() in section_text(TROUBLESHOOTING, "### doctor-log-duplicate-device", 3)
