#!/usr/bin/env python3
"""Regenerate scripts/capacity_planner/coefficients.json, the planner's committed default, by running its
calibration (real PyG, sandboxed children with a deadline) with this interpreter: the graph and conv
coefficients (calibrate.py), then the processes figures (processes.py: a tiny job per launch shape, as
--measure runs them; run it as root for a private /dev/shm). Run it after a torch or PyG upgrade:
``python maintainers/calibrate_planner.py``. The planner warns when the installed versions differ from the
ones recorded in the file (plan-coefficients-other-versions)."""

import json
import os
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from capacity_planner import calibrate, coefficients, processes  # noqa: E402


def say(text):
    sys.stderr.write("calibrate_planner: %s\n" % text)


def main():
    scratch = tempfile.mkdtemp(prefix="calibrate-planner-")
    os.environ["TMPDIR"] = scratch  # the children's temporary files (loader workers, PyG's templates) go with it
    try:
        measured, problems = calibrate.calibrate(time.time() + 600)
        if measured is not None:
            measured["processes"], problems = processes.calibrate(time.time() + 600, say)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if problems:
        say("calibration failed: %s" % "; ".join(problems))
        return 1
    with open(coefficients.committed_path(), "w", encoding="utf-8") as handle:
        json.dump(measured, handle, indent=1, sort_keys=True)
        handle.write("\n")
    say("wrote %s" % coefficients.committed_path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
