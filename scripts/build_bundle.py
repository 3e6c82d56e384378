#!/usr/bin/env python3
"""Write check_sampling_backends.pyz: the checker as one file to copy to a bare cluster node.

The bundle is a zipapp (PEP 441) of the entry file, the sampling_checker package, the shared
diagnostics_core library and references/troubleshooting.md (for --explain). It runs with any
Python 3.8+ and nothing else: `python3 check_sampling_backends.pyz --pretty`.

The file is generated: edit the sources, then run `python3 scripts/build_bundle.py`.
tests/test_bundle.py fails when the committed bundle differs from what this script writes.
Entries are stored uncompressed, in sorted order, with a fixed timestamp, so the same sources
always give the same bytes.
"""

import argparse
import io
import os
import sys
import zipfile

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(SCRIPTS)
BUNDLE = os.path.join(SCRIPTS, "check_sampling_backends.pyz")
PACKAGES = ("diagnostics_core", "sampling_checker")
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def bundle_entries():
    """(name inside the zip, bytes) in the order they are written."""
    entries = [("__main__.py", read(os.path.join(SCRIPTS, "check_sampling_backends.py")))]
    for package in PACKAGES:
        folder = os.path.join(SCRIPTS, package)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                entries.append(("%s/%s" % (package, name), read(os.path.join(folder, name))))
    entries.append(("diagnostics_core/findings.json", read(os.path.join(SCRIPTS, "diagnostics_core", "findings.json"))))
    entries.append(("diagnostics_core/docs/troubleshooting.md",
                    read(os.path.join(ROOT, "references", "troubleshooting.md"))))
    return entries


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
    parser = argparse.ArgumentParser(description="Write (or with --check, compare) %s." % os.path.basename(BUNDLE))
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed bundle is out of date")
    parser.add_argument("--output", default=BUNDLE, help="where to write (default: %(default)s)")
    options = parser.parse_args(argv)
    data = bundle_bytes()
    if options.check:
        current = read(options.output) if os.path.isfile(options.output) else b""
        if current != data:
            sys.stderr.write("%s is out of date: run python3 scripts/build_bundle.py\n" % options.output)
            return 1
        return 0
    with open(options.output, "wb") as handle:
        handle.write(data)
    os.chmod(options.output, 0o755)
    sys.stderr.write("wrote %s (%d bytes)\n" % (options.output, len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
