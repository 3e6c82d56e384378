"""The docs tests' script runner (support/warm_python.py): each script forked from the warm server runs as
its own process, as `python SCRIPT ARGS` would run it, and leaves nothing behind for the next one. Here the
server preloads nothing (the docs tests preload torch and PyG)."""

import os
import subprocess
import sys

import pytest

from support import warm_python


@pytest.fixture(scope="module")
def server():
    runner = warm_python.WarmPython(dict(os.environ, PYTHONDONTWRITEBYTECODE="1"), preload=())
    yield runner
    runner.close()


def script(folder, name, text):
    path = folder / name
    path.write_text(text)
    return path


def test_a_script_runs_as_main_in_its_folder_with_its_arguments_and_exit_code(server, tmp_path):
    path = script(tmp_path, "a.py", "import os, sys\nprint(__name__, os.getcwd(), sys.argv[1:], sys.path[0])\n"
                                     "print('to stderr', file=sys.stderr)\nsys.exit(3)\n")
    done = server.run(path, tmp_path, ["x", 1])
    assert done.returncode == 3 and done.stderr == "to stderr\n"
    assert done.stdout.split() == ["__main__", str(tmp_path), "['x',", "'1']", str(tmp_path)]


def test_state_does_not_leak_from_one_script_to_the_next(server, tmp_path):
    first = script(tmp_path, "first.py", "import os, sys\nsys.modules['leak'] = sys\nos.environ['LEAK'] = '1'\n")
    second = script(tmp_path, "second.py", "import os, sys\nprint('leak' in sys.modules, 'LEAK' in os.environ)\n")
    assert server.run(first, tmp_path).returncode == 0
    assert server.run(second, tmp_path).stdout == "False False\n"


def test_an_exception_is_exit_1_with_its_traceback_and_each_script_is_a_new_process(server, tmp_path):
    failing = script(tmp_path, "f.py", "raise ValueError('boom')\n")
    done = server.run(failing, tmp_path)
    assert done.returncode == 1 and "ValueError: boom" in done.stderr
    pid = script(tmp_path, "p.py", "import os\nprint(os.getpid(), os.getppid())\n")
    one, two = (server.run(pid, tmp_path).stdout.split() for _ in range(2))
    assert one[0] != two[0] and one[1] == two[1] == str(server.server.pid)


def test_a_script_past_its_timeout_is_killed_with_what_it_started(server, tmp_path):
    script(tmp_path, "child.py", "import os, time\nopen('child.pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    hang = script(tmp_path, "h.py", "import os, subprocess, sys, time\n"
                                    "subprocess.Popen([sys.executable, 'child.py'])\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(hang, tmp_path, timeout=0.5)
    assert server.run(script(tmp_path, "ok.py", "pass\n"), tmp_path).returncode == 0  # still serving
    if not (tmp_path / "child.pid").exists():
        return  # the child had not started when the group was killed: nothing of it can be left
    pid = int((tmp_path / "child.pid").read_text())
    status = "/proc/%d/status" % pid
    alive = os.path.exists(status) and "\nState:\tZ" not in open(status).read()
    assert not alive, "the script's own child outlived its timeout"


def test_code_that_hides_modules_before_importing_gets_a_new_interpreter():
    assert warm_python.needs_fresh_interpreter("import sys\nsys.modules['torch_sparse'] = None\nimport torch\n")
    assert not warm_python.needs_fresh_interpreter("import sys\nprint(sys.modules['torch'])\n")
    assert sys.executable  # the fresh path runs sys.executable, as the docs tests always did
