"""The launch doctor's command line."""

import shlex

from diagnostics_core import cli, runner
from . import reading
from .findings import GATE, TOOL
from .logs import scan
from .parse import read_job
from .render import render, to_markdown
from .rules import RULES
from .topology import parse_version, topology


USAGE = """\
%(prog)s JOB_SCRIPT [--sbatch 'ARGS'] [--log LOG ...] [--slurm-version TEXT] [--format json|markdown]
       %(prog)s --command 'LAUNCH LINE' [--sbatch 'ARGS'] [--log LOG ...] [--slurm-version TEXT]
       %(prog)s --log LOG [--log LOG ...]
       %(prog)s --list-findings | --explain ID"""


DESCRIPTION = """\
Read a job script (its #SBATCH directives and the srun / torchrun / python -m
torch.distributed.run / mpirun lines it runs) or one launch line, optionally
the job's logs and the SLURM version, and print the topology they start
(nodes, launcher agents and ranks per node, CPUs and threads per rank, GPUs
per rank, rendezvous) and the launch mistakes in it, each with the line that
shows it and the corrected line. Standard library only; nothing in the
script or the logs is run, expanded or sourced.
"""


EPILOG = """\
examples:
  %(prog)s job.sbatch --format markdown
  %(prog)s job.sbatch --sbatch '--nodes=4' --log slurm-1234.out --slurm-version "$(srun --version)"
  %(prog)s --command 'srun torchrun --nnodes=2 --nproc_per_node=4 train.py' \\
           --sbatch '--nodes=2 --ntasks-per-node=4'

what is read:
  the job script: up to 1 MiB, text only. A log: its first and last 4 MiB
  (the JSON's inputs.logs[].read says what was skipped), lines cut at 4000
  characters. Without --slurm-version the version is taken from a
  'slurm 22.05.8' line in a log (srun --version's output); else the CPUs each
  srun task gets are shown for each version range where srun differs (srun
  --external-launcher: refused before 23.11, one task per node from then).

fixes:
  a fix is the corrected line, rebuilt from the script's words with the flags
  among the launcher's options (it replaces the line it names), then '# ' and
  the doctor's note; a line holding $(...), backticks or a glob is not copied:
  the fix says what to add where instead. Heterogeneous jobs are computed per
  component, srun --export as SLURM 22.05 passes variables.

exit codes:
  0  no error finding (warnings and info allowed)
  1  gate 'launch-sound' failed: the launch has an error finding
  2  usage error, or an input is missing, not a regular file, binary or too
     large (one line on stderr; the JSON names the file)
  3  internal error (JSON still printed)
"""


def build_parser():
    parser = cli.make_parser(TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                             markdown="the topology as a table and the findings with their fixes")
    parser.add_argument("script", nargs="?", metavar="JOB_SCRIPT", help="the sbatch job script")
    parser.add_argument("--command", metavar="LINE", help="a launch line instead of a job script")
    parser.add_argument("--sbatch", metavar="ARGS", default="",
                        help="the options given to sbatch on its command line (they override the directives)")
    parser.add_argument("--log", action="append", default=[], metavar="LOG", help="a log of the job (repeatable)")
    parser.add_argument("--slurm-version", metavar="TEXT", help="the SLURM version, e.g. \"$(srun --version)\"")
    cli.add_seconds(parser, "--timeout", 30.0, "stop reading the script and logs after this long")
    return parser


def unreadable(error):
    return cli.UsageError("check_launch.py: error: %s" % error, "doctor-input-unreadable",
                          {"file": error.path, "error": error.reason},
                          "pass the job script (text, under 1 MiB) and its text log; %s" % TOOL.command("--help"))


def check(parser, options):
    if options.script and options.command:
        parser.error("give a JOB_SCRIPT or --command LINE, not both")
    if not (options.script or options.command or options.log):
        parser.error("give a JOB_SCRIPT, --command LINE or --log LOG")
    try:
        options.overrides = shlex.split(options.sbatch)
    except ValueError as error:
        parser.error("--sbatch: %s" % error)


def gather(run):
    """Read the inputs (bounded), parse the job and compute its topology; nothing is run or expanded."""
    options, facts = run.options, run.facts
    inputs = facts["inputs"] = {}
    try:
        if options.script:
            text = reading.read_script(options.script)
            inputs["script"] = {"path": options.script, "chars": len(text), "lines": text.count("\n") + 1}
        else:
            text = options.command or ""
            inputs["command"] = options.command
        logs, scanned = [], []
        for path in options.log:
            log = reading.read_log(path)
            logs.append({"path": path, "read": log["read"]})
            scanned.append(scan(path, log, run.deadline))
    except reading.Unreadable as error:
        raise unreadable(error)
    inputs["logs"] = logs
    version_text = options.slurm_version or next((s["slurm_version"] for s in scanned if s["slurm_version"]), None)
    version = parse_version(version_text)
    inputs["slurm_version"] = {"text": version_text, "parsed": list(version) if version else None,
                               "source": "--slurm-version" if options.slurm_version else (
                                   "log" if version_text else None)}
    for entry, log in zip(logs, scanned):
        entry["partial"] = log["partial"]
    facts.update(analyse(text, options.overrides, "script" if options.script else "command" if options.command else "log",
                         version, scanned, run.deadline))


def analyse(text, overrides, source, version, scanned=(), deadline=None):
    """The facts the rules decide on, from text already read: the job, its topology, the scanned logs."""
    job = read_job(text, overrides, source, deadline=deadline)
    return {"job": job, "topology": topology(job, version), "logs": list(scanned)}


SPEC = runner.Spec(TOOL, build_parser, gather, render, rules=RULES, gates=runner.error_gate(GATE), check=check,
                   budget="timeout", meta=lambda facts, options: {"read_only": True, "executes_input": False},
                   markdown=lambda document, options: to_markdown(document))
