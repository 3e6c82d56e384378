"""Text that goes into JSON: valid UTF-8, no lone surrogates, bounded length; the one JSON writer."""

import os
import re


def read_regular(path, limit=1 << 20):
    """(text or None, problem or None) of a file that may be hostile.

    Only regular files are read: a FIFO, socket or device on the path would
    block or never end, so it is refused before any read (opened non-blocking,
    checked with fstat, so it cannot be swapped in between). A file that does
    not exist is no problem (None, None); anything else unreadable says why.
    """
    import errno
    import stat
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return None, None
        if error.errno == errno.ENXIO:  # a socket, or a FIFO with no writer opened for writing
            return None, "not a regular file"
        return None, "cannot open: %s" % (error.strerror or error)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            return None, "not a regular file (%s)" % file_kind(mode)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit * 4)  # bytes; a character is at most 4 of them
    except OSError as error:
        return None, "cannot read: %s" % (error.strerror or error)
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")[:limit], None


def file_kind(mode):
    import stat
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def read_text(path, limit=1 << 20):
    """The text of a regular file, or None (absent, unreadable, or not a regular file)."""
    return read_regular(path, limit)[0]


TEXT_LIMIT = 4000  # characters per string; longer ones keep head and tail
TRUNCATION_MARKER = "...[%d characters cut]..."
_SURROGATE = re.compile(u"[\ud800-\udfff]")


def sanitise_text(text, limit=TEXT_LIMIT):
    """A string safe for any strict JSON parser, at most about `limit` characters."""
    if not isinstance(text, str):
        text = str(text)
    # Undecodable bytes arrive as lone surrogates (surrogateescape); strict
    # parsers reject them, so they become U+FFFD.
    text = _SURROGATE.sub(u"\ufffd", text)
    if len(text) > limit:
        cut = len(text) - limit
        head = limit * 2 // 3
        text = text[:head] + TRUNCATION_MARKER % cut + text[len(text) - (limit - head):]
    return text


def safe_str(value):
    """str(value) that cannot raise (a hostile __str__ may)."""
    try:
        text = str(value)
        return text if isinstance(text, str) else repr(text)
    except Exception as error:  # noqa: BLE001 - anything user code raises
        return "<unprintable %s: str() raised %s>" % (type(value).__name__, type(error).__name__)


def sanitise(value, limit=TEXT_LIMIT):
    """Every string (keys too) of a JSON-bound value made safe; NaN/inf become strings."""
    if isinstance(value, str):
        return sanitise_text(value, limit)
    if isinstance(value, dict):
        return dict((sanitise_text(safe_str(k), limit), sanitise(v, limit)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [sanitise(v, limit) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)  # strict parsers reject NaN and Infinity
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return sanitise_text(safe_str(value), limit)


def dumps(document, pretty=False):
    """The one way the tools turn a document into JSON text (write it as UTF-8 bytes)."""
    separators = None if pretty else (",", ":")  # compact means no padding spaces either
    import json  # here, not at the top: the metadata commands that print no JSON never load it
    return json.dumps(sanitise(document), indent=2 if pretty else None, separators=separators,
                      ensure_ascii=False, allow_nan=False)


def write_json(document, pretty=False, fd=1):
    """Print one JSON document as strict UTF-8 on `fd`, whatever the locale."""
    write_text(dumps(document, pretty) + "\n", fd)


EXIT_NOT_WRITTEN = 3  # contract.EXIT_INTERNAL: the run's result is lost, which no other code may claim
_STDOUT = {"closed_at_start": False, "lost": None}


class DocumentNotWritten(SystemExit):
    """stdout could not take the document (closed, full disk, I/O error): the tool exits
    EXIT_NOT_WRITTEN after one stderr line, never with a traceback or a code that claims a verdict."""

    def __init__(self, reason):
        SystemExit.__init__(self, EXIT_NOT_WRITTEN)
        self.reason = reason


def guard_standard_streams():
    """First thing a tool does: a closed fd 0, 1 or 2 (`>&-`) gets /dev/null, so that no file or pipe
    the tool opens later takes its number (and its output), and sys.stdout/sys.stderr are usable
    objects. A stdout closed at start is remembered: the document then cannot be delivered."""
    import sys
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        os.set_inheritable(fd, True)  # os.open's descriptors are close-on-exec: children must get it too
        if fd == 1:
            _STDOUT["closed_at_start"] = True
    for name, fd in (("stdout", 1), ("stderr", 2)):
        if getattr(sys, name) is None:  # Python found the descriptor closed at its start
            setattr(sys, name, open(fd, "w", encoding="utf-8", errors="replace", closefd=False))
    if _STDOUT["closed_at_start"]:  # nothing the tool finds could be delivered: say so before running
        not_written("stdout is closed")


def write_bytes(data, fd=1):
    """Write bytes straight to `fd`. A reader that stopped reading (| head) is no error: the exit code
    stays the verdict's. A stdout that cannot take the document raises DocumentNotWritten; a stderr
    that cannot take a line loses the line and nothing else."""
    import errno
    if fd == 1 and (_STDOUT["closed_at_start"] or _STDOUT["lost"]):
        return not_written(_STDOUT["lost"] or "stdout is closed")
    try:
        while data:
            data = data[os.write(fd, data):]
    except BrokenPipeError:
        pass
    except OSError as error:
        if fd != 1:
            return None
        reason = "stdout is closed" if error.errno == errno.EBADF else "writing to stdout failed: [Errno %s] %s" % (
            error.errno, error.strerror or error)
        return not_written(reason)
    return None


def not_written(reason):
    import sys
    first = _STDOUT["lost"] is None
    _STDOUT["lost"] = reason
    if first:  # one line, where stderr can still take it
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "tool"
        write_bytes(("%s: error: the JSON document could not be written (%s); exit %d\n" % (
            prog, reason, EXIT_NOT_WRITTEN)).encode("utf-8", "replace"), fd=2)
    raise DocumentNotWritten(reason)


def write_text(text, fd=1):
    """Write UTF-8 text straight to `fd` (see write_bytes)."""
    write_bytes(text.encode("utf-8", "replace"), fd)


ECHO_LIMIT = 200  # characters of a user's value repeated back in a message


def bounded(value, limit=ECHO_LIMIT):
    """A value from the command line or a file as evidence repeats it: at most about `limit` characters."""
    return sanitise_text(value if isinstance(value, str) else safe_str(value), limit)


def echo(value, limit=ECHO_LIMIT):
    """repr() of a value from the command line or a file, as messages repeat it: bounded, so a
    100 KB argument is not printed back whole (the one place every tool's echo is cut)."""
    return repr(bounded(value, limit))


def describe_exception(error):
    """The error and, where it has causes, the whole chain: torch wraps the real dlopen error in __cause__."""
    chain, seen = [], set()
    while error is not None and id(error) not in seen and len(chain) < 10:
        seen.add(id(error))
        chain.append({"type": type(error).__name__, "message": sanitise_text(safe_str(error), 2000)})
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    described = {"type": chain[0]["type"], "message": chain[0]["message"]}
    if len(chain) > 1:  # a chain of one would only repeat type and message
        described["chain"] = chain
    return described


def quote(text):
    import shlex
    return shlex.quote(text)
