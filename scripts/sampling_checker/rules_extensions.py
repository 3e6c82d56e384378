"""Rules about PyG's compiled extensions: imports, wheels, builds, sampling features, known PyG defects."""

import re

from diagnostics_core.contract import script_command
from diagnostics_core.wheels import (EXTENSIONS, EXTENSION_DIST, SAMPLING_DISTS, SOURCE_BUILD_NEEDS,
                                     SOURCE_BUILD_PACKAGES, parse_version, pip_name, source_build_time,
                                     wheel_command)
from .findings import finding
from .install import build_command, install_line, interpreter, pip, pip_fix, pyg_lib_index, uses_uv, with_pip
from .rules_environment import pyg_shadowing, pyg_version
from .tables import DIST_SAMPLER_OPS, PIP_NAME, WITHOUT_TORCH_SPARSE


IMPORT_FAILURE_PATTERNS = (
    ("ext-undefined-symbol", re.compile(r"undefined symbol|Symbol not found|specified procedure could not be found")),
    ("ext-cuda-mismatch", re.compile(r"compiled with different CUDA versions")),
    ("ext-cuda-runtime-missing", re.compile(
        r"lib(cudart|cublas|cusparse|cusolver|curand|nvrtc|nvJitLink|cudnn|c10_cuda|torch_cuda)[\w.\-]*:"
        r" cannot open shared object file")),
    ("ext-glibc-too-old", re.compile(r"`?(GLIBC|GLIBCXX|CXXABI)_[\d.]+'? not found")),
    ("ext-operator-missing", re.compile(r"_OpNamespace'? '?\w+'? object has no attribute|No such operator")),
    ("ext-missing-dependency", re.compile(r"No module named|import of \w+ halted")),
)


def chain_messages(error):
    """Every message of a described exception chain (see describe_exception), outermost first."""
    return [link["message"] for link in error.get("chain", [])] or [error.get("message", "")]


def classify_import_error(module, error):
    """Map an exception chain to a finding id by its most specific message."""
    messages = chain_messages(error)
    for finding_id, pattern in IMPORT_FAILURE_PATTERNS:
        for message in messages:
            match = pattern.search(message)
            if not match:
                continue
            if finding_id == "ext-missing-dependency":
                missing = re.search(r"No module named '([\w.]+)'|import of (\w+) halted", message)
                name = (missing.group(1) or missing.group(2)) if missing else ""
                if name.split(".")[0] == module:
                    continue  # the extension's own submodule: a broken install, not a dependency
                return finding_id, message, name.split(".")[0]
            return finding_id, message, None
    return "ext-import-error", messages[0], None


def failing_library_owner(module, error):
    """Another extension whose library file the error names, or None.

    torch-sparse's typing.py runs `import pyg_lib` catching only ImportError,
    so a pyg-lib that fails to load (OSError) breaks `import torch_sparse`
    too; the fix is then pyg-lib's, not torch-sparse's.
    """
    for message in chain_messages(error):
        for other, _ in EXTENSIONS:
            if other != module and re.search(r"[/\\]%s[/\\][^\s:]*\.(so|dylib|pyd|dll)\b" % other, message):
                return other
    return None


def rule_extension_imports(facts, options):
    found = []
    for module, entry in facts["extensions"].items():
        status = entry.get("status")
        package = PIP_NAME[module]
        dist = EXTENSION_DIST[module]
        if status == "import-error":
            finding_id, message, dependency = classify_import_error(module, entry["error"])
            evidence = {"module": module, "distribution": dist,
                        "version": facts["distributions"]["packages"][dist]["version"],
                        "error": entry["error"], "matched": message}
            owner = failing_library_owner(module, entry["error"])
            if owner is not None:
                # Blame the library that failed; fixing it fixes this import too.
                evidence["caused_by"] = owner
                package = PIP_NAME[owner]
            if finding_id == "ext-missing-dependency":
                evidence["missing"] = dependency
                fix = pip_fix(facts, [PIP_NAME.get(dependency, dependency)])
            elif finding_id == "ext-glibc-too-old":
                fix = with_pip(facts, "run on an OS image with a newer glibc/libstdc++ (see the version named in "
                               "the error), or build it here from source (%s; needs %s): %s"
                               % (source_build_time(SOURCE_BUILD_PACKAGES[owner or module]), SOURCE_BUILD_NEEDS,
                                  build_command(facts, interpreter(facts), SOURCE_BUILD_PACKAGES[owner or module])))
            else:
                fix = pip_fix(facts, [package], reinstall=True)
            found.append(finding(finding_id, evidence, fix=fix))
        elif status in ("crashed", "hung") and not entry.get("deadline"):
            finding_id = "ext-import-crashed" if status == "crashed" else "ext-import-hung"
            evidence = {"module": module, "distribution": dist,
                        "version": facts["distributions"]["packages"][dist]["version"],
                        "signal": entry.get("signal"), "returncode": entry.get("returncode"),
                        "seconds": entry.get("seconds"),
                        "stderr_tail": (entry.get("stderr_tail") or "")[-800:],
                        "note": "torch_geometric imports %s too, so `import torch_geometric` fails the same way; "
                                "the other facts were probed with it blocked" % module}
            fix = install_line(facts, [package], reinstall=True)
            removal = pip(facts, ["uninstall", "-y", dist])
            if fix is None:  # no wheel index known for this torch build: removing it is the fix left
                fix = removal
            elif not fix.startswith(removal):
                fix = "%s  # or remove it: uninstall -y %s with the same interpreter's pip" % (fix, dist)
            found.append(finding(finding_id, evidence, fix=with_pip(facts, fix)))
    return found


def rule_wheel_tags(facts, options):
    """Predict import failures from wheel metadata alone, before anything is imported."""
    found = []
    build = facts["torch_build"]
    if not build.get("found") or not build.get("version"):
        return found
    major, minor, _ = parse_version(build["version"])
    torch_minor = "%d.%d" % (major, minor)
    torch_variant = build.get("variant")
    libc = facts["python"]["libc"]
    for module, dist in EXTENSIONS:
        for record in facts["distributions"]["packages"][dist]["installs"]:
            tag = record["local_tag"]
            evidence = {"distribution": dist, "version": record["version"], "location": record["location"],
                        "torch": build["version"], "torch_cuda": build.get("cuda")}
            if tag is None:
                if record.get("installer") != "conda":
                    found.append(finding("ext-source-build", dict(evidence, wheel_tags=record["wheel_tags"]),
                                         fix="check its CUDA and METIS support in this JSON "
                                             "(extensions.%s.cuda_version, sampling.features.metis)" % module))
            elif tag.get("torch") and tag["torch"] != torch_minor:
                found.append(finding("wheel-torch-mismatch", dict(evidence, built_for_torch=tag["torch"]),
                                     fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
            elif tag.get("variant"):
                wheel_variant = tag["variant"]
                if wheel_variant.startswith("cu") and torch_variant == "cpu":
                    found.append(finding("wheel-cuda-on-cpu-torch", dict(evidence, wheel_variant=wheel_variant),
                                         fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
                elif wheel_variant != torch_variant and torch_variant != "rocm":
                    cpu_wheel = wheel_variant == "cpu"
                    found.append(finding(
                        "wheel-cuda-mismatch", dict(evidence, wheel_variant=wheel_variant, torch_variant=torch_variant),
                        fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True),
                        severity="warning" if cpu_wheel else None,
                        title="CPU-only extension wheel beside a CUDA torch: no GPU kernels" if cpu_wheel else None))
            problem = wheel_platform_problem(record["wheel_tags"], facts["python"], libc)
            if problem:
                found.append(finding("wheel-platform-mismatch", dict(evidence, wheel_tags=record["wheel_tags"],
                                                                     problem=problem),
                                     fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
    return found


def wheel_platform_problem(tags, python_facts, libc):
    """Why none of a wheel's tags can run here, or None when one can (or tags are unknown)."""
    if not tags:
        return None
    machine = (python_facts.get("machine") or "").lower()
    problems = []
    for tag in tags:
        platform_tag = tag.split("-")[-1]
        if platform_tag == "any":
            return None
        match = re.match(r"^(many|musl)linux_(\d+)_(\d+)_(\w+)$", platform_tag)
        legacy = re.match(r"^manylinux(1|2010|2014)_(\w+)$", platform_tag)
        if legacy:
            glibc = {"1": (2, 5), "2010": (2, 12), "2014": (2, 17)}[legacy.group(1)]
            match_kind, arch = "many", legacy.group(2)
        elif match:
            glibc = (int(match.group(2)), int(match.group(3)))
            match_kind, arch = match.group(1), match.group(4)
        elif platform_tag.startswith("linux_"):
            arch, match_kind, glibc = platform_tag[len("linux_"):], "local", None
        else:
            if python_facts.get("system") == "Linux":
                problems.append("platform tag %s is not for Linux" % platform_tag)
                continue
            return None
        if python_facts.get("system") != "Linux":
            problems.append("Linux wheel (%s) on %s" % (platform_tag, python_facts.get("system")))
            continue
        if arch != machine:
            problems.append("built for %s, this machine is %s" % (arch, machine))
            continue
        if match_kind == "musl" and libc.get("name") == "glibc":
            problems.append("musllinux wheel on a glibc system")
            continue
        if glibc and libc.get("name") == "glibc" and libc.get("version"):
            have = parse_version(libc["version"])[:2]
            if have < glibc:
                problems.append("needs glibc >= %d.%d, this system has %s" % (glibc + (libc["version"],)))
                continue
        return None
    return "; ".join(problems) or None


def rule_no_prebuilt_wheels(facts, options):
    """A sampling extension PyG's index has no wheel for, and that does not already work here."""
    install = facts["install"]
    if not install.get("packages") or pyg_shadowing(facts):  # a stray PyG copy first: pyg-shadowed says so
        return []
    extensions = facts.get("extensions") or {}
    lacking = [d for d in SAMPLING_DISTS if install["packages"][d]["wheel"] is False
               and extensions.get(pip_name(d), {}).get("status") != "ok"]
    if not lacking:
        return []
    py = interpreter(facts)
    options_text = []
    evidence = {
        "torch_minor": install["torch_minor"], "variant": install["variant"], "platform": install["platform"],
        "python": facts["python"]["version"], "missing": lacking,
        "reasons": [install["packages"][d]["reason"] for d in lacking],
        "sources": {d: "%s (%s)" % (install["packages"][d]["source"], install["packages"][d]["source_date"])
                    for d in lacking},
        "support_table_date": install["support_table_date"]}
    if "pyg-lib" in lacking:
        evidence["pyg_lib_index"] = pyg_lib_index(facts)
    if install["packages"]["pyg-lib"]["wheel"]:
        options_text.append("pyg-lib alone (neighbour sampling works; without torch-sparse PyG loses %s): %s" % (
            ", ".join(WITHOUT_TORCH_SPARSE),
            wheel_command(py, ["pyg-lib"], install["index_url"], uv=uses_uv(facts))))
    pin = install.get("torch_pin")
    if pin:
        options_text.append("torch %s, the newest release with wheels of all three for %s (torch-sparse needs "
                            "scipy): %s" % (pin["release"], install["variant"], pin["command"]))
    options_text.append("build torch-scatter and torch-sparse from source (%s; needs %s): %s" % (
        install["source_build_time"], SOURCE_BUILD_NEEDS, install["source_build_command"]))
    # Two cases, two ids: without pyg-lib there is no wheel-installed sampler at all (a warning);
    # with it, only torch-sparse's extra features need another way (info).
    fix = "pick one: " + " | ".join("(%d) %s" % (n + 1, text) for n, text in enumerate(options_text))
    return [finding("no-prebuilt-wheels" if "pyg-lib" in lacking else "no-scatter-sparse-wheels", evidence,
                    fix=with_pip(facts, fix))]


def rule_stale_local_build(facts, options):
    """A locally built extension that no longer loads: the rebuild must bypass pip's wheel cache."""
    found, stale = [], []
    for module, dist in EXTENSIONS:
        entry = facts["extensions"].get(module, {})
        if entry.get("status") != "import-error" or failing_library_owner(module, entry["error"]):
            continue
        if classify_import_error(module, entry["error"])[0] != "ext-undefined-symbol":
            continue
        records = [r for r in facts["distributions"]["packages"][dist]["installs"]
                   if r["local_tag"] is None and r.get("installer") != "conda"]
        if records:
            stale.append((module, dist, records[0]))
    for module, dist, record in stale:
        cached = record.get("pip_cache") or []
        same = [c["path"] for c in cached if c.get("same_binary")]
        # torch-scatter and torch-sparse go together, in build order; pip_fix names a wheel where one exists.
        rebuild = [d for _, d, _ in stale if d in ("torch-scatter", "torch-sparse")] if dist in (
            "torch-scatter", "torch-sparse") else [dist]
        fix = pip_fix(facts, [pip_name(d) for d in rebuild], reinstall=True)
        found.append(finding("ext-stale-local-build", {
            "module": module, "distribution": dist, "version": record["version"],
            "wheel_tags": record["wheel_tags"], "torch": facts["torch_build"].get("version"),
            "pip_cache_wheels": [c["path"] for c in cached],
            "installed_binary_is_cached_wheel": same[0] if same else None,
            "trap": "pip keys its wheel cache by the sdist's URL and the Python version, not by the torch it was "
                    "built against: "
                    "`pip install --force-reinstall` reinstalls the cached wheel built against the old torch "
                    "and the import still fails; only --no-cache-dir rebuilds"},
            fix=fix))
    return found


def extension_reason(facts, module):
    entry = facts["extensions"].get(module, {})
    status = entry.get("status")
    if status == "import-error":
        return "%s: %s" % (status, entry["error"]["message"][:300])
    return status


def rule_neighbor_sampling(facts, options):
    if facts["torch"].get("status") != "ok":
        return []
    pyg = facts["pyg"]
    smoke = facts["sampling"]["smoke"]
    found = []
    for backend, result in smoke.items():
        module = "pyg_lib" if backend == "pyg-lib" else "torch_sparse"
        if facts["extensions"][module].get("status") != "ok" or result.get("status") in ("not-run", "deadline"):
            continue  # never sampled: the probe ran out of time first (probe-deadline says so)
        if not result.get("passed"):
            evidence = {"backend": backend, "result": result}
            finding_id = "neighbor-smoke-failed"
            error = result.get("error")
            if error and classify_import_error(module, error)[0] == "ext-operator-missing":
                finding_id = "ext-operator-missing"
                evidence["module"] = module
            found.append(finding(finding_id, evidence,
                                 fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
    if pyg.get("status") != "ok" or pyg_shadowing(facts):
        return found  # a stray copy's verdict would send the user to install pyg-lib for nothing
    backend = pyg.get("neighbor_backend")
    if backend is None:
        found.append(finding("neighbor-sampling-unavailable", {
            "predicted_error": "ImportError: 'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'",
            "raised_at": "the first next(iter(loader)), not at NeighborLoader construction",
            "pyg_lib": extension_reason(facts, "pyg_lib"),
            "torch_sparse": extension_reason(facts, "torch_sparse"),
            "WITH_PYG_LIB": pyg["flags"].get("WITH_PYG_LIB"),
            "WITH_TORCH_SPARSE": pyg["flags"].get("WITH_TORCH_SPARSE"), "pyg_lib_index": pyg_lib_index(facts)},
            fix=pip_fix(facts, ["pyg_lib"])))
    return found


def rule_feature_verdicts(facts, options):
    """Features beyond plain neighbour sampling, named with what unlocks them."""
    if facts["pyg"].get("status") != "ok" or pyg_shadowing(facts):
        return []  # see rule_neighbor_sampling
    features = facts["sampling"]["features"]
    found = []
    pyg_lib_fix, index = pip_fix(facts, ["pyg_lib"]), pyg_lib_index(facts)
    if features["neighbor"]:
        if not features["induced"]:
            found.append(finding("induced-sampling-unavailable", {
                "neighbor_backend": facts["sampling"]["neighbor_backend"],
                "torch_sparse": extension_reason(facts, "torch_sparse"),
                "affects": "NeighborLoader(subgraph_type='induced'), HGTLoader, ShaDowKHopSampler"},
                fix=pip_fix(facts, ["torch_scatter", "torch_sparse"])))
        if not features["weighted"]:
            found.append(finding("weighted-sampling-unavailable", {
                "affects": "NeighborLoader(weight_attr=...)", "needs": "pyg-lib >= 0.3.0",
                "pyg_lib": extension_reason(facts, "pyg_lib"), "pyg_lib_index": index}, fix=pyg_lib_fix))
        if not features["temporal_edge"]:
            found.append(finding("temporal-sampling-unavailable", {
                "affects": "NeighborLoader(time_attr=...) on node time (needs pyg-lib) and edge time "
                           "(needs a pyg-lib whose neighbor_sample takes edge_time)",
                "node_level": features["temporal_node"], "edge_level": features["temporal_edge"],
                "pyg_lib": extension_reason(facts, "pyg_lib"), "pyg_lib_index": index}, fix=pyg_lib_fix))
    if not features["metis"]:
        metis = facts["sampling"]["probe"].get("torch_sparse_metis")
        found.append(finding("metis-unavailable", {
            "affects": "ClusterData, ClusterLoader, torch_geometric.distributed.Partitioner",
            "pyg_lib_partition": facts["sampling"]["probe"].get("pyg_lib_partition", False),
            "torch_sparse_metis": metis,
            "predicted_error": "ImportError: 'ClusterData' requires either 'pyg-lib' or 'torch-sparse'",
            "pyg_lib_index": index}, fix=pyg_lib_fix))
    if not features["distributed"]:
        found.append(finding("distributed-sampling-unavailable", {
            "needs": "pyg-lib >= 0.4.0 with operators %s" % ", ".join(DIST_SAMPLER_OPS),
            "present": facts["sampling"]["probe"].get("dist_ops") or {},
            "symptom": "AttributeError: '_OpNamespace' 'pyg' object has no attribute 'dist_neighbor_sample' "
                       "(sync mode) or a silent hang (async_sampling=True)", "pyg_lib_index": index},
            fix=pyg_lib_fix))
    cuda = facts.get("cuda") or {}
    gpus = len(((cuda.get("visible_devices") or {}).get("visible")) or [])
    if gpus and not features["gpu"]:
        # cuGraph-PyG's wheels exist per CUDA major; follow torch's, else the driver's.
        major = parse_version(cuda.get("built_with") or (cuda.get("nvml") or {}).get("cuda_driver_version"))[0]
        package = "cugraph-pyg-cu%d" % (major if major in (12, 13) else 13)
        found.append(finding("gpu-sampling-needs-cugraph", {
            "visible_gpus": gpus, "torch_cuda": cuda.get("built_with"),
            "sampling_device": "cpu",
            "pyg_lib_cuda_kernels": facts["sampling"]["probe"].get("pyg_lib_cuda_sampling"),
            "note": "NeighborLoader's NeighborSampler samples on the CPU (pyg-lib or torch-sparse); batches are "
                    "moved to the GPU afterwards (batch.to('cuda')). Sampling on the GPU means cuGraph-PyG's "
                    "loaders and stores instead of PyG's."},
            # cuGraph-PyG pins torch-geometric<2.8 in its conda recipe but not in its wheels' metadata, so pip
            # would not warn: the fix makes a separate environment instead of installing into this one.
            fix="python3 -m venv ~/.venvs/cugraph-pyg && ~/.venvs/cugraph-pyg/bin/python -m pip install "
                "--extra-index-url=https://pypi.nvidia.com %s 'torch_geometric>=2.5,<2.8'  # unrun here; only if "
                "CPU sampling is the bottleneck: cuGraph-PyG samples on the GPU and needs PyG < 2.8, so not in "
                "this environment" % package))
    return found


def rule_legacy_extensions(facts, options):
    found = []
    for dist in ("torch-cluster", "torch-spline-conv"):
        package = facts["distributions"]["packages"][dist]
        if package["installed"]:
            found.append(finding("legacy-extension-ignored", {
                "distribution": dist, "version": package["version"],
                "pyg_version": pyg_version(facts),
                "replacement": "pyg-lib: PyG 2.8's typing.py and install docs say >= 0.6.0, the torch-cluster "
                               "deprecation notice says >= 0.7.0 (sources disagree)"},
                fix=with_pip(facts, legacy_removal(facts, dist))))
    return found



def legacy_removal(facts, dist):
    """Remove the legacy extension, then install pyg-lib (it has their operators) where that is one line."""
    removal = pip(facts, ["uninstall", "-y", dist])
    pyg_lib = install_line(facts, ["pyg_lib"])
    return removal if pyg_lib is None else "%s && %s" % (removal, pyg_lib)

def rule_duplicate_distributions(facts, options):
    found = []
    distributions = facts["distributions"]
    for name, package in distributions["packages"].items():
        locations = sorted(set(r["location"] for r in package["installs"]))
        if len(package["installs"]) > 1:
            found.append(finding("duplicate-distribution", {
                "distribution": name, "versions": [r["version"] for r in package["installs"]],
                "locations": locations},
                fix=with_pip(facts, pip(facts, ["uninstall", "-y", name])
                             + "  # repeat until none is left, then reinstall one copy")))
    for module, claimants in distributions["module_claims"].items():
        found.append(finding("duplicate-distribution", {"module": module, "distributions": claimants},
                             fix=with_pip(facts, pip(facts, ["uninstall", "-y"] + (
                                 [c for c in claimants if c != "torch-geometric"] or [claimants[-1]])))))
    return found


def rule_conda_pip_mixed(facts, options):
    distributions = facts["distributions"]
    if not distributions["conda_prefix"]:
        return []
    pip_owned = [name for name, package in distributions["packages"].items()
                 if name in ("torch", "torch-geometric", "pyg-lib", "torch-sparse", "torch-scatter")
                 and any(r.get("installer") == "pip" for r in package["installs"])]
    conda_owned = distributions["conda_packages"]
    if pip_owned and conda_owned:
        return [finding("conda-pip-mixed", {"pip": pip_owned, "conda": conda_owned},
                        fix="pick one installer for torch and the PyG stack; e.g. in a fresh env: "
                            "conda create -n pyg python=3.11 && conda activate pyg && pip install torch "
                            "torch_geometric")]
    return []


def rule_pyg_defects(facts, options):
    source = facts["pyg_source"]
    if not source.get("found"):
        return []
    found = []
    version = pyg_version(facts)
    if source["stack_level_typo"]:
        found.append(finding("pyg-dist-loader-typeerror", {
            "pyg_version": version, "locations": source["stack_level_typo"],
            "error": "TypeError: 'stack_level' is an invalid keyword argument for warn()"},
            fix="do not use DistNeighborLoader/DistLinkNeighborLoader on this PyG; train with one "
                "NeighborLoader per DDP rank instead: " + script_command("ddp_neighbor_training.py", "--help")))
    if source.get("distributed_present") and version and parse_version(version)[:2] >= (2, 7):
        found.append(finding("pyg-distributed-deprecated", {"pyg_version": version},
                             fix=script_command("ddp_neighbor_training.py", "--help")
                             + "  # DDP + NeighborLoader; multi-node GPU at scale: cuGraph-PyG"))
    torch_version = facts["torch_build"].get("version")
    if (source.get("partition_saves_defaultdict") and torch_version
            and parse_version(torch_version)[:2] >= (2, 6)):
        found.append(finding("pyg-from-partition-edge-feats", {
            "pyg_version": version, "torch": torch_version,
            "error": "UnpicklingError: ... Can only SETITEMS for dict, collections.OrderedDict, "
                     "collections.Counter, but got <class 'collections.defaultdict'>"},
            fix=script_command("check_partition.py", "PARTITION_ROOT", python=interpreter(facts))
            + "  # names the unloadable parts and the rewrite"))
    return found
