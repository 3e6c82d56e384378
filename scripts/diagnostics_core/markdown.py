"""Text for people: markdown that stays a well-formed table whatever the input, stderr lines without
control characters, and redaction of user, home and host names by path and word boundaries."""

import os
import re

_CONTROL = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def visible_controls(text):
    """Control characters (ESC, OSC, BEL, NUL, C1) written as \\xNN, so a terminal never obeys them."""
    return _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()) if ord(m.group()) < 256
                        else "\\u%04x" % ord(m.group()), text)


def terminal_line(text):
    """One stderr line: newlines and tabs shown as \\n and \\t, every other control character escaped."""
    text = str(text).replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return visible_controls(text)


_MARKDOWN_ACTIVE = re.compile(r"([\\|`*\[\]~])")


def cell(value):
    """A markdown table cell (or any text outside code): one line, no table, code, emphasis or link
    breakers, no raw HTML."""
    text = terminal_line("-" if value is None else value)
    text = _MARKDOWN_ACTIVE.sub(r"\\\1", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


STDERR_LINE_LIMIT = 1000  # characters: whatever a line repeats (an argument, a file's text), it stays a line


def stderr_line(text, redactions=()):
    """Write one line to stderr: controls escaped, at most STDERR_LINE_LIMIT characters (the middle of
    a longer one is cut), private names redacted when `redactions` are given; a closed or broken
    stderr is not an error of the tool."""
    from .text import sanitise_text, write_text
    line = terminal_line(redact(str(text), redactions) if redactions else text)
    write_text(sanitise_text(line, STDERR_LINE_LIMIT) + "\n", fd=2)


def code(value):
    """An inline code span that holds any text on one line (a fix to copy)."""
    text = terminal_line(value)
    longest = max([len(run) for run in re.findall(r"`+", text)] or [0])
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


def safe_call(function):
    try:
        return function()
    except Exception:  # no user/host name to hide is not an error
        return None


def private_names(extra=()):
    """(text, replacement) pairs a public report should not show: home, user, host, and `extra`."""
    import getpass
    pairs = []
    home = os.path.expanduser("~")
    if home and home not in ("/", "~"):
        pairs.append((home.rstrip("/"), "~"))
    for name in (os.environ.get("USER"), os.environ.get("LOGNAME"), safe_call(getpass.getuser)):
        if name:
            pairs.append((name, "<user>"))
    nodename = safe_call(lambda: os.uname().nodename)
    if nodename:
        pairs.append((nodename, "<host>"))
        pairs.append((nodename.split(".")[0], "<host>"))
    pairs.extend(extra)
    # Longest first, so a home path goes before the user name inside it.
    return sorted(set(p for p in pairs if p[0] and len(p[0]) > 1), key=lambda p: -len(p[0]))


def redact(text, pairs):
    """Replace each secret where it stands as a whole path or word, never inside a longer word."""
    for secret, replacement in pairs:
        # A word character (or a dot/hyphen inside a host or file name) next to it means a longer name.
        pattern = r"(?<![\w.-])%s(?![\w-]|\.\w)" % re.escape(secret)
        text = re.sub(pattern, lambda m: replacement, text)
    return text


def finding_block(item, title=None, details=()):
    """One finding as markdown lines: its heading, `details` (lines already escaped), the fix and the docs."""
    lines = ["## %s %s: %s" % (cell(item["severity"]), code(item["id"]), cell(title or item["title"]))]
    lines.extend(details)
    if item["fix"]:
        lines.append("- fix: %s" % code(item["fix"]))
    lines.append("- docs: %s" % cell(item["docs"]))
    return lines + [""]


def findings_list(findings, hide=lambda text: text, without_fix=()):
    """A report's findings as markdown list lines, errors first, each fix as a code span (`hide` redacts a
    text before it is escaped; ids in `without_fix` show no fix: the report shows theirs elsewhere)."""
    from .contract import sort_findings
    found = sort_findings(findings)
    lines = ["#### Findings (%d)" % len(found), ""]
    for item in found:
        lines.append("- **%s** %s: %s" % (cell(item["severity"]), code(item["id"]), cell(hide(item["title"]))))
        if item.get("fix") and item["id"] not in without_fix:
            lines.append("  fix: %s" % code(hide(item["fix"])))
    return lines + ([] if found else ["none"])
