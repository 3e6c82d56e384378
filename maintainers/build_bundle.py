#!/usr/bin/env python3
"""Write the generated files: check_sampling_backends.pyz, the checker as one file to copy to a bare
cluster node, its JSON Schema (check_sampling_backends.schema.json, what --schema prints), and every tool's --help text and --list-findings document in
diagnostics_core/generated/ (printed by diagnostics_core.fast without loading argparse).

The bundle is a zipapp (PEP 441) of the entry file, the sampling_checker package, the shared
diagnostics_core library and references/troubleshooting.md (for --explain). It runs with any
Python 3.8+ and nothing else: `python3 check_sampling_backends.pyz --pretty`.

The file is generated: edit the sources, then run `python3 maintainers/build_bundle.py`.
tests/test_contract_every_tool.py::test_the_bundle_is_what_the_build_script_writes fails when the committed bundle differs from what this script writes.
Entries are stored uncompressed, in sorted order, with a fixed timestamp, so the same sources
always give the same bytes.
"""

import argparse
import io
import os
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
BUNDLE = os.path.join(SCRIPTS, "check_sampling_backends.pyz")
PACKAGES = ("diagnostics_core", "sampling_checker")
GENERATED = os.path.join(SCRIPTS, "diagnostics_core", "generated")
HELP_COLUMNS = "80"  # argparse's width when stdout is no terminal and COLUMNS is unset
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def skill_tools():
    """(entry file, package) of every tool: the one list, scripts/diagnostics_core/tools.py."""
    sys.dont_write_bytecode = True
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)
    from diagnostics_core.tools import TOOLS
    return TOOLS


def help_text(tool, package):
    """What `python3 scripts/TOOL.py --help` prints through argparse, at the default width: the parser of the
    tool's Spec (<package>/cli.py)."""
    import importlib
    os.environ["COLUMNS"] = HELP_COLUMNS
    skill_tools()
    parser = importlib.import_module(package + ".cli").SPEC.parser()
    parser.prog = tool + ".py"
    return parser.format_help().encode("utf-8")


def generated_files():
    """(path, function giving its bytes) of every file this script writes: troubleshooting.md's finding
    index, then the help texts, then the bundle (which holds the checker's help and doc sections)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import finding_index  # the finding index in troubleshooting.md's Contents, from every registry
    files = [(finding_index.TROUBLESHOOTING, finding_index.troubleshooting_bytes)]
    for tool, package in sorted(skill_tools()):
        files.append((os.path.join(GENERATED, tool + ".help.txt"), lambda t=tool, p=package: help_text(t, p)))
    files.append((os.path.join(SCRIPTS, "check_sampling_backends.schema.json"), schema_bytes))
    return files + [(BUNDLE, bundle_bytes)]


def schema_bytes():
    """What --schema prints: the checker's JSON Schema, derived from sampling_checker/schema.py's table."""
    sys.dont_write_bytecode = True
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)
    from diagnostics_core.text import dumps
    from sampling_checker.schema import json_schema
    return (dumps(json_schema(), True) + "\n").encode("utf-8")


def bundle_entries():
    """(name inside the zip, bytes) in the order they are written."""
    entries = [("__main__.py", read(os.path.join(SCRIPTS, "check_sampling_backends.py")))]
    for package in PACKAGES:
        folder = os.path.join(SCRIPTS, package)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                entries.append(("%s/%s" % (package, name), read(os.path.join(folder, name))))
    for package in PACKAGES:  # the checker's registry and the shared one
        entries.append(("%s/findings.json" % package, read(os.path.join(SCRIPTS, package, "findings.json"))))
    name = "check_sampling_backends.help.txt"
    entries.append(("diagnostics_core/generated/" + name, read(os.path.join(GENERATED, name))))
    entries.append(("diagnostics_core/docs/troubleshooting.md", checker_docs()))
    return entries


def checker_docs():
    """The troubleshooting sections of the checker's own finding ids (what --explain prints from the
    bundle), in the reference's order: editing another tool's section leaves the bundle as it is."""
    import json
    sys.path.insert(0, SCRIPTS)
    from diagnostics_core.fast import doc_section
    text = read(os.path.join(ROOT, "references", "troubleshooting.md")).decode("utf-8")
    ids = {}
    for package in PACKAGES:
        ids.update(json.loads(read(os.path.join(SCRIPTS, package, "findings.json")).decode("utf-8")))
    sections = [doc_section(text, finding_id) for finding_id in sorted(ids, key=lambda i: text.find("### " + i + "\n"))]
    return "".join(section + "\n" for section in sections if section).encode("utf-8")


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def bundle_bytes():
    buffer = io.BytesIO()
    buffer.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in bundle_entries():
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write (or with --check, compare) the generated files.")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed generated file is out of date")
    options = parser.parse_args(argv)
    stale = []
    for path, make in generated_files():
        data = make()
        current = read(path) if os.path.isfile(path) else b""
        if current == data:
            continue
        if options.check:
            stale.append(path)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        if path == BUNDLE:
            os.chmod(path, 0o755)
        sys.stderr.write("wrote %s (%d bytes)\n" % (path, len(data)))
    if stale:
        sys.stderr.write("out of date: %s; run python3 maintainers/build_bundle.py\n" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
