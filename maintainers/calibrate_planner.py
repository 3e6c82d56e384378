#!/usr/bin/env python3
"""Regenerate scripts/capacity_planner/coefficients.json, the planner's committed default, by running its
calibration (real PyG, sandboxed children with a deadline) with this interpreter. Run it after a torch or
PyG upgrade: ``python maintainers/calibrate_planner.py``. The planner warns when the installed versions
differ from the ones recorded in the file (plan-coefficients-other-versions)."""

import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from capacity_planner import calibrate, coefficients  # noqa: E402


def main():
    measured, problems = calibrate.calibrate(time.time() + 600)
    if measured is None:
        sys.stderr.write("calibration failed: %s\n" % "; ".join(problems))
        return 1
    with open(coefficients.committed_path(), "w", encoding="utf-8") as handle:
        json.dump(measured, handle, indent=1, sort_keys=True)
        handle.write("\n")
    sys.stderr.write("wrote %s\n" % coefficients.committed_path())
    return 0


if __name__ == "__main__":
    sys.exit(main())
