"""Reading what the user gives, bounded: regular files only (a FIFO or device is refused unopened),
a size cap for scripts, head and tail windows for logs, binary content refused. Nothing read here is
ever run: the text goes to the tokeniser and the log signatures only."""

import errno
import os
import stat

SCRIPT_MAX_BYTES = 1 << 20          # a job script larger than this is not a job script
LOG_WINDOW_BYTES = 4 << 20          # read this much from the head and from the tail of a log
LINE_MAX_CHARS = 4000               # longer lines are cut before any pattern sees them
BINARY_PROBE_BYTES = 64 << 10


class Unreadable(Exception):
    """An input that cannot be read as text: says which file and why."""

    def __init__(self, path, reason):
        Exception.__init__(self, "%s: %s" % (path, reason))
        self.path, self.reason = path, reason


def open_regular(path):
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise Unreadable(path, "not a regular file")
        raise Unreadable(path, "cannot open: %s" % (error.strerror or error))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise Unreadable(path, "not a regular file")
    return fd, info.st_size


def looks_binary(data):
    """NUL bytes, or mostly bytes that are neither printable ASCII, whitespace nor UTF-8."""
    probe = data[:BINARY_PROBE_BYTES]
    if not probe:
        return False
    if probe.count(b"\x00") > max(1, len(probe) // 1000):
        return True
    text = probe.decode("utf-8", "replace")
    odd = sum(1 for c in text if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f\v\x1b"))
    return odd > len(text) // 10


def decode(data):
    return data.decode("utf-8", "replace")


def read_script(path):
    """-> text of a job script; Unreadable when it is missing, special, binary or over the cap."""
    fd, size = open_regular(path)
    try:
        if size > SCRIPT_MAX_BYTES:
            raise Unreadable(path, "%d bytes: larger than %d bytes, which no job script is" % (size, SCRIPT_MAX_BYTES))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(SCRIPT_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if looks_binary(data):
        raise Unreadable(path, "binary content (NUL or non-text bytes): not a job script")
    return decode(data)


def read_log(path):
    """-> {"text": head [+ tail], "size", "read": what was read}; the tail starts at a line boundary."""
    fd, size = open_regular(path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            head = handle.read(LOG_WINDOW_BYTES)
            if looks_binary(head):
                raise Unreadable(path, "binary content (NUL or non-text bytes) in its first %d bytes: not a "
                                       "log" % min(len(head), BINARY_PROBE_BYTES))
            tail, skipped = b"", 0
            if size > 2 * LOG_WINDOW_BYTES:
                handle.seek(size - LOG_WINDOW_BYTES)
                tail = handle.read(LOG_WINDOW_BYTES)
                tail = tail[tail.find(b"\n") + 1:] if b"\n" in tail else tail
                skipped = size - len(head) - len(tail)
            elif size > len(head):
                tail = handle.read(LOG_WINDOW_BYTES)
    finally:
        os.close(fd)
    read = {"bytes": size, "head_bytes": len(head), "tail_bytes": len(tail), "skipped_bytes": skipped,
            "window_bytes": LOG_WINDOW_BYTES}
    if skipped:
        # the tail window starts at a line break; the head's last partial line is kept whole
        return {"head": decode(head), "tail": decode(tail), "read": read}
    return {"head": decode(head + tail), "tail": "", "read": read}
