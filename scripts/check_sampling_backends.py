#!/usr/bin/env python3
# /// script
# requires-python = ">=3.8"
# dependencies = []
# ///
"""Diagnose PyTorch Geometric's sampling backends and scaling environment.

Prints one JSON document on stdout describing Python, torch, CUDA,
torch.distributed, PyG and PyG's optional compiled extensions (pyg-lib,
torch-sparse, torch-scatter, torch-cluster, torch-spline-conv), plus findings:
what is wrong, why it matters and the exact command that fixes it.

Read-only: it writes no file, opens no socket, creates no CUDA context,
starts no service, downloads nothing and never prompts. Everything beyond the
standard library is imported in a child interpreter with a deadline, so a
segfaulting or hanging extension still yields valid JSON naming the culprit.

This file is the entry point only: the checker lives in the sampling_checker
package beside it, the contract all tools share in diagnostics_core. Both use
only the standard library, so the checker runs on any CPython 3.8+, with or
without torch. Older interpreters get a clean refusal (exit 2): this file, and
only this file, must stay parseable by Python 2.7 so that the refusal below can
run (tests/test_checker_interpreters.py runs it under 2.7, 3.6 and 3.7).
"""

import os
import sys

SCHEMA_VERSION = "2.2"  # sampling_checker.findings holds the same; tests check they agree

EXIT_USAGE = 2
MIN_PYTHON = (3, 8)


def refuse_old_python():
    """Under Python < 3.8: one stderr line, a JSON finding, exit 2 (2.7-compatible code)."""
    import json
    version = ".".join(str(part) for part in sys.version_info[:3])
    line = ("check_sampling_backends.py: error: this is Python %s; the checker needs Python 3.8+ "
            "(run it with python3.8 or newer, e.g. python3 scripts/check_sampling_backends.py)" % version)
    sys.stderr.write(line + "\n")
    finding = {"id": "interpreter-unsupported", "severity": "error",
               "title": "the interpreter is not a CPython 3.8+ the checker can run in or probe",
               "evidence": {"interpreter": sys.executable, "python": version, "needs": ">=3.8"},
               "fix": "python3 %s  # any Python 3.8+" % os.path.abspath(__file__),
               "docs": "references/troubleshooting.md#interpreter-unsupported"}
    sys.stdout.write(json.dumps({"schema_version": SCHEMA_VERSION, "ok": False, "status": "usage-error",
                                 "exit_code": EXIT_USAGE, "findings": [finding]}) + "\n")
    sys.exit(EXIT_USAGE)


if sys.version_info[:2] < MIN_PYTHON:
    refuse_old_python()

# The skill's folder stays as it was: no __pycache__ written beside the scripts.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import sampling_checker  # noqa: E402  the tool's package: its cli loads after the metadata answers

main = entry.tool_main(sampling_checker, "check_sampling_backends")

if __name__ == "__main__":
    entry.run_script(main)
