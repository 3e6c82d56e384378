#!/usr/bin/env python3
"""Why did the launch fail? Read a job script (or a launch line) and its logs, and say what it starts.

Past one machine most failures are in the launch: how many processes start where, with which ranks,
cores, threads and rendezvous. This tool reads the sbatch directives and the srun / torchrun /
python -m torch.distributed.run / mpirun lines of a job script (with the sbatch command-line
overrides), and optionally the job's log and the SLURM version, and prints the topology they imply
and the mistakes in it, each with the line that shows it and the corrected line. Standard library
only; it reads the files it is given and never runs anything from them.

  python3 scripts/check_launch.py job.sbatch --log slurm-1234.out --slurm-version "$(srun --version)"
"""

import os
import sys

sys.dont_write_bytecode = True  # set before the first import from this folder: no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import launch_doctor  # noqa: E402  the tool's package: its cli loads after the metadata answers

main = entry.tool_main(launch_doctor, "check_launch")

if __name__ == "__main__":
    entry.run_script(main)
