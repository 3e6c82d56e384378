"""JSON from files we do not control: bounded in size and nesting, read without blocking.

json.loads recurses once per nesting level, so a file of a few thousand "[" ends in RecursionError;
open() on a FIFO blocks forever. Both are refused here with a reason, before the parser runs.
"""

import json
import os
import re
import stat

MAX_BYTES = 16 << 20
MAX_DEPTH = 64

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


class Refused(ValueError):
    """The file is not JSON this reader accepts; str() says why in one line."""


class TooLarge(Refused):
    """The file is larger than the reader's bound (a refusal of its size, not of its content)."""


def nesting_depth(text):
    """The deepest nesting of arrays and objects in `text` (brackets inside strings do not count)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def read_bytes(path, max_bytes=MAX_BYTES):
    """The bytes of a regular file, at most max_bytes; a FIFO, device or folder is refused unopened."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise block before fstat can refuse it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise Refused("cannot open: %s" % (error.strerror or error))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused("not a regular file")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise Refused("cannot read: %s" % (error.strerror or error))
    finally:
        os.close(fd)
    if size > max_bytes:
        raise TooLarge("larger than %d bytes" % max_bytes)
    return b"".join(chunks)


def loads(data, max_depth=MAX_DEPTH):
    """Parse UTF-8 JSON bytes nested at most max_depth deep; NaN and Infinity are refused."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Refused("not UTF-8 (byte %d)" % error.start)
    depth = nesting_depth(text)
    if depth > max_depth:
        raise Refused("nested %d levels deep (at most %d accepted)" % (depth, max_depth))

    def constant(name):
        raise Refused("non-standard constant %s" % name)
    try:
        return json.loads(text, parse_constant=constant)
    except Refused:
        raise
    except (ValueError, RecursionError) as error:
        raise Refused("not JSON: %s" % str(error)[:200])


def load_file(path, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH):
    return loads(read_bytes(path, max_bytes), max_depth)
