"""Shared fixtures: run the checker the way an agent does and validate its JSON."""

import functools
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The fast tier (tests/fast/) imports the tools' modules in this process: scripts/ is importable, and no
# __pycache__ is written beside the scripts (every tool keeps the skill's folder free of it).
sys.dont_write_bytecode = True
if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))
CHECKER = ROOT / "scripts" / "check_sampling_backends.py"
SCHEMA_FILE = ROOT / "scripts" / "check_sampling_backends.schema.json"
# A real CUDA 13.0 build of torch (2.14.1+cu130, no driver here) that .ci/run prepares and caches;
# the GPU and install-truth tests point --python at it.
CUDA_PYTHON_VARIABLE = "SCALABLE_DISTRIBUTED_CUDA_PYTHON"
DEFAULT_CUDA_PYTHON = str(Path.home() / ".cache" / "pyg-skill-ci" / "cu130" / "bin" / "python")



@pytest.fixture(scope="session")
def short_temp_root():
    """Where the runs' temp dirs go: a short path under /tmp, removed when the session ends. pytest's own
    tmp_path can be too long for a tool's scratch folder (under a TMPDIR longer than multiprocessing's socket
    paths allow, the runner puts its scratch folder in /tmp), and a test that watches the TMPDIR it gave a
    tool must see that folder appear there."""
    import shutil
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="sdt-", dir="/tmp"))
    yield root
    shutil.rmtree(str(root), ignore_errors=True)


@pytest.fixture
def temp_dir(short_temp_root):
    """A new empty folder to be one run's TMPDIR (see short_temp_root)."""
    import tempfile
    return Path(tempfile.mkdtemp(dir=str(short_temp_root)))


class CheckerRun:
    def __init__(self, returncode, stdout, stderr, seconds):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds
        self.json = None

    def ids(self):
        return [f["id"] for f in self.json["findings"]]

    def findings(self, finding_id):
        return [f for f in self.json["findings"] if f["id"] == finding_id]

    def only(self, finding_id):
        found = self.findings(finding_id)
        assert len(found) == 1, (finding_id, self.ids())
        return found[0]


@functools.lru_cache(maxsize=None)
def load_schema():
    return json.loads(SCHEMA_FILE.read_text())


@pytest.fixture(scope="session")
def output_schema():
    return load_schema()


def validate(document, schema):
    import jsonschema
    jsonschema.validate(document, schema)
    # The contract also fixes the order of the top-level keys.
    assert list(document) == schema["required"]


def clean_env(extra=None, drop=()):
    """The test's environment without launcher variables that would change findings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "TORCHELASTIC_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                         "MASTER_PORT", "NODE_RANK", "GROUP_RANK", "PYTHONPATH",
                         # the active environment decides which interpreter is probed
                         "VIRTUAL_ENV", "CONDA_PREFIX") and k not in drop}
    env.update(extra or {})
    return env


# Flags that print no facts document, so --full means nothing to them.
NO_FACTS_FLAGS = ("--schema", "--list-findings", "--explain", "--help", "-h", "--wheels")


def invoke_checker(*args, env=None, python=None, timeout=180, expect_json=True, cwd=None, preexec_fn=None,
                   detail="full"):
    """Run the checker as an agent does; -> CheckerRun whose .json is validated against the schema.

    detail="full" (the default) adds --full: the compact document stays under its character budget by
    trimming details first, and how much it trims depends on this machine's paths (a long HOME makes
    every interpreter path longer), so tests that read evidence or facts read the full document.
    detail="compact" runs exactly the command given, for the tests of the compact document itself."""
    args = [str(a) for a in args]
    if detail == "full" and "--full" not in args and not set(args) & set(NO_FACTS_FLAGS):
        args.append("--full")
    command = [str(python or sys.executable), str(CHECKER)] + args
    started = time.time()
    completed = subprocess.run(command, capture_output=True, timeout=timeout,
                               env=env if env is not None else clean_env(), cwd=cwd,
                               stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    stdout = completed.stdout.decode("utf-8", "replace")
    result = CheckerRun(completed.returncode, stdout, completed.stderr.decode("utf-8", "replace"),
                        time.time() - started)
    if expect_json:
        # Exactly one JSON document on stdout, nothing before or after it.
        result.json = strict_json(completed.stdout)
        if "schema_version" in result.json:
            validate(result.json, load_schema())
            assert result.json["exit_code"] == completed.returncode
    return result


def strict_json(stdout_bytes):
    """Parse stdout as strict parsers (serde_json, Go, TextDecoder fatal) would, or fail the test.

    Strict UTF-8, no unpaired surrogate escapes (json.loads decodes a valid
    pair into one character, so any surrogate left in a string was unpaired),
    no NaN/Infinity, exactly one document.
    """
    text = stdout_bytes.decode("utf-8", errors="strict")

    def reject_constant(name):
        raise ValueError("non-standard JSON constant %s" % name)
    document = json.loads(text, parse_constant=reject_constant)
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            assert not re.search("[\ud800-\udfff]", value), "unpaired surrogate in %r" % value[:200]
    return document


class ToolRun:
    """A finished tool process: exit code, stderr, and its stdout parsed as strict parsers parse it."""

    def __init__(self, process, elapsed, args=None):
        self.args, self.returncode, self.elapsed = args, process.returncode, elapsed
        self.stderr = process.stderr.decode("utf-8", "replace")
        self.stdout = process.stdout.decode("utf-8", "replace")
        self.document = strict_json(process.stdout) if process.stdout.strip() else None

    @property
    def ids(self):
        return [f["id"] for f in self.document["findings"]]

    def finding(self, finding_id):
        matches = [f for f in self.document["findings"] if f["id"] == finding_id]
        assert matches, "no %s in %s\nstderr: %s" % (finding_id, self.ids, self.stderr[-2000:])
        return matches[0]

    def error_finding(self, finding_id, **evidence):
        """The run failed its gate (exit 1, ok false) on `finding_id`, an error with a fix, whose evidence
        holds each of `evidence`'s key/values; -> that finding."""
        assert self.returncode == 1 and self.document["ok"] is False, (self.returncode, self.ids)
        matches = [f for f in self.document["findings"] if f["id"] == finding_id
                   and all(f["evidence"].get(key) == value for key, value in evidence.items())]
        assert matches, "%s not found with %s in %s" % (finding_id, evidence, self.document["findings"])
        assert matches[0]["severity"] == "error" and matches[0]["fix"], matches[0]
        return matches[0]


def plain_run(command, env=None, cwd=None, timeout=300):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env(), cwd=cwd, stdin=subprocess.DEVNULL)


def invoke_tool(script, *args, env=None, cwd=None, python=None, timeout=300):
    """Run any of the three tools (a path under scripts/) -> CheckerRun with .json parsed strictly."""
    command = [str(python or sys.executable), str(ROOT / "scripts" / script)] + [str(a) for a in args]
    started = time.time()
    completed = subprocess.run(command, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                               env=env if env is not None else clean_env(), cwd=cwd)
    result = CheckerRun(completed.returncode, completed.stdout.decode("utf-8", "replace"),
                        completed.stderr.decode("utf-8", "replace"), time.time() - started)
    result.json = strict_json(completed.stdout)
    if isinstance(result.json, dict) and "exit_code" in result.json:
        assert result.json["exit_code"] == completed.returncode
    return result


@pytest.fixture
def run_checker():
    """run_checker(*args, env=..., python=..., timeout=...) -> CheckerRun with .json validated."""
    return invoke_checker


# What enables each kind of skipped test, and what it costs: the skip texts and README's
# "Skipped tests" section name the same commands.
ENABLE = {
    "python": "pyenv install {minor} (a source build of CPython: about 4 min on 2 cores), or put any "
              "python{minor} on PATH",
    "backend": "~/.venvs/scalable-distributed/bin/python -m pip install scipy wheel && "
               "~/.venvs/scalable-distributed/bin/python -m pip install --force-reinstall --no-deps --no-cache-dir "
               "--no-build-isolation torch-scatter==2.1.2 && ~/.venvs/scalable-distributed/bin/python -m pip install "
               "--force-reinstall --no-deps --no-cache-dir --no-build-isolation torch-sparse==0.6.18 "
               "(about 20 min on 2 cores; README: A real sampling backend locally)",
    "cuda": "python3 -m venv ~/.cache/pyg-skill-ci/cu130 && ~/.cache/pyg-skill-ci/cu130/bin/python -m pip install "
            "torch==2.14.1 torch_geometric==2.8.1 numpy scipy (about 3 GB from PyPI), or set "
            "SCALABLE_DISTRIBUTED_CUDA_PYTHON to such a venv's bin/python",
    "wheel-cache": "~/.venvs/scalable-distributed/bin/python -m pip install --no-deps --no-build-isolation "
                   "torch-scatter==2.1.2 torch-sparse==0.6.18 (the same build, but it keeps pip's wheel cache; about "
                   "20 min on 2 cores, as .ci/run does)",
    "uv": "python3 -m pip install uv (seconds; uv must be on PATH, or in ~/.cache/pyg-skill-ci/bin as .ci/run puts it)",
    "strace": "apt-get install -y strace (seconds)",
    "netns": "apt-get install -y iproute2 (seconds), and run the tests as root",
}


def python_candidates(minor):
    """Every CPython `minor` ("3.12") this machine offers: pyenv's ($PYENV_ROOT, then ~/.pyenv), then PATH."""
    import shutil
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    seen, found = set(), []
    for root in [r for r in roots if r]:
        for candidate in sorted(Path(root, "versions").glob("%s.*/bin/python" % minor)):
            if candidate.resolve() not in seen:
                seen.add(candidate.resolve())
                found.append(candidate)
    on_path = shutil.which("python%s" % minor)
    if on_path and Path(on_path).resolve() not in seen:
        found.append(Path(on_path))
    return found


def pyenv_python(minor, with_torch=False):
    """A CPython `minor` ("3.12") that has (or lacks) torch, from pyenv or PATH; skips, naming the
    command that installs one, when there is none."""
    for candidate in python_candidates(minor):
        has_torch = subprocess.run([str(candidate), "-c", "import torch"], capture_output=True).returncode == 0
        if has_torch == with_torch:
            return candidate
    pytest.skip("no CPython %s %s torch in $PYENV_ROOT, ~/.pyenv or on PATH; enable: %s"
                % (minor, "with" if with_torch else "without", ENABLE["python"].format(minor=minor)))


def sampling_backend_present():
    """True when PyG in this interpreter can sample neighbours (pyg-lib or torch-sparse)."""
    code = ("import torch_geometric.typing as T, sys; "
            "sys.exit(0 if (T.WITH_PYG_LIB or T.WITH_TORCH_SPARSE) else 1)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


@pytest.fixture(scope="session")
def neighbor_backend():
    """Tests of the real happy path. CI installs torch-sparse, so there a missing backend fails."""
    if not sampling_backend_present():
        message = ("neighbor-sampling-unavailable: no pyg-lib or torch-sparse in this interpreter; enable: "
                   + ENABLE["backend"])
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def make_linked_venv(target, exclude=()):
    """A real venv whose site-packages links to this one's entries, minus `exclude` prefixes.

    This gives the probed interpreter the very torch (and PyG) CI installed,
    with chosen packages truly absent, in a second and no more.
    """
    import sysconfig
    base_python = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(target)], check=True)
    source = Path(sysconfig.get_paths()["purelib"])
    version = "python%d.%d" % sys.version_info[:2]
    destination = Path(target) / "lib" / version / "site-packages"
    for entry in source.iterdir():
        name = entry.name.lower().replace("-", "_")
        if any(name.startswith(prefix) for prefix in exclude) or entry.name.startswith("_distutils_hack"):
            continue
        if entry.name.endswith(".pth"):
            continue
        (destination / entry.name).symlink_to(entry)
    return Path(target) / "bin" / "python"


@pytest.fixture(scope="session")
def venv_factory(tmp_path_factory):
    made = {}

    def make(name, exclude=()):
        if name not in made:
            made[name] = make_linked_venv(tmp_path_factory.mktemp(name) / "venv", exclude)
        return made[name]
    return make


def assert_help_names(script, texts):
    """`script --help` exits 0 and names every one of `texts` (flags, the exit codes, ...)."""
    process = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert process.returncode == 0
    missing = [text for text in texts if text not in process.stdout]
    assert not missing, missing


def assert_lists_ids_with_anchors(script, prefix, emitted):
    """`script --list-findings`: every id carries the tool's prefix and its docs anchor, and every id the
    test runs `emitted` is listed."""
    process = subprocess.run([sys.executable, str(script), "--list-findings"], capture_output=True, text=True,
                             timeout=30)
    assert process.returncode == 0
    listed = {entry["id"]: entry for entry in json.loads(process.stdout)}
    for finding_id, entry in listed.items():
        assert finding_id.startswith(prefix)
        assert entry["docs"] == "references/troubleshooting.md#" + finding_id
        assert entry["severity"] in ("error", "warning", "info")
    assert set(emitted) <= set(listed), set(emitted) - set(listed)


def assert_usage_refusal(returncode, stderr, document, finding_id):
    """Exit 2, one clean stderr line, and a usage-error document naming only `finding_id`."""
    assert returncode == 2, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    assert document["exit_code"] == 2 and document["ok"] is False and document["gates"] == {}
    assert [f["id"] for f in document["findings"]] == [finding_id]


def fifo_blocked_child(parent):
    """The pid of a child of process `parent` one of whose threads waits in open() for a FIFO's writer
    (Linux's wchan says wait_for_partner), or None: read from /proc, so looking does not end the wait, as
    opening the FIFO's other end would."""
    import glob
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as handle:
                if int(handle.read().rsplit(")", 1)[1].split()[1]) != parent:  # after the state: the parent's pid
                    continue
            for wchan in glob.glob(os.path.join(os.path.dirname(stat), "task", "*", "wchan")):
                with open(wchan) as handle:
                    if handle.read().strip() == "wait_for_partner":
                        return int(os.path.basename(os.path.dirname(stat)))
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
    return None


def signal_when_ready(command, signum, ready="reading ", timeout=30):
    """Start `command` (a tool wrapped so that it holds a stage and says `ready...` on stderr when it gets there),
    send `signum` once it says so, and wait; -> (process, stdout bytes, stderr bytes)."""
    import subprocess
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(),
                               stdin=subprocess.DEVNULL)

    def said_ready():
        line = process.stderr.readline().decode()
        assert line.startswith(ready), "the tool never reached the stage it holds: %r" % line
        return True
    stdout, stderr = signal_when(process, said_ready, signum, timeout=timeout)
    return process, stdout, stderr


def signal_when(process, ready, signum, wait=120, settle=0.0, timeout=60):
    """Send `signum` to a running tool once ready() holds (polled; or the tool ended, or `wait` seconds passed),
    `settle` seconds later, and wait for it; -> (stdout, stderr). Nothing it started outlives the test."""
    try:
        deadline = time.time() + wait
        while time.time() < deadline and process.poll() is None and not ready():
            time.sleep(0.05)
        time.sleep(settle)
        process.send_signal(signum)
        return process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()


def interrupted_finding(process, stdout, signum, finding_id):
    """An interrupted run's document: exit and exit_code 128 + signal, status interrupted, and its one
    interrupted finding naming the signal (returned)."""
    import signal
    document = strict_json(stdout)
    assert process.returncode == document["exit_code"] == 128 + signum
    assert document["status"] == "interrupted" and document["ok"] is False
    [stopped] = [f for f in document["findings"] if f["id"] == finding_id]
    assert stopped["evidence"]["signal"] == signal.Signals(signum).name
    return document, stopped


def load_modules(names):
    """Modules of scripts/ as one namespace (imported without writing bytecode), to replay a tool's rules
    on edited facts."""
    import importlib
    import types
    scripts = str(ROOT / "scripts")
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        if scripts not in sys.path:
            sys.path.insert(0, scripts)
        modules = [importlib.import_module(name) for name in names]
    finally:
        sys.dont_write_bytecode = writes_bytecode
    namespace = types.SimpleNamespace()
    for module in modules:
        namespace.__dict__.update((k, v) for k, v in vars(module).items() if not k.startswith("__"))
    return namespace


@functools.lru_cache(maxsize=None)
def skill_tools():
    """(entry file without .py, package) of every tool: the one list, scripts/diagnostics_core/tools.py."""
    return tuple(load_modules(["diagnostics_core.tools"]).TOOLS)


@functools.lru_cache(maxsize=None)
def load_checker():
    """The checker's modules (stdlib only): the sampling_checker package and the shared library."""
    return load_modules(CHECKER_MODULES)


CHECKER_MODULES = ("diagnostics_core.wheels", "diagnostics_core.netenv", "sampling_checker.tables",
                   "sampling_checker.parsing", "sampling_checker.findings", "sampling_checker.static_facts",
                   "sampling_checker.interpreter", "sampling_checker.probe", "sampling_checker.install",
                   "sampling_checker.gpu_facts", "sampling_checker.assemble", "sampling_checker.rules", "sampling_checker.render",
                   "sampling_checker.cli")


def tree_state(*roots, skip=()):
    """{path: (kind, size, mtime)} of everything under `roots` (a file root stands for itself), not
    descending into folders named in `skip`."""
    state = {}
    for root in roots:
        root = str(root)
        if not os.path.isdir(root):
            if os.path.lexists(root):
                info = os.lstat(root)
                state[root] = ("file", info.st_size, info.st_mtime_ns)
            continue
        for path, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in skip]
            for name in dirs + files:
                full = os.path.join(path, name)
                info = os.lstat(full)
                state[full] = ("dir" if name in dirs else "file", info.st_size, info.st_mtime_ns)
    return state


# Syscalls that change the file system when they succeed.
CHANGING_CALLS = re.compile(r"\b(mkdir|mkdirat|rmdir|unlink|unlinkat|rename|renameat2?|link|linkat|symlink|"
                            r"symlinkat|creat|truncate|chmod|fchmodat|chown|fchownat|utimensat|mknod|mknodat)\(")
OPEN_FOR_WRITING = re.compile(r"\bopen(at|at2)?\(.*O_(WRONLY|RDWR|CREAT|TRUNC)")
SOCKET_CALLS = re.compile(r"\b(socket|socketpair|connect|bind|listen|sendto|sendmsg)\(")


def traced_run(command, env, cwd, watched, timeout=300):
    """Run `command` under strace -f; -> (completed, problems) where problems lists every
    successful file/dir creation, change or write-open outside /dev and /proc, every socket call,
    and every change under the `watched` paths (HOME, cwd, TMPDIR, inputs)."""
    import shutil
    import tempfile
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed; enable: " + ENABLE["strace"])
    before = tree_state(*watched)
    with tempfile.TemporaryDirectory() as scratch:  # the trace lives outside every watched path
        trace = os.path.join(scratch, "trace")
        completed = subprocess.run(["strace", "-f", "-qq", "-o", trace, "-e", "trace=file,network"]
                                   + [str(c) for c in command], capture_output=True, timeout=timeout,
                                   env=env, cwd=str(cwd), stdin=subprocess.DEVNULL)
        with open(trace, errors="replace") as handle:
            lines = handle.read().splitlines()
    problems = []
    for line in lines:
        failed = re.search(r"= -1 E", line) is not None
        if SOCKET_CALLS.search(line):
            problems.append(line)
        elif failed or re.search(r'"/(dev|proc)/', line):
            continue
        elif CHANGING_CALLS.search(line) or OPEN_FOR_WRITING.search(line):
            problems.append(line)
    after = tree_state(*watched)
    changed = sorted(set(before.items()) ^ set(after.items()))
    problems.extend("changed: %s %s" % (path, kind) for path, kind in changed)
    return completed, problems


@pytest.fixture
def token():
    """A marker in the tool's environment; every process it (or its children) starts inherits it; what
    still carries it at the end of the test is ended (support/hostile_fakes.py)."""
    from support import hostile_fakes
    value = uuid.uuid4().hex
    yield value
    hostile_fakes.end_survivors(value)


@pytest.fixture(scope="session")
def partition_folders(tmp_path_factory):
    """PyG's own Partitioner output for every case support/partition_writer.py writes, written once per test
    run (METIS-free, but seconds of partitioning a case) and shared: tests copy a case before damaging it.
    -> {"out": folder, "cases": {case: root}, "verdicts": PyG's from_partition outcome per root}."""
    out = tmp_path_factory.mktemp("partitions")
    process = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "partition_writer.py"), "write",
                              str(out)], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    return dict(json.loads(process.stdout), out=str(out))


def pytest_configure(config):
    # The registry test (tests/test_contract_every_tool.py) reads these marks: every finding id of every tool is
    # reproduced by a test that marks it and asserts it in that tool's JSON.
    config.addinivalue_line("markers", "finding(*ids): the finding ids this test reproduces and asserts")
