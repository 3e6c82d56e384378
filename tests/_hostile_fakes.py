"""Extensions and stores that misbehave the way real ones do, for tests/test_hostile.py.

Every helper writes into a caller-given directory and nowhere else. Processes
they start carry the environment variable HOSTILE_TOKEN of the test, so a test
can find any that outlived the tool (see survivors()).
"""

import os
import subprocess
import textwrap

import fakes

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
    found = []
    needle = ("%s=%s" % (TOKEN_VARIABLE, token)).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as handle:
                environ = handle.read().split(b"\0")
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open("/proc/%s/stat" % name, "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != b"Z":
            found.append((int(name), command))
    return found


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
