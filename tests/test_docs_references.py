"""The skill's documentation, tested like code (the parts that run code; the pure text checks, SKILL.md's
frontmatter, size and links among them, are in tests/fast/test_docs_*.py):
- every torch_geometric.* dotted name resolves in the installed PyG, and every
  keyword argument shown in a call to a PyG class or function exists in its
  signature;
- blocks marked <!-- runnable --> run on CPU in a temporary directory (those
  marked needs-neighbor-backend skip, naming the checker finding id, when no
  sampling backend works);
- troubleshooting.md has exactly one section per finding id the scripts can emit,
  and every script command in the docs uses a real script and flag;
- a few claims the docs make about PyG's behaviour are replayed against it.
"""

import ast
import builtins
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ENABLE, skill_tools, tree_state
from support import warm_python
from support.docs_text import (DOCS, EXAMPLES, NEEDS_BACKEND, REFERENCES, REPO, SKILL, TROUBLESHOOTING,  # noqa: F401
                               all_blocks, fenced_blocks, finding_sections, inline_code_spans, python_blocks,
                               read, relative, runnable_blocks)

CHECKER_SCRIPTS = tuple(script + ".py" for script, _ in skill_tools())  # the one list of tools

SUBPROCESS_TIMEOUT = 240
CHILD_ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="ignore")


def repo_paths():
    """Every path in the checkout. A block adding one wrote into the repository; files other people edit
    meanwhile (a shared working tree) change but do not appear, so only additions count."""
    return set(tree_state(REPO, skip=(".git", ".venv", "__pycache__", ".pytest_cache")))


@pytest.fixture(scope="module")
def neighbor_backend():
    """(available, why) as the skill's own gate reports it."""
    script = os.path.join(REPO, "scripts", "check_sampling_backends.py")
    process = subprocess.run([sys.executable, script, "--require-neighbor-backend"],
                             capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    if process.returncode in (0, 1):
        document = json.loads(process.stdout)
        ids = [f["id"] for f in document["findings"] if f["severity"] == "error"]
        return process.returncode == 0, "neighbor-sampling-unavailable (checker findings: %s)" % ids
    probe = subprocess.run(
        [sys.executable, "-c", "import torch_geometric.typing as T; "
                               "print(T.WITH_PYG_LIB or T.WITH_TORCH_SPARSE)"],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    return probe.stdout.strip() == "True", ("neighbor-sampling-unavailable (WITH_* flags are False); enable: "
                                            + ENABLE["backend"])


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.id)
def test_runnable_block_runs_on_cpu(block, tmp_path, neighbor_backend):
    if block.note == NEEDS_BACKEND and not neighbor_backend[0]:
        pytest.skip(neighbor_backend[1])
    before = repo_paths()
    process = run_python(block.code, tmp_path, name="snippet.py")
    assert process.returncode == 0, "%s failed:\n%s" % (block.id, process.stderr[-4000:])
    added = sorted(repo_paths() - before)
    assert not added, "%s wrote into the repository: %s" % (block.id, added)


# ---------------------------------------------------------------------------
# PyG names and keyword arguments
# ---------------------------------------------------------------------------

DOTTED_NAME = re.compile(r"\btorch_geometric(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
SHORT_NAME_MODULES = (
    "torch_geometric.loader", "torch_geometric.data", "torch_geometric.distributed",
    "torch_geometric.profile", "torch_geometric.sampler", "torch_geometric.nn",
    "torch_geometric.distributed.partition", "torch_geometric.distributed.dist_context",
    "torch_geometric.distributed.rpc",
)


def resolve_dotted(name):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def dotted_names():
    return sorted({match.rstrip(".") for path in DOCS for match in DOTTED_NAME.findall(read(path))})


def test_every_torch_geometric_dotted_name_resolves():
    names = dotted_names()
    assert len(names) >= 10
    unresolved = []
    for name in names:
        try:
            resolve_dotted(name)
        except (ImportError, AttributeError) as error:
            unresolved.append("%s (%s)" % (name, error))
    assert not unresolved, unresolved


def short_names():
    """Public PyG names an undotted call in the docs may refer to."""
    table = {}
    for module_name in SHORT_NAME_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]:
            obj = getattr(module, name, None)
            if obj is not None and (inspect.isclass(obj) or inspect.isfunction(obj)):
                table.setdefault(name, obj)
    return table


def methods_by_name(table):
    methods = {}
    for obj in table.values():
        if inspect.isclass(obj):
            for name, member in inspect.getmembers(obj):
                if not name.startswith("__") and callable(member):
                    methods.setdefault(name, []).append(member)
    return methods


# Keyword arguments these public wrappers forward to a key class via **kwargs.
FORWARDED_KEYWORDS = {
    ("FeatureStore", "put_tensor"): "TensorAttr", ("FeatureStore", "get_tensor"): "TensorAttr",
    ("FeatureStore", "remove_tensor"): "TensorAttr", ("FeatureStore", "get_tensor_size"): "TensorAttr",
    ("GraphStore", "put_edge_index"): "EdgeAttr", ("GraphStore", "get_edge_index"): "EdgeAttr",
    ("GraphStore", "remove_edge_index"): "EdgeAttr",
}


def accepted_keywords(obj):
    """Keyword names `obj(...)` accepts, or None when it takes arbitrary ones."""
    import dataclasses

    import torch_geometric.data as pyg_data

    def named(params):
        return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}

    if inspect.isclass(obj):
        if issubclass(obj, (pyg_data.Data, pyg_data.HeteroData)):
            return None  # any keyword becomes an attribute
        if dataclasses.is_dataclass(obj):
            return set(inspect.signature(obj).parameters)
        inits = [vars(k)["__init__"] for k in obj.__mro__ if k is not object and "__init__" in vars(k)]
        own = list(inspect.signature(inits[0]).parameters.values())
        if not any(p.kind == p.VAR_KEYWORD for p in own):
            return named(own)
        # **kwargs travel up the initialiser chain (e.g. to torch's DataLoader).
        return set().union(*(named(inspect.signature(init).parameters.values()) for init in inits))
    try:
        params = list(inspect.signature(obj).parameters.values())
    except ValueError:  # a builtin without a signature (dict.update on a PyG class): nothing to check
        return None
    names = named(params)
    if any(p.kind == p.VAR_KEYWORD for p in params):
        owner = getattr(obj, "__qualname__", "").split(".")[0]
        forwarded = FORWARDED_KEYWORDS.get((owner, obj.__name__))
        if forwarded is None:
            return None
        names |= set(inspect.signature(getattr(pyg_data, forwarded)).parameters)
    return names


class CallChecker(ast.NodeVisitor):
    """Resolves calls in one code block to PyG objects and checks their keywords."""

    def __init__(self, table, methods, where):
        self.table, self.methods, self.where = table, methods, where
        self.aliases, self.instances, self.local_bases = {}, {}, {}
        self.checked, self.problems = [], []

    # names -------------------------------------------------------------
    def visit_Import(self, node):
        for alias in node.names:
            if alias.name.startswith("torch_geometric"):
                self.aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])

    def visit_ImportFrom(self, node):
        if node.module and node.module.startswith("torch_geometric"):
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = "%s.%s" % (node.module, alias.name)

    def visit_ClassDef(self, node):
        for base in node.bases:
            resolved = self.resolve(base)
            if inspect.isclass(resolved):
                self.local_bases[node.name] = resolved
                break
        self.generic_visit(node)

    def visit_Assign(self, node):
        targets, values = node.targets[0], node.value
        pairs = (list(zip(targets.elts, values.elts))
                 if isinstance(targets, ast.Tuple) and isinstance(values, ast.Tuple)
                 else [(targets, values)])
        for target, value in pairs:
            if isinstance(target, ast.Name) and isinstance(value, ast.Call):
                klass = self.resolve(value.func)
                if inspect.isclass(klass):
                    self.instances[target.id] = klass
                elif inspect.ismethod(klass) and inspect.isclass(getattr(klass, "__self__", None)):
                    self.instances[target.id] = klass.__self__  # classmethod constructors
        self.generic_visit(node)

    def resolve(self, node):
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return resolve_dotted(self.aliases[node.id])
            if node.id in self.instances:
                return self.instances[node.id]
            if node.id in self.local_bases:
                return self.local_bases[node.id]
            if node.id in self.table and not hasattr(builtins, node.id):
                return self.table[node.id]
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    # calls -------------------------------------------------------------
    def visit_Call(self, node):
        keywords = [k.arg for k in node.keywords if k.arg is not None]
        if keywords:
            candidates = []
            target = self.resolve(node.func)
            if target is not None and getattr(target, "__module__", "").startswith("torch_geometric"):
                candidates = [target]
            elif target is None and isinstance(node.func, ast.Attribute) and self.unknown_root(node.func):
                candidates = self.methods.get(node.func.attr, [])
            if candidates:
                self.check(candidates, keywords, ast.unparse(node.func))
        self.generic_visit(node)

    def unknown_root(self, node):
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id not in self.aliases and node.id not in (
            "torch", "dist", "mp", "F", "os", "sys", "np", "warnings", "json", "glob", "socket")

    def check(self, candidates, keywords, label):
        accepted = [accepted_keywords(c) for c in candidates]
        if any(a is None for a in accepted):
            return
        for keyword in keywords:
            self.checked.append((label, keyword))
            if not any(keyword in a for a in accepted):
                self.problems.append("%s: %s(%s=...) not in %s" % (
                    self.where, label, keyword, sorted(set().union(*accepted))))


def call_sources():
    """(where, source) for every code block, runnable example (references/examples/*.py) and inline code
    span that parses as Python."""
    sources = [(relative(path), read(path)) for path in EXAMPLES]
    for block in all_blocks():
        if block.lang in ("python", "py", ""):
            try:
                ast.parse(block.code)
            except SyntaxError:
                continue
            sources.append((block.id, block.code))
    for path in DOCS:
        for span in inline_code_spans(path):
            if "(" in span and "=" in span:
                try:
                    ast.parse(span)
                except SyntaxError:
                    continue
                sources.append(("%s `%s`" % (relative(path), span), span))
    return sources


def check_all_calls():
    table = short_names()
    methods = methods_by_name(table)
    checked, problems = [], []
    for where, source in call_sources():
        checker = CallChecker(table, methods, where)
        tree = ast.parse(source)
        # Imports and class definitions first, so later lines resolve regardless of order.
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                checker.visit(node)
        checker.visit(tree)
        checked += checker.checked
        problems += checker.problems
    return checked, problems


def test_every_keyword_in_a_pyg_call_exists_in_its_signature():
    checked, problems = check_all_calls()
    assert not problems, "\n".join(problems)
    assert len(checked) >= 40, "the keyword check resolved only %d keywords" % len(checked)
    labels = {label.split(".")[-1] for label, _ in checked}
    for expected in ("NeighborLoader", "Partitioner", "DistNeighborLoader", "DistContext",
                     "enable_cpu_affinity", "from_data", "put_edge_index"):
        assert expected in labels, "%s calls were not checked" % expected


def test_keyword_checker_rejects_a_wrong_keyword():
    table = short_names()
    checker = CallChecker(table, methods_by_name(table), "self-test")
    checker.visit(ast.parse("from torch_geometric.loader import NeighborLoader\n"
                            "NeighborLoader(data, num_neighbours=[5], batch_size=2)\n"))
    assert checker.problems and "num_neighbours" in checker.problems[0]
    assert ("NeighborLoader", "batch_size") in checker.checked


# ---------------------------------------------------------------------------
# Script commands and finding ids
# ---------------------------------------------------------------------------

def script_mentions():
    """(where, script, flags) for every mention of scripts/<name>.py in the docs."""
    mentions = []
    for path in DOCS:
        for number, line in enumerate(read(path).splitlines(), 1):
            for match in re.finditer(r"scripts/([\w-]+\.py)", line):
                rest = re.split(r"[`|#]", line[match.end():], maxsplit=1)[0]
                flags = re.findall(r"(?<!\S)(--[a-z][\w-]*)", rest)
                mentions.append(("%s:%d" % (relative(path), number), match.group(1), flags))
    return mentions


def test_script_commands_in_the_docs_use_real_scripts_and_flags():
    mentions = script_mentions()
    assert {script for _, script, _ in mentions} >= set(CHECKER_SCRIPTS) | {"ddp_neighbor_training.py"}
    helps, problems = {}, []
    for where, script, flags in mentions:
        path = os.path.join(REPO, "scripts", script)
        if not os.path.isfile(path):
            problems.append("%s: scripts/%s does not exist" % (where, script))
            continue
        if script not in helps:
            process = subprocess.run([sys.executable, path, "--help"], capture_output=True,
                                     text=True, timeout=SUBPROCESS_TIMEOUT)
            assert process.returncode == 0, "%s --help failed: %s" % (script, process.stderr[-2000:])
            helps[script] = process.stdout
        problems += ["%s: %s has no %s" % (where, script, flag)
                     for flag in flags if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), helps[script])]
    assert not problems, "\n".join(problems)


def emitted_finding_ids():
    """Finding ids of every script that supports --list-findings, by script."""
    ids = {}
    for name in CHECKER_SCRIPTS:
        script = os.path.join(REPO, "scripts", name)
        assert os.path.isfile(script), "scripts/%s is missing" % name
        process = subprocess.run([sys.executable, script, "--list-findings"],
                                 capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
        assert process.returncode == 0, process.stderr[-2000:]
        document = json.loads(process.stdout)
        entries = document["findings"] if isinstance(document, dict) else document
        ids[name] = [entry["id"] for entry in entries]
        for entry in entries:
            if entry.get("docs"):
                assert entry["docs"] == "references/troubleshooting.md#%s" % entry["id"], entry
    return ids


@pytest.fixture(scope="module")
def finding_ids():
    return emitted_finding_ids()


def test_every_finding_id_has_a_section(finding_ids):
    sections = set(finding_sections())
    for script, ids in finding_ids.items():
        missing = sorted(set(ids) - sections)
        assert not missing, "troubleshooting.md lacks sections for %s ids: %s" % (script, missing)


def test_every_finding_section_names_a_real_id(finding_ids):
    known = set().union(*finding_ids.values())
    sections = finding_sections()
    assert len(sections) == len(set(sections)), "duplicate finding sections"
    assert not sorted(set(sections) - known), "sections without a finding id"


# ---------------------------------------------------------------------------
# Claims about PyG's behaviour, replayed
# ---------------------------------------------------------------------------

def run_python(code, cwd, args=(), timeout=SUBPROCESS_TIMEOUT, name="claim.py"):
    """Run `code` as a script of its own process in `cwd`: forked from an interpreter that has imported torch
    and PyG (support/warm_python.py), or a new interpreter when the code hides modules before importing."""
    script = os.path.join(str(cwd), name)
    with open(script, "w") as handle:
        handle.write(code)
    return warm_python.shared(CHILD_ENV).run(script, cwd, args, timeout=timeout,
                                             fresh=warm_python.needs_fresh_interpreter(code))


def block_defining(function_name):
    matches = [b for b in python_blocks() if re.search(r"^def %s\(" % function_name, b.code, re.M)]
    assert len(matches) == 1, "expected one block defining %s" % function_name
    return matches[0]


def test_neighbor_loader_constructs_without_a_backend_and_fails_at_iteration(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules['pyg_lib'] = None      # hide both backends from PyG
        sys.modules['torch_sparse'] = None
        import torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        data = Data(x=torch.randn(10, 2), edge_index=torch.randint(0, 10, (2, 30)))
        loader = NeighborLoader(data, num_neighbors=[2], batch_size=2)
        try:
            next(iter(loader))
        except ImportError as error:
            print(error)
    """)
    process = run_python(code, tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    message = "'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'"
    assert process.stdout.strip() == message
    assert message in read(SKILL)


QUOTED_PYG_MESSAGES = (
    "'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'",
    "'disjoint' sampling not supported for neighbor sampling via 'torch-sparse'",
    "Weighted neighbor sampling requires 'pyg-lib>=0.3.0'",
    "Edge-level temporal sampling requires a more recent 'pyg-lib' installation",
    "'ClusterData' requires either 'pyg-lib' or 'torch-sparse'",
    "'HGTSampler' requires 'torch-sparse'",
    "'ShaDowKHopSampler' requires 'torch-sparse'",
    "'enable_cpu_affinity' should be used with at least",
    "No RPC worker is in worker list",
    "could not initialize the worker loop of the neighbor sampler",
    "Using 'NeighborSampler' without a 'pyg-lib' installation is deprecated",
    "Received conflicting 'input_time' and 'time_attr' arguments",
    "stack_level=2",
)


def test_quoted_pyg_messages_exist_in_the_installed_pyg():
    import torch_geometric

    package = os.path.dirname(torch_geometric.__file__)
    source = ""
    for directory, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                source += read(os.path.join(directory, name))
    # Join implicitly concatenated string literals split across lines.
    source = re.sub(r"\"\s*\n\s*f?\"|'\s*\n\s*f?'", "", source)
    docs = re.sub(r"\s+", " ", "\n".join(read(path) for path in DOCS))
    for message in QUOTED_PYG_MESSAGES:
        assert message in docs, "the docs no longer quote %r" % message
        # A quoted class name may be formatted in from self.__class__.__name__.
        pattern = re.sub(r"'([A-Z][A-Za-z]+)'", lambda m: r"'(?:%s|\{self\.__class__\.__name__\})'" % m.group(1),
                         re.escape(message).replace("\\'", "'"))
        assert re.search(pattern, source), "PyG %s no longer contains %r" % (torch_geometric.__version__, message)


def test_distributed_warn_patch_gets_past_construction(tmp_path):
    """The documented patch lets DistNeighborLoader construct and start RPC on 2 processes."""
    patch = block_defining("patch_pyg_dist_warn").code
    harness = patch + textwrap.dedent("""

        import os, socket, tempfile
        import torch
        import torch.multiprocessing as mp
        from torch_geometric.data import Data
        from torch_geometric.loader import ClusterData
        from torch_geometric.distributed import (DistContext, DistNeighborLoader,
                                                 LocalFeatureStore, LocalGraphStore,
                                                 Partitioner)


        def say(line):
            # One write per line: two ranks share the pipe, and print() may split a line in two writes.
            os.write(1, (line + '\\n').encode())


        def free_port():
            with socket.socket() as sock:
                sock.bind(('127.0.0.1', 0))
                return sock.getsockname()[1]


        def run(rank, root, ddp_port, rpc_port, labels):
            graph_store = LocalGraphStore.from_partition(root, rank)
            feature_store = LocalFeatureStore.from_partition(root, rank)
            feature_store.labels = labels
            ctx = DistContext(rank=rank, global_rank=rank, world_size=2, global_world_size=2,
                              group_name='docs-test')
            torch.distributed.init_process_group('gloo', rank=rank, world_size=2,
                                                 init_method=f'tcp://127.0.0.1:{ddp_port}')
            build = lambda: DistNeighborLoader(
                (feature_store, graph_store), num_neighbors=[2, 2], master_addr='127.0.0.1',
                master_port=rpc_port, current_ctx=ctx, input_nodes=feature_store.get_global_id(None),
                batch_size=4, num_workers=0, async_sampling=False)
            # Unpatched first (this file's patch block ran at import: undo it); the constructor raises before
            # it starts RPC, so the same ranks go on patched.
            import warnings
            for module in (dist_sampler_module, dist_loader_module, dist_link_loader_module):
                module.warn = warnings.warn
            try:
                build()
                say(f'rank {rank} unpatched constructed')
            except TypeError as error:
                say(f'rank {rank} unpatched TypeError: {error}')
            patch_pyg_dist_warn()
            try:
                loader = build()
            except TypeError as error:
                say(f'rank {rank} patched TypeError: {error}')
                return
            say(f'rank {rank} patched constructed')
            try:
                next(iter(loader))
                say(f'rank {rank} batch ok')
            except AttributeError as error:
                say(f'rank {rank} batch AttributeError: {error}')


        if __name__ == '__main__':
            # Stand-in for METIS (not available in CI): node i goes to part i % num_parts.
            ClusterData._metis = lambda self, edge_index, num_nodes: torch.arange(num_nodes) % self.num_parts
            torch.manual_seed(0)
            data = Data(x=torch.randn(40, 4), edge_index=torch.randint(0, 40, (2, 160)),
                        y=torch.randint(0, 3, (40,)))
            root = tempfile.mkdtemp(dir='.')
            Partitioner(data, num_parts=2, root=root).generate_partition()
            mp.spawn(run, args=(root, free_port(), free_port(), data.y), nprocs=2)
    """)
    process = run_python(harness, tmp_path)
    report = process.stdout + process.stderr[-3000:]
    assert process.stdout.count("unpatched TypeError: 'stack_level' is an invalid keyword") == 2, report
    assert process.stdout.count("patched constructed") == 2 and "unpatched constructed" not in process.stdout, report
    for rank in (0, 1):
        outcome = [line for line in process.stdout.splitlines() if line.startswith("rank %d batch" % rank)]
        assert outcome, report
        assert outcome[0].endswith("batch ok") or "dist_neighbor_sample" in outcome[0], outcome


def test_partition_recipe_layout_and_edge_feature_rewrite(tmp_path):
    """write_partitions + the edge_feats rewrite, on a partition made with a METIS stand-in."""
    writer = block_defining("write_partitions").code
    rewrite = block_defining("rewrite_edge_feats_as_dict").code
    with open(os.path.join(str(tmp_path), "rewrite_edge_feats.py"), "w") as handle:
        handle.write(rewrite)
    harness = writer + textwrap.dedent("""

        import json, subprocess, sys
        from torch_geometric.data import Data
        from torch_geometric.loader import ClusterData
        from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

        ClusterData._metis = lambda self, edge_index, num_nodes: torch.arange(num_nodes) % self.num_parts
        torch.manual_seed(0)
        data = Data(x=torch.randn(30, 4), edge_index=torch.randint(0, 30, (2, 120)),
                    edge_attr=torch.randn(120, 3), y=torch.randint(0, 3, (30,)),
                    train_mask=torch.rand(30) < 0.6)
        root = write_partitions(data, 2, 'out', 'toy')
        report = {'files': sorted(os.path.relpath(os.path.join(d, f), 'out')
                                  for d, _, fs in os.walk('out') for f in fs),
                  'meta': json.load(open(os.path.join(root, 'META.json')))}
        LocalGraphStore.from_partition(root, 0)
        try:
            LocalFeatureStore.from_partition(root, 0)
            report['before'] = 'loaded'
        except Exception as error:
            report['before'] = '%s: %s' % (type(error).__name__, error)
        rewrite = subprocess.run([sys.executable, 'rewrite_edge_feats.py', root],
                                 capture_output=True, text=True)
        report['rewrite_rc'] = rewrite.returncode
        store = LocalFeatureStore.from_partition(root, 1)
        report['after'] = sorted(str(a.attr_name) for a in store.get_all_tensor_attrs())
        print(json.dumps(report))
    """)
    process = run_python(harness, tmp_path)
    assert process.returncode == 0, process.stderr[-4000:]
    report = json.loads(process.stdout.strip().splitlines()[-1])
    for expected in ("toy-partitions/META.json", "toy-partitions/node_map.pt", "toy-partitions/edge_map.pt",
                     "toy-partitions/part_0/graph.pt", "toy-partitions/part_1/edge_feats.pt",
                     "toy-label/label.pt", "toy-train-partitions/partition1.pt"):
        assert expected in report["files"], report["files"]
    assert sorted(report["meta"]) == sorted(
        ["num_parts", "node_types", "edge_types", "node_offset", "is_hetero", "is_sorted"])
    assert "defaultdict" in report["before"] and report["before"].startswith("UnpicklingError"), report
    assert report["rewrite_rc"] == 0 and report["after"] == ["edge_attr", "x"], report
