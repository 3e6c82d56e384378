"""Adding a tool takes exactly the files MAINTAINERS.md lists: a throwaway tool added to a copy of the skill
through those files (and maintainers/build_bundle.py) is listed by --list-findings, indexed in the
troubleshooting reference and covered by the contract tests, with no other file touched."""

import json
import re
import shutil
import subprocess
import sys

from conftest import ROOT, tree_state

SCRIPT, PACKAGE, PREFIX = "check_hello", "hello_checker", "hello"
IDS = {"hello-greeting": ["info", "the tool says hello"],
       "hello-usage-error": ["error", "the command line is not valid"],
       "hello-internal-error": ["error", "the hello tool itself failed"],
       "hello-interrupted": ["error", "a signal stopped the hello tool"]}

ENTRY = '''#!/usr/bin/env python3
"""Say hello: the smallest tool on the one runner."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import hello_checker  # noqa: E402

main = entry.tool_main(hello_checker, "check_hello")

if __name__ == "__main__":
    entry.run_script(main)
'''

CLI = '''"""The hello tool: its Tool and its Spec."""

from diagnostics_core import cli, runner
from diagnostics_core.contract import Tool

TOOL = Tool.from_registry("hello_checker", "check_hello", "1.0.0", "1.0")


def parser():
    made = cli.make_parser(TOOL, description="Say hello.")
    made.add_argument("--name", default="world")
    return made


def gather(run):
    if run.options.name == "crash":
        raise RuntimeError("asked to crash")
    if run.options.name == "sleep":
        import time
        run.say("sleeping")
        time.sleep(60)
    run.facts["name"] = run.options.name


def rule_greeting(facts, options):
    return [TOOL.finding("hello-greeting", {"name": facts["name"]}, fix=None)]


def render(document, facts, options):
    document["greeting"] = "hello %s" % facts.get("name")


SPEC = runner.Spec(TOOL, parser, gather, render, rules=(rule_greeting,), gates=runner.error_gate("greeted"))
'''

TEST = '''import json
import signal
import subprocess
import sys

import pytest

from conftest import ROOT

HELLO = [sys.executable, str(ROOT / "scripts" / "check_hello.py")]


def hello(*args):
    completed = subprocess.run(HELLO + list(args), capture_output=True, text=True, timeout=60)
    return completed.returncode, [f["id"] for f in json.loads(completed.stdout)["findings"]]


@pytest.mark.finding("hello-greeting", "hello-usage-error", "hello-internal-error")
def test_it_says_hello_refuses_a_bad_flag_and_reports_a_crash():
    assert hello("--name", "you") == (0, ["hello-greeting"])
    assert hello("--no-such-flag") == (2, ["hello-usage-error"])
    assert hello("--name", "crash") == (3, ["hello-internal-error"])


@pytest.mark.finding("hello-interrupted")
def test_a_signal_prints_the_interrupted_document():
    process = subprocess.Popen(HELLO + ["--name", "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stderr.readline()  # "check_hello: sleeping": the run is in its gather
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 143 and json.loads(stdout)["findings"][0]["id"] == "hello-interrupted"
'''


def section(finding_id):
    return "### %s\n\n**Symptom:** %s.\n**Cause:** a test made it.\n**Fix:** none needed.\n\n" % (
        finding_id, IDS[finding_id][1])


def listed_files():
    """The files MAINTAINERS.md's "Adding a tool" says a new tool needs, as written there (with <script> and
    <package> for the tool's names)."""
    text = (ROOT / "MAINTAINERS.md").read_text().split("### Adding a tool", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", text, re.M)


def add_tool(skill):
    """Write the throwaway tool into `skill` through the listed files only; -> those files' paths."""
    names = {"<script>": SCRIPT, "<package>": PACKAGE, "<prefix>": PREFIX, "<behaviour>": "greeting"}
    paths = []
    for listed in listed_files():
        for placeholder, value in names.items():
            listed = listed.replace(placeholder, value)
        paths.append(skill / listed)
    by_name = {path.name: path for path in paths}
    (skill / "scripts" / PACKAGE).mkdir()
    by_name[SCRIPT + ".py"].write_text(ENTRY)
    by_name["__init__.py"].write_text('"""The hello tool."""\n')
    by_name["findings.json"].write_text("{\n" + ",\n".join('  "%s": %s' % (i, json.dumps(v)) for i, v in IDS.items())
                                        + "\n}\n")
    by_name["cli.py"].write_text(CLI)
    tools = by_name["tools.py"]
    tools.write_text(tools.read_text().replace("\n)\n", '\n    ("%s", "%s"),\n)\n' % (SCRIPT, PACKAGE), 1))
    project = by_name["pyproject.toml"]
    text = project.read_text()
    text = text.replace('check-launch = "check_launch:main"', 'check-launch = "check_launch:main"\ncheck-hello = "check_hello:main"')
    text = re.sub(r'("check_launch")\]', r'\1, "check_hello"]', text)
    text = re.sub(r'("launch_doctor")\]', r'\1, "hello_checker"]', text)
    text = text.replace('launch_doctor = ["findings.json"]', 'launch_doctor = ["findings.json"]\nhello_checker = ["findings.json"]')
    project.write_text(text)
    docs = by_name["troubleshooting.md"]
    docs.write_text(docs.read_text() + "\n## Hello (`scripts/check_hello.py`)\n\n" + "".join(section(i) for i in IDS))
    by_name["test_hello_greeting.py"].write_text(TEST)
    return paths


def files_of(skill):
    return dict((path, state) for path, state in tree_state(skill, skip=("generated",)).items() if state[0] == "file")


def test_a_tool_added_through_the_listed_files_is_listed_indexed_and_contracted(tmp_path):
    skill = tmp_path / "scalable-distributed"
    shutil.copytree(ROOT, skill, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build",
                                                                ".pytest_cache"))
    generated = skill / "scripts" / "diagnostics_core" / "generated"
    before = files_of(skill)
    paths = add_tool(skill)
    changed = {path for path, _ in set(files_of(skill).items()) ^ set(before.items())}
    assert changed == {str(path) for path in paths}, sorted(changed)
    built = subprocess.run([sys.executable, str(skill / "maintainers" / "build_bundle.py")], capture_output=True,
                           text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    assert (generated / (SCRIPT + ".help.txt")).read_text().startswith("usage: check_hello.py")
    listed = subprocess.run([sys.executable, str(skill / "scripts" / (SCRIPT + ".py")), "--list-findings"],
                            capture_output=True, text=True, timeout=60)
    assert set(IDS) <= {entry["id"] for entry in json.loads(listed.stdout)}
    index = (skill / "references" / "troubleshooting.md").read_text().split("<!-- end of finding index -->")[0]
    assert "- `check_hello.py`:" in index and all(i in index for i in IDS)
    contract = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                               "tests/test_contract_every_tool.py", "tests/test_hello_greeting.py", "-k",
                               "check_hello or hello_greeting or only_the_one_list or marks_name_only"],
                              capture_output=True, text=True, timeout=600, cwd=skill)
    assert contract.returncode == 0, contract.stdout[-3000:]
    ran = re.search(r"(\d+) passed", contract.stdout)
    assert ran and int(ran.group(1)) >= 8, contract.stdout[-1000:]
