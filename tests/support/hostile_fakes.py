"""Extensions and stores that misbehave the way real ones do, for the hostile-input tests of every tool.

Every helper writes into a caller-given directory and nowhere else. Processes
they start carry the environment variable HOSTILE_TOKEN of the test, so a test
can find any that outlived the tool (see survivors()).
"""

import os
import subprocess
import textwrap

from support import fakes

TOKEN_VARIABLE = "HOSTILE_TOKEN"


def daemonising_extension(root, module, setsid=True):
    """Import that forks a grandchild which keeps the inherited pipes and sleeps.

    setsid=True: double fork + setsid, the way a daemon detaches (it leaves the
    child's process group and session). setsid=False: a plain fork whose
    child only holds the pipes open.
    """
    source = textwrap.dedent("""\
        import os, time
        pid = os.fork()
        if pid == 0:
            if %r:
                os.setsid()
                if os.fork() != 0:
                    os._exit(0)
            time.sleep(900)
            os._exit(0)
        if %r:
            os.waitpid(pid, 0)
        """ % (setsid, setsid))
    return fakes.make_package(root, module, source)


def undecodable_error_extension(root, module, size=100000):
    """Import raising an error whose text holds undecodable bytes and is `size` characters long.

    A path or locale message read with surrogateescape carries lone surrogates,
    as os.fsdecode gives for a non-UTF-8 file name.
    """
    source = ("bad = b'/opt/\\xff\\xfe/lib.so'.decode('utf-8', 'surrogateescape')\n"
              "raise ImportError('cannot load ' + bad + ' ' + 'x' * %d)\n" % size)
    return fakes.make_package(root, module, source)


def gil_sleeping_call_source(seconds=600):
    """Python source of a call that blocks in C while holding the GIL: libc sleep via ctypes.PyDLL."""
    return "__import__('ctypes').PyDLL(None).sleep(%d)" % seconds


def survivors(token):
    """Processes (pid, command line) whose environment carries `token`."""
    from support.helpers import live_processes
    needle = ("%s=%s" % (TOKEN_VARIABLE, token)).encode()
    return [(pid, command.replace(b"\0", b" ").decode("utf-8", "replace")) for pid, environ, command in live_processes()
            if needle in environ.split(b"\0")]


def end_survivors(token):
    """Clean up after a failing test: SIGKILL what the tool left behind."""
    for pid, _ in survivors(token):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def build_gil_spinning_extension(root, module):
    """A C extension whose function spins forever holding the GIL (built with gcc)."""
    import sysconfig
    build = os.path.join(root, "_build_" + module)
    os.makedirs(build, exist_ok=True)
    c_file = os.path.join(build, module + ".c")
    with open(c_file, "w") as handle:
        handle.write(textwrap.dedent("""\
            #include <Python.h>
            static PyObject *spin(PyObject *self, PyObject *args) {
                volatile unsigned long n = 0;
                for (;;) { n++; }   /* never releases the GIL */
                Py_RETURN_NONE;
            }
            static PyMethodDef methods[] = {{"spin", spin, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
            static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "%s", NULL, -1, methods};
            PyMODINIT_FUNC PyInit_%s(void) { return PyModule_Create(&definition); }
            """ % (module, module)))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    output = os.path.join(root, module + suffix)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-I" + sysconfig.get_paths()["include"], c_file,
                    "-o", output], check=True, capture_output=True)
    return output


# A user's store module, written into the user's own folder by the tests and
# imported by the contract checker as `hostile_stores:<name>` from there.
HOSTILE_STORES = textwrap.dedent('''\
    """Store pairs that misbehave the way real ones do (written by tests/support/hostile_fakes.py)."""
    import ctypes
    import os
    import time

    import torch
    from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

    NUM_NODES = 12


    def ring(num_nodes=NUM_NODES):
        nodes = torch.arange(num_nodes)
        forward = torch.stack([nodes, (nodes + 1) % num_nodes])
        return torch.cat([forward, forward.flip(0)], dim=1)


    def features(store_cls=LocalFeatureStore):
        return store_cls.from_data(torch.arange(NUM_NODES), x=torch.randn(NUM_NODES, 4))


    def graph(edges=None):
        edges = ring() if edges is None else edges
        return LocalGraphStore.from_data(torch.arange(edges.size(1)), edges, NUM_NODES)


    def good():
        return features(), graph()


    def edge_ids_past_num_nodes():
        """Source ids far beyond num_nodes: native samplers index out of bounds."""
        edges = ring()
        edges[0, ::2] += 1 << 40
        return features(), graph(edges)


    class CrashingFeatureStore(LocalFeatureStore):
        def _get_tensor(self, attr):
            ctypes.string_at(0)  # SIGSEGV, as a broken native client library does


    def crashing_read():
        return features(CrashingFeatureStore), graph()


    class GilSleepingFeatureStore(LocalFeatureStore):
        def get_all_tensor_attrs(self):
            ctypes.PyDLL(None).sleep(600)  # blocks in C and keeps the GIL: no Python thread runs


    def gil_sleeping():
        return features(GilSleepingFeatureStore), graph()


    class GilSpinningFeatureStore(LocalFeatureStore):
        def get_all_tensor_attrs(self):
            import gil_spin  # a C extension built with gcc by the test
            gil_spin.spin()


    def gil_spinning():
        return features(GilSpinningFeatureStore), graph()


    def daemonising():
        """The factory starts a detached helper (double fork + setsid), like a client's background agent."""
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(900)
            os._exit(0)
        os.waitpid(pid, 0)
        return good()


    def exits():
        os._exit(0)


    def needs_missing_dependency():
        import no_such_store_client_library  # noqa: F401
    ''')


def write_hostile_stores(folder, gil_spin=False):
    """hostile_stores.py (and the gil_spin C extension on request) in the user's `folder`."""
    os.makedirs(str(folder), exist_ok=True)
    with open(os.path.join(str(folder), "hostile_stores.py"), "w") as handle:
        handle.write(HOSTILE_STORES)
    if gil_spin:
        build_gil_spinning_extension(str(folder), "gil_spin")
    return folder


def write_crashing_partition(root):
    """A homogeneous partition folder whose node_map.pt crashes the interpreter when unpickled
    with weights_only=False (its object is rebuilt by calling ctypes.string_at(0))."""
    import json
    import torch
    os.makedirs(os.path.join(str(root), "part_0"), exist_ok=True)
    with open(os.path.join(str(root), "META.json"), "w") as handle:
        json.dump({"num_parts": 1, "node_types": None, "edge_types": None, "node_offset": None,
                   "is_hetero": False, "is_sorted": False}, handle)

    class Crash:
        def __reduce__(self):
            import ctypes
            return (ctypes.string_at, (0,))

    torch.save(Crash(), os.path.join(str(root), "node_map.pt"))
    torch.save(torch.zeros(4, dtype=torch.long), os.path.join(str(root), "edge_map.pt"))
    return root


def forging_extension(root, module):
    """Import that forks a copy which, once the probe child has exited (its last real record
    sent), writes a forged record to every open descriptor claiming PyG 9.9.9 imported fine.
    Only records from the direct child may count."""
    source = textwrap.dedent("""\
        import json, os, time
        parent = os.getpid()
        if os.fork() == 0:
            while os.getppid() == parent:
                time.sleep(0.005)
            record = json.dumps({"event": "result", "step": "pyg", "status": "ok", "pid": os.getpid(),
                                 "data": {"version": "9.9.9", "flags": {}, "neighbor_backend": None}})
            for fd in range(3, 64):
                try:
                    os.write(fd, (record + "\\n").encode())
                except OSError:
                    pass
            os._exit(0)
        """)
    return fakes.make_package(root, module, source)


def unprintable_error_extension(root, module):
    """Import raising an exception whose __str__ itself raises (str(error) would fail)."""
    source = textwrap.dedent("""\
        class HostileError(ImportError):
            def __str__(self):
                raise RuntimeError("no text for you")
        raise HostileError()
        """)
    return fakes.make_package(root, module, source)


# Names a hostile user gives files and folders (no "/"): pasted unquoted, each would create ./marker where the
# shell ran it. Fixes built from them must run nothing (tests/fast/test_*_fixes.py).
HOSTILE_NAMES = ["$(:>marker)", "`:>marker`", "a;:>marker", "a'; :>marker; '", 'a"; :>marker; "', "a\n:>marker",
                 "a|:>marker", "x' $(:>marker) 'y", "-- ;:>marker"]


def run_pasted(fix, folder):
    """Paste a fix as an agent would: bash -c, from `folder`, PATH empty (no command the fix names runs; only
    the shell itself could write a marker); -> the completed process."""
    import shutil
    return subprocess.run([shutil.which("bash"), "-c", fix], cwd=str(folder),
                          env={"PATH": os.path.join(str(folder), "no-commands")}, capture_output=True, text=True,
                          timeout=20)


def markers(folder):
    """Every file named `marker` below `folder`: what a hostile name ran."""
    return [os.path.join(path, name) for path, _, names in os.walk(str(folder)) for name in names
            if name == "marker"]


def stray_torch(folder):
    """A folder holding a torch/ package that is not torch, for PYTHONPATH; -> the folder."""
    stray = os.path.join(str(folder), "vendor")
    os.makedirs(os.path.join(stray, "torch"))
    with open(os.path.join(stray, "torch", "__init__.py"), "w") as handle:
        handle.write("raise ImportError('a stray torch, not the installed one')\n")
    return stray


def assert_refused_as_shadowed(completed, document, stray):
    """A tool run with `stray` on PYTHONPATH: exit 2, one stderr line, one document naming the stray torch."""
    assert completed.returncode == 2 and document["status"] == "usage-error"
    [refused] = document["findings"]
    assert refused["id"] == "environment-package-shadowed"
    assert refused["evidence"]["shadowed"][0]["package"] == "torch"
    assert refused["evidence"]["shadowed"][0]["imported_from"] == os.path.join(stray, "torch", "__init__.py")
    assert refused["fix"].startswith("unset PYTHONPATH")
    lines = completed.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "environment-package-shadowed" in lines[0]


def assert_warnings_named(completed, document):
    """A tool run under warnings made errors: it ran to its verdict (exit 0 here), named the setting alone and
    printed no ResourceWarning and no traceback."""
    assert completed.returncode == 0 and document["gates"] == {"contract": {"passed": True}}
    assert [f["id"] for f in document["findings"]] == ["environment-warnings-as-errors"]
    named = document["findings"][0]
    assert named["severity"] == "warning" and named["evidence"]["as_errors"] == ["error"]
    stderr = completed.stderr.decode()
    assert "ResourceWarning" not in stderr and "Traceback" not in stderr, stderr[-2000:]


def warnings_made_errors(how):
    """(extra environment, interpreter flags) for each way to turn warnings into errors."""
    if how == "PYTHONWARNINGS=error":
        return {"PYTHONWARNINGS": "error"}, ()
    return {}, ("-W", "error", "-X", "dev")


def hostile_folder(parent, name, suffix):
    """A folder named `name` holding an empty file `name + suffix`, and a folder beside it to paste fixes in;
    -> (folder, file, paste folder)."""
    folder = os.path.join(str(parent), name)
    os.mkdir(folder)
    path = os.path.join(folder, name + suffix)
    open(path, "w").close()
    paste = os.path.join(str(parent), "elsewhere")
    os.mkdir(paste)
    return folder, path, paste
