"""What the CUDA facts mean (sampling_checker.gpu_facts) and the GPU rules on edited facts, in process: which
compiled code runs on which GPU, CUDA_VISIBLE_DEVICES as CUDA reads it, how far a driver is behind, and the
fixes. The real NVML calls and a real CUDA build of torch: tests/test_checker_gpu.py."""


import pytest

from sampling_checker import gpu_facts
from support import fake_nvml
from support.fakes import FAKE_PYTHON, checker_facts, checker_findings as diagnose
from support.helpers import one


@pytest.mark.parametrize("value, visible, reason", [
    ("1gpu,0", [1, 0], None),                       # CUDA reads entries like strtoul
    (" 2 , 3", [2, 3], None),
    ("GPU-5eed000", [], "ambiguous UUID prefix"),    # a prefix of all four UUIDs
    ("0,1,0", [], "repeats an earlier entry"),
    ("MIG-5eed", [], "no GPU has MIG instances"),
    ("2,x,3", [2], "neither a device index nor a GPU-/MIG- UUID"),
    ("7", [], "no device 7: NVML lists 4"),
    ("-1,0", [], "a negative index"),
    ("", [], "empty"),
    # only ASCII digits name a device ('\uff10' is a full-width zero, int() would read it)
    ("\uff10", [], "neither"), ("1,\uff11", [1], "neither"), ("\u0661", [], "neither"), ("\u30000", [], "neither"),
])
def test_visible_devices_read_as_cuda_reads_them(value, visible, reason):
    devices = [{"index": i, "uuid": fake_nvml.uuid(i)} for i in range(4)]
    resolved = gpu_facts.resolve_visible_devices(value, devices)
    assert [v["index"] for v in resolved["visible"]] == visible
    assert (resolved["unmatched"][-1]["reason"].startswith(reason) if reason else resolved["unmatched"] == [])


@pytest.mark.parametrize("capability, arch_list, runs", [
    (89, ["sm_80", "sm_86"], True),    # L4/RTX 4090: sm_86 code runs on later 8.x
    (87, ["sm_80", "sm_86"], False),   # Jetson Orin runs only sm_87 code
    (121, ["sm_120"], True),
    (103, ["sm_100"], True),
    (90, ["sm_80", "sm_86"], False),   # a cubin never crosses a major
    (90, ["sm_80", "compute_80"], True),  # PTX is JIT-compiled for later GPUs
    (70, ["sm_75", "sm_80"], False),
    (100, ["sm_100a"], True),
])
def test_which_gpus_an_arch_list_covers(capability, arch_list, runs):
    assert gpu_facts.arch_flags_cover(arch_list, capability) is runs


@pytest.mark.parametrize("built, driver, gap", [("13.0", "12.8", "major"), ("12.8", "12.4", "minor"),
                                                ("12.6", "13.0", None), ("12.6", "12.6", None), (None, "12.4", None)])
def test_how_far_the_driver_is_behind(built, driver, gap):
    assert gpu_facts.driver_gap(built, driver) == gap


def with_gpus(gpu=fake_nvml.H100, count=2, driver="13.0", built="13.0", arch=("sm_80", "sm_90"), compiled=True,
              visible=None):
    """The typical facts on a host whose NVML lists `count` GPUs, probed with a CUDA build of torch."""
    facts = checker_facts()
    devices = [{"index": i, "name": gpu["name"], "uuid": fake_nvml.uuid(i), "capability": gpu["capability"]}
               for i in range(count)]
    facts["torch"].update(cuda=built, version="2.13.0+cu%s" % built.replace(".", "") if built else "2.13.0+cpu")
    facts["cuda"] = {"built_with": built, "compiled": compiled, "arch_list": list(arch), "visible_devices_env": visible,
                     "cudnn_version": 91300, "nvml": {"available": True, "driver_version": "580.95.05",
                                                      "cuda_driver_version": driver, "devices": devices}}
    facts["cuda"].update(gpu_facts.cuda_usability(facts["cuda"]))
    return facts


def test_usable_gpus_need_nothing_from_the_gpu_rules():
    facts = with_gpus()
    assert facts["cuda"]["available"] is True and facts["cuda"]["device_count"] == 2
    ids = [f["id"] for f in diagnose(facts)]
    assert not [i for i in ids if i.startswith("cuda-")]
    assert "gpu-sampling-needs-cugraph" in ids  # PyG samples on the CPU whatever the GPUs


@pytest.mark.parametrize("driver, severity", [("12.8", "error"), ("12.9", "error"), ("13.0", None)])
def test_a_driver_a_cuda_major_behind_torch_blocks_cuda(driver, severity):
    facts = with_gpus(driver=driver, built="13.0")
    found = [f for f in diagnose(facts) if f["id"] == "cuda-driver-too-old"]
    if severity is None:
        assert not found
        return
    [item] = found
    assert item["severity"] == severity and "too old (found version %d)" % (
        int(driver.split(".")[0]) * 1000 + int(driver.split(".")[1]) * 10) in item["evidence"]["predicted_error"]
    assert "cuda-driver-too-old" in facts["cuda"]["blocked_by"] and facts["cuda"]["available"] is False
    assert item["fix"].startswith(FAKE_PYTHON + " -m pip install torch==2.13.0+cu12")


def test_a_driver_a_cuda_minor_behind_is_a_warning():
    item = one(diagnose(with_gpus(driver="12.4", built="12.8")), "cuda-driver-too-old")
    assert item["severity"] == "warning" and "minor-version compatibility" in item["title"]


@pytest.mark.parametrize("gpu, arch, lacking", [(fake_nvml.V100, ("sm_80", "sm_90", "sm_100"), "sm_70"),
                                                (fake_nvml.P100, ("sm_75", "sm_80"), "sm_60")])
def test_a_gpu_older_than_the_build_has_no_kernels(gpu, arch, lacking):
    item = one(diagnose(with_gpus(gpu=gpu, arch=arch)), "cuda-arch-not-compiled")
    assert "no kernel image is available" in item["evidence"]["predicted_error"]
    assert "its kernels cover %s" % lacking in item["fix"]


def test_a_cpu_only_torch_on_a_gpu_host():
    item = one(diagnose(with_gpus(compiled=False, built=None)), "cuda-torch-cpu-only")
    assert item["severity"] == "warning" and item["evidence"]["builds_with_kernels"][0].startswith("cu")
    assert "--index-url https://download.pytorch.org/whl/cu" in item["fix"]


@pytest.mark.parametrize("visible, finding_id, fix", [
    ("-1", "cuda-visible-devices-hides-all", "export CUDA_VISIBLE_DEVICES=0,1  # or unset it"),
    ("", "cuda-visible-devices-hides-all", "export CUDA_VISIBLE_DEVICES=0,1  # or unset it"),
    ("1,5,0", "cuda-visible-devices-unknown-device", "export CUDA_VISIBLE_DEVICES=1,0"),
])
def test_cuda_visible_devices_that_hide_gpus(visible, finding_id, fix):
    item = one(diagnose(with_gpus(visible=visible), "--require-cuda"), finding_id)
    assert item["fix"].startswith(fix)
