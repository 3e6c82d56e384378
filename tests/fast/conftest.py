"""The fast tier: rules, parsing, rendering and fix building, called in this process (no tool process is
started, torch is not imported). README's fast-test command runs this folder alone, in under 3 minutes on
2 cores; the full suite runs it too."""

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.dont_write_bytecode = True  # the skill's folder stays free of __pycache__, as every tool keeps it
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
