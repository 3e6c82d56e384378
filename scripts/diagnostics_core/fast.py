"""--help, --list-findings and --explain ID, when they are the whole command line, answered before
argparse, json or anything else is imported: an agent asks these often, and every module a Python
run imports from the skill's folder is compiled anew (the folder is never written, so no bytecode
is cached there). --help prints the text argparse produced at build time
(diagnostics_core/generated/<tool>.help.txt, written by maintainers/build_bundle.py;
tests/test_contract_every_tool.py fails when it is stale); --list-findings reads the registries."""

import os
import sys


def package_file(package, name):
    """Bytes of a data file of `package` (a folder beside this library, or inside a zipapp), or None."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(here, package, name)
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            return handle.read()
    try:
        import pkgutil
        return pkgutil.get_data(package, name)
    except (OSError, ImportError, ValueError):
        return None


def write(data):
    from .text import write_bytes  # a stdout that cannot take it exits 3 with one stderr line
    write_bytes(data)
    return 0


DOCS = "references/troubleshooting.md"


def docs_path():
    """Absolute path of references/troubleshooting.md beside the skill's scripts or where a wheel put it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "..", "..", DOCS),
                      os.path.join(sys.prefix, "share", "scalable-distributed", DOCS)):
        if os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return None


def docs_text():
    """The troubleshooting reference's text: from docs_path(), or from inside a zipapp; None if absent."""
    path = docs_path()
    if path:
        with open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    data = package_file("diagnostics_core", "docs/troubleshooting.md")
    return data.decode("utf-8") if data is not None else None


def doc_section(text, heading):
    """The section under `### heading` up to the next heading of level 1 to 3 outside a code fence
    (a `# comment` in a shell block is no heading), or None."""
    lines = text.splitlines()
    try:
        start = lines.index("### " + heading)
    except ValueError:
        return None
    end, fenced = start + 1, False
    while end < len(lines):
        line = lines[end]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.split(" ", 1)[0] in ("#", "##", "###") and " " in line:
            break
        end += 1
    return "\n".join(lines[start:end]).rstrip() + "\n"


SHARED = "diagnostics_core"  # its findings.json: the findings every tool emits alike (the user's environment)


def finding_table(package):
    """id -> [severity, title] of one tool: its registry <package>/findings.json beside its code, then the
    shared one."""
    import json
    table = json.loads(package_file(package, "findings.json").decode("utf-8"))
    table.update(json.loads(package_file(SHARED, "findings.json").decode("utf-8")))
    return table


def is_finding_of(package, finding_id):
    """Whether the tool's registry or the shared one lists `finding_id`, read without the json module: a
    registry keeps one id a line (tests/test_contract_every_tool.py checks that layout)."""
    for name in (package, SHARED):
        data = package_file(name, "findings.json")
        if data is not None and ('\n  "%s": [' % finding_id) in data.decode("utf-8"):
            return True
    return False


def generated_file(tool_name, kind):
    """A file maintainers/build_bundle.py wrote for the tool: kind "help.txt"."""
    return package_file("diagnostics_core", "generated/%s.%s" % (tool_name, kind))


def answer(package, tool_name, argv=None):
    """Exit code when the command line was one of the metadata commands this module answers, else None
    (then the tool's argparse parser takes it, refusals included)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["--list-findings"], ["--list-findings", "--pretty"], ["--pretty", "--list-findings"]):
        import json
        listed = [{"id": fid, "severity": severity, "title": title, "docs": "%s#%s" % (DOCS, fid)}
                  for fid, (severity, title) in sorted(finding_table(package).items())]
        pretty = "--pretty" in argv
        return write((json.dumps(listed, indent=2 if pretty else None, separators=None if pretty else (",", ":"),
                                 ensure_ascii=False) + "\n").encode("utf-8"))
    if argv == ["--schema"] and tool_name == "check_sampling_backends":  # the committed schema file is --schema's output
        schema = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "check_sampling_backends.schema.json")
        if os.path.isfile(schema):
            with open(schema, "rb") as handle:
                return write(handle.read())
    if len(argv) == 2 and argv[0] == "--explain" and is_finding_of(package, argv[1]):
        text = docs_text()
        section = doc_section(text, argv[1]) if text else None
        return None if section is None else write(section.encode("utf-8"))
    if argv in (["--help"], ["-h"]):
        text = generated_file(tool_name, "help.txt")
        if text is None:
            return None
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        built_as = text.split(b"\n", 1)[0].split(b" ")[1] if text.startswith(b"usage: ") else b""
        if prog and built_as and prog.encode() != built_as:  # a console script's name, as argparse says it
            text = text.replace(built_as, prog.encode("utf-8", "replace"))
        return write(text)
    return None
