"""Every fix the checker prints is inert data where it carries text from the input: facts whose probed interpreter
path (and the other input-borne text: torch's version, PYTHONPATH, CUDA_VISIBLE_DEVICES, unreadable paths, the
command line) holds `$(:>MARKER)`, backticks, `;`, quotes or a newline, through every rule and refusal that
builds a fix; each fix is run in bash with an empty PATH from another folder, and no MARKER appears. The same
with a real run: tests/test_checker_hostile_output.py."""

import copy
import os
import shutil
import subprocess
import time

import pytest

from diagnostics_core import runner
from diagnostics_core.cli import UsageError
from sampling_checker import interpreter, rules, run
from sampling_checker.cli import SPEC
from support.fakes import checker_facts

BASH = shutil.which("bash")
HOSTILE = ["/opt/x$(:>MARKER)/bin/python", "/opt/x`:>MARKER`/bin/python", "/opt/x;:>MARKER;/bin/python",
           "/opt/it's/x'; :>MARKER; '/bin/python", '/opt/x"; :>MARKER; "/bin/python', "/opt/x\n:>MARKER\n/bin/python",
           "/opt/x $(:>MARKER) y/bin/python"]


def parsed(*argv):
    run_ = runner.Run(SPEC, list(argv), time.time())
    run_.options = SPEC.parser().parse_args(list(argv))
    run_.plan_time()
    return run_.options


def scenarios(python):
    """(name, facts, argv): every kind of environment that makes a rule print a command."""
    def edit(change, **build):
        facts = checker_facts(python=python, **build)
        change(facts)
        return facts

    def no_backend(facts):
        facts["pyg"]["neighbor_backend"] = facts["sampling"]["neighbor_backend"] = None
        facts["pyg"]["flags"]["WITH_TORCH_SPARSE"] = False

    def broken_extensions(facts):
        chain = {"type": "OSError", "message": "undefined symbol: _ZN3c10", "chain": []}
        facts["extensions"]["torch_sparse"].update(status="import-error", error=chain)
        facts["extensions"]["torch_scatter"].update(status="import-error", error={
            "type": "ImportError", "message": "/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found"})
        facts["extensions"]["pyg_lib"].update(status="import-error", error={
            "type": "ModuleNotFoundError", "message": "No module named 'scipy'"})
        facts["extensions"]["torch_cluster"].update(status="crashed", signal="SIGSEGV")
        facts["extensions"]["torch_spline_conv"].update(status="hung")

    def installer(kind):
        def change(facts):
            facts["python"]["pip"] = False
            facts["python"]["venv_tool"] = "uv" if kind == "uv" else None
        return change

    def no_torch(base=False, old=False):
        def change(static):
            static["torch_build"] = {"found": False}
            static["python"]["in_virtualenv"] = not base
            if old:
                static["python"]["version"] = "3.9.18"
        return change

    def legacy_and_duplicates(static):
        from support.fakes import fake_record
        packages = static["distributions"]["packages"]
        packages["torch-cluster"] = {"installed": True, "version": "1.6.3+pt213cpu",
                                     "installs": [fake_record("torch_cluster", "1.6.3+pt213cpu", "torch_cluster")]}
        packages["torch-geometric"]["installs"].append(fake_record("torch_geometric", "2.3.0", "torch_geometric",
                                                                   site="/opt/old site"))
        static["distributions"]["module_claims"] = {"torch_geometric": ["pyg-nightly", "torch-geometric"]}

    def wheel_mismatch(static):
        from support.fakes import fake_record
        static["torch_build"].update(version="2.13.0+cu126", cuda="12.6", variant="cu126")
        static["distributions"]["packages"]["pyg-lib"] = {
            "installed": True, "version": "0.8.0+pt213cu118", "installs": [fake_record(
                "pyg_lib", "0.8.0+pt213cu118", "pyg_lib", tags=("cp311-cp311-manylinux_2_99_x86_64",))]}
        static["distributions"]["packages"]["torch-scatter"]["installs"][0].update(
            version="2.1.2+pt212cu126", local_tag={"raw": "pt212cu126", "torch": "2.12", "variant": "cu126"})

    def hostile_torch_version(static):
        static["torch_build"]["version"] = "2.13.0+cpu$(:>MARKER)\n:>MARKER"
        static["torch_build"]["cuda"] = "12.6$(:>MARKER)"

    def torch_import_failed(facts):
        facts["torch"] = {"status": "crashed", "signal": "SIGSEGV"}

    def unreadable(static):
        static["environment"]["unreadable_files"] = {"count": 2, "paths": [
            {"path": python, "problem": "not a regular file (FIFO)"},
            {"path": "/x\n:>MARKER", "problem": "blocked"}]}

    def gpus(facts):
        devices = [{"index": i, "name": "H100", "uuid": "GPU-%d" % i, "capability": capability}
                   for i, capability in enumerate(("9.0", "7.0"))]
        facts["cuda"].update(compiled=True, built_with="13.0\n:>MARKER", arch_list=["sm_90"], nvml={
            "available": True, "driver_version": "550.1", "cuda_driver_version": "12.4", "devices": devices})
        facts["torch"].update(cuda="13.0", version="2.13.0+cu130")
        from sampling_checker.gpu_facts import cuda_usability
        facts["cuda"]["visible_devices_env"] = "0$(:>MARKER),1;:>MARKER,GPU-0`:>MARKER`,7"
        facts["cuda"].update(cuda_usability(facts["cuda"]))

    def cpu_only_torch_on_gpus(facts):
        gpus(facts)
        facts["cuda"]["compiled"] = False

    def shadowed(facts):
        facts["pyg"]["file"] = "/opt/vendor$(:>MARKER)/torch_geometric/__init__.py"
        facts["pyg"]["version"] = "2.3.0"

    def limits(facts):
        container = facts["container"]
        container["shm"].update(total_bytes=64 << 20, free_bytes=64 << 20)
        container["cgroup_cpu"]["cores"] = 1.5
        container["cgroup_memory"]["limit_bytes"] = 3 << 30
        container["open_files"] = {"soft": 1024, "hard": 1024}
        facts["environment"]["launch"] = {"MASTER_ADDR": {"raw": "n$(:>MARKER)", "value": "n", "error": None},
                                          "WORLD_SIZE": {"raw": "x;:>MARKER", "value": None, "error": "not an int"}}

    def not_active(facts):
        active = os.path.dirname(os.path.dirname(python)) + "-active"
        facts["interpreter"].update(chosen_by="active-environment", probed_is_active=False, active_environment={
            "source": "VIRTUAL_ENV", "prefix": active, "python": active + "/bin/python"})

    def not_active_without_python(facts):
        not_active(facts)
        facts["interpreter"]["active_environment"]["python"] = None

    def deadline(facts):
        facts["probe"].update(complete=False, attempts=[dict(facts["probe"]["attempts"][0], killed_for="deadline",
                                                             culprit="ext:pyg_lib", finished=False)])

    return [
        ("typical", checker_facts(python=python), []),
        ("no-backend", edit(no_backend), ["--require-neighbor-backend"]),
        ("broken-extensions", edit(broken_extensions), []),
        ("uv", edit(lambda f: (installer("uv")(f), broken_extensions(f))), []),
        ("ensurepip", edit(lambda f: (installer("pip")(f), no_backend(f))), []),
        ("no-torch-venv", checker_facts(python=python, static_only=True, edit_static=no_torch()), ["--static-only"]),
        ("no-torch-base", checker_facts(python=python, static_only=True, edit_static=no_torch(base=True)),
         ["--static-only"]),
        ("no-torch-old", checker_facts(python=python, static_only=True, edit_static=no_torch(old=True)),
         ["--static-only"]),
        ("legacy-duplicates", checker_facts(python=python, static_only=True, edit_static=legacy_and_duplicates),
         ["--static-only"]),
        ("wheel-mismatch", checker_facts(python=python, static_only=True, edit_static=wheel_mismatch),
         ["--static-only"]),
        ("hostile-torch-version", edit(torch_import_failed, edit_static=hostile_torch_version), []),
        ("unreadable", checker_facts(python=python, static_only=True, edit_static=unreadable), ["--static-only"]),
        ("gpus", edit(gpus), ["--require-cuda"]),
        ("cpu-torch-on-gpus", edit(cpu_only_torch_on_gpus), []),
        ("shadowed", edit(shadowed), []),
        ("limits", edit(limits), []),
        ("not-active", edit(not_active), []),
        ("not-active-no-python", edit(not_active_without_python), []),
        ("deadline", edit(deadline), ["--timeout", "7"]),
        ("static-failure", {"interpreter": None, "static_failure": {"how": "deadline"}},
         ["--static-only", "--python", python]),
    ]


def refusal_fixes(python):
    """The fixes of the refusals that name the interpreter or repeat the command line."""
    errors = [interpreter.refuse_script_runner(python, {"executable": python + "-inner"}, None),
              interpreter.refuse_script_runner(python, {"executable": python}, "VIRTUAL_ENV"),
              run.open_files_refusal(OSError(24, "Too many open files"), ["--python", python, "--timeout", "9"])]
    for source in (None, "VIRTUAL_ENV", "CONDA_PREFIX", "PATH"):
        errors.append(UsageError("x", "interpreter-unsupported", {}, interpreter.unusable_fix(source)))
    return [error.fix for error in errors]


def printed_fixes(python, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/opt/vendor$(:>MARKER)", "/opt/mine;:>MARKER"]))
    fixes = []
    for name, facts, argv in scenarios(python):
        for item in rules.diagnose(copy.deepcopy(facts), parsed(*argv)):
            if item["fix"]:
                fixes.append((name, item["id"], item["fix"]))
    fixes += [("refusal", "usage", fix) for fix in refusal_fixes(python)]
    return fixes


def test_the_scenarios_reach_every_rule_that_builds_a_command(monkeypatch):
    reached = set(item_id for _, item_id, _ in printed_fixes(HOSTILE[0], monkeypatch))
    assert {"neighbor-sampling-unavailable", "ext-undefined-symbol", "ext-glibc-too-old", "ext-missing-dependency",
            "ext-import-crashed", "ext-import-hung", "torch-not-installed", "torch-import-failed",
            "legacy-extension-ignored", "duplicate-distribution", "wheel-cuda-mismatch", "wheel-platform-mismatch",
            "files-unreadable", "cuda-visible-devices-unknown-device", "cuda-torch-cpu-only", "pyg-shadowed",
            "container-shm-small", "container-cpu-quota", "container-memory-limit", "open-files-low",
            "launch-env-invalid", "interpreter-not-active", "probe-deadline", "static-stage-incomplete",
            "pyg-from-partition-edge-feats", "metis-unavailable", "cuda-driver-too-old", "cuda-arch-not-compiled"
            } <= reached, sorted(reached)


@pytest.mark.parametrize("python", HOSTILE)
def test_no_printed_fix_runs_text_from_the_input(python, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    marker = elsewhere / "MARKER"
    seen = set()
    for name, item_id, fix in printed_fixes(python, monkeypatch):
        if fix in seen:
            continue
        seen.add(fix)
        subprocess.run([BASH, "-c", fix], cwd=str(elsewhere), env={"PATH": str(tmp_path / "no-commands")},
                       capture_output=True, timeout=10)
        assert not marker.exists(), (name, item_id, fix)
    assert len(seen) > 30
