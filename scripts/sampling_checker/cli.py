"""The checker's command line and its Spec (what diagnostics_core.runner runs). Metadata commands (--help,
--list-findings, --schema, --explain, --wheels with a value) import nothing beyond this module and the shared
library: the probe, rules and rendering load only for a run (the Spec's functions import them when called)."""

import importlib
import sys

from diagnostics_core import cli as shared_cli
from diagnostics_core import runner
from diagnostics_core.cli import UsageError
from diagnostics_core.contract import EXIT_OK
from .findings import TOOL, checker_command
from .tables import DEFAULT_TIMEOUT


USAGE = """\
%(prog)s [--require-neighbor-backend] [--require-cuda]
       [--require-distributed [BACKEND]] [--python PATH] [--timeout SECONDS]
       [--static-only] [--format {json,markdown}] [--no-redact] [--full]
       [--pretty] [--schema] [--list-findings] [--explain ID]
       [--wheels [TORCH[+VARIANT]]]"""


EPILOG = """\
ok and exit codes (the same in every tool of this skill):
  "ok" is true when there is no finding of severity error, no failed gate and
  no internal error. This checker applies a gate only when asked (--require-*);
  "gates" lists the ones applied. So "ok": false with exit 0 means: something
  is wrong (see the error findings) but no gate you asked for failed.
  0  ran; every gate applied passed (status ok, warning, error or incomplete)
  1  a --require-* gate failed (status gate-failed; see "gates" and the findings)
  2  usage error: bad flag, --static-only with a gate, an interpreter that is
     not CPython 3.8+; one line on stderr, and a JSON document whose finding
     (usage-error, interpreter-unsupported) says what to run instead
  3  internal error in the checker; the JSON says so in "findings"
  --static-only imports nothing, so its status is never "ok": it is
  "incomplete" (or "error" when metadata alone shows an error).

which interpreter is probed:
  --python PATH when given. Otherwise the active environment ($VIRTUAL_ENV,
  else $CONDA_PREFIX; under `uv run`, which points VIRTUAL_ENV at its own
  throwaway env, the $VIRTUAL_ENV uv was started with, else the first other
  venv on PATH) when this interpreter is such a
  throwaway uv/pipx env or a base Python outside any environment; otherwise
  this interpreter. A probed interpreter that is not the active environment
  gets the finding interpreter-not-active (and a line on stderr).

output:
  One JSON document on stdout (compact: --full adds install records, operator
  lists, every PyG flag and child stderr), or with --format markdown a report
  to paste into an issue, user/home/host/node names redacted by default
  (pasted reports are public and cannot be unsent; --no-redact keeps them).
  A short summary goes to stderr at the end of every run.

what it guarantees:
  Exactly one document on stdout; progress and warnings on stderr.
  Read-only: no file or directory written, no socket opened, no CUDA context
  created (CUDA facts come from NVML), no service started, nothing downloaded,
  no prompt. Imports happen in a child interpreter bounded by --timeout.

environment:
  SCALABLE_DISTRIBUTED_NVML=/path/libnvidia-ml.so.1
      load NVML from this file instead of the driver's libnvidia-ml.so.1 as the
      dynamic loader finds it (LD_LIBRARY_PATH, then the ldconfig cache)
  CUDA_VISIBLE_DEVICES  read as CUDA reads it and checked against NVML's GPUs

wheels (--wheels, a table lookup: no probe, nothing fetched):
  --wheels 2.14.1+cu126 says, for pyg-lib, torch-scatter, torch-sparse,
  torch-cluster and torch-spline-conv, whether PyG's wheel index has a wheel
  for that torch and CUDA variant (cpu, cu126, ...; none given: cpu) on this
  platform and Python, the public source and date behind each answer, the
  exact install line, and the newest torch with wheels of every sampling
  extension for that variant. Without a value: the torch installed in the
  interpreter the checker would probe (read from torch/version.py).

examples:
  python3 scripts/check_sampling_backends.py --pretty
  python3 scripts/check_sampling_backends.py --wheels 2.14.1+cu126 --format markdown
  python3 scripts/check_sampling_backends.py --require-neighbor-backend
  python3 scripts/check_sampling_backends.py --python ~/.venvs/scalable-distributed/bin/python
  python3 scripts/check_sampling_backends.py --format markdown
  python3 scripts/check_sampling_backends.py --static-only
  python3 scripts/check_sampling_backends.py | jq '.findings[] | {id, fix}'
"""


DESCRIPTION = """\
Probe Python, torch, CUDA, torch.distributed, PyG and its compiled extensions
(pyg-lib, torch-sparse, torch-scatter, ...) and the limits a container or a
scheduler's cgroup sets (/dev/shm, CPU quota, memory limit, open files), and
print one JSON document with facts and findings (each with evidence, an exact
fix and a docs anchor). Run it before debugging a PyG scaling job.
"""


GATES = (
    ("--require-neighbor-backend", "exit 1 unless the backend NeighborLoader would use (pyg-lib or torch-sparse) "
                                   "passed a functional smoke sample, not merely imported"),
    ("--require-cuda", "exit 1 unless torch could use at least one GPU: NVML lists it, CUDA_VISIBLE_DEVICES leaves "
                       "it, the driver is new enough and torch has kernels for it (no CUDA call)"),
)
OUTPUT_SWITCHES = (
    ("--static-only", "metadata, CPU and environment only: imports neither torch nor any extension (milliseconds); "
                      "what it cannot see is 'not-probed'/null and status is 'incomplete'; the --require-* gates "
                      "need the full probe"),
    ("--full", "every fact: all install records, operator lists, all PyG flags, child stderr (the default compact "
               "document leaves these out)"),
    ("--schema", "print the JSON Schema of the output and exit 0"),
)


def build_parser():
    parser = shared_cli.make_parser(
        TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
        markdown="a versions table and the findings with their fixes, to paste into an issue (names redacted)",
        redacted="user, home, host and node names")
    shared_cli.add_switches(parser, GATES)
    parser.add_argument("--require-distributed", nargs="?", const="any", metavar="BACKEND",
                        choices=("any", "gloo", "nccl", "mpi", "ucc"),
                        help="exit 1 unless torch.distributed is available (and BACKEND, one of gloo, nccl, "
                             "mpi, ucc, when given)")
    parser.add_argument("--python", metavar="PATH", default=None,
                        help="interpreter to probe, e.g. another venv's bin/python (default: the active "
                             "environment's, else this one; see 'which interpreter' below)")
    shared_cli.add_seconds(parser, "--timeout", DEFAULT_TIMEOUT, "bound on total wall time; an import that makes "
                           "no progress for 40%% of it (2 to 20 s) is reported as hung")
    shared_cli.add_switches(parser, OUTPUT_SWITCHES)
    parser.add_argument("--wheels", nargs="?", const="", metavar="TORCH[+VARIANT]",
                        help="which PyG extensions have wheels for that torch build (e.g. 2.14.1+cu126; without a "
                             "value, the probed torch), each with its source, date and install line, and the "
                             "newest torch with all sampling wheels; JSON, or --format markdown; no probe")
    return parser


def check(parser, options):
    """A --require-* gate is decided by importing and smoke-testing: --static-only cannot decide it."""
    asked = []
    if options.require_neighbor_backend:
        asked.append("--require-neighbor-backend")
    if options.require_cuda:
        asked.append("--require-cuda")
    if options.require_distributed:
        asked += ["--require-distributed"] + ([] if options.require_distributed == "any"
                                              else [options.require_distributed])
    if options.static_only and asked:
        raise UsageError("check_sampling_backends.py: error: %s needs the full probe; drop --static-only"
                         % " ".join(asked), "usage-error",
                         {"flags": asked + ["--static-only"],
                          "message": "a gate is decided by importing and smoke-testing; --static-only imports "
                                     "nothing"},
                         fix=checker_command(*asked))


def answer_schema(run):
    """--schema with other flags (alone, diagnostics_core.fast prints the committed file): the JSON Schema."""
    if not run.options.schema:
        return None
    from diagnostics_core.text import write_json
    from .schema import json_schema
    write_json(json_schema(), True)
    return EXIT_OK


def answer_wheels(run):
    """--wheels: the wheel table read for one torch build; a metadata command, so no probe."""
    options = run.options
    if options.wheels is None:
        return None
    import platform
    from diagnostics_core import wheels
    from diagnostics_core.text import bounded, echo, write_json, write_text
    spec, python_version = options.wheels, tuple(sys.version_info[:3])
    if not spec:  # the probed interpreter's torch, read from its torch/version.py
        from .run import installed_torch
        spec, python_version = installed_torch(run)
    parsed = wheels.parse_torch_spec(spec)
    if parsed is None:
        raise UsageError("check_sampling_backends.py: error: --wheels: %s is not TORCH[+VARIANT] in ASCII digits, "
                         "e.g. 2.14.1+cu126" % echo(spec), "usage-error", {
                             "wheels": bounded(spec), "message": "expected e.g. 2.14.1, 2.14.1+cpu, 2.14.1+cu126"},
                         fix=checker_command("--wheels", "2.14.1+cu126"))
    release, _, variant = parsed
    platform_name = wheels.platform_key({"system": platform.system(), "machine": platform.machine()})
    if platform_name.startswith("darwin"):
        variant = "cpu"  # PyG's macOS wheels are CPU-only
    report = wheels.wheel_report(release, variant, platform_name, python_version)
    if options.format == "markdown":
        write_text(wheels.wheel_report_markdown(report))
    else:
        write_json(report, options.pretty)
    return EXIT_OK


# --timeout split into every stage's bound (runner.Stage: clamp(timeout * share + plus, floor, cap), seconds
# from the run's start for the absolute ones): the only place the checker's time is decided.
STAGES = {
    # asking an interpreter (--python, the active environment) what it is; the rest of --timeout says so
    "question": runner.Stage(share=0.5, floor=1.0, cap=30.0),
    # an import or smoke sample normally takes well under a second once torch is loaded; a probe step still
    # busy after this long is declared hung, leaving time to probe the rest without it
    "hang": runner.Stage(share=0.4, floor=2.0, cap=20.0),
    # the static stage's reads end by then (from the start), its thread is waited for until "static_wait":
    # in between it says what blocked it, before the run's deadline
    "static": runner.Stage(share=1.0, plus=-1.5, floor=0.5),
    "static_wait": runner.Stage(share=1.0, plus=-1.0, floor=1.0),
    # in each probe attempt the static step ends within "hang" of the attempt's start, waited for "step_wait"
    "step_wait": runner.Stage(share=0.4, plus=1.0, floor=3.0, cap=21.0),
    # no probe attempt starts after this (from the start): it could not say anything in time
    "probe": runner.Stage(share=1.0, plus=-0.5),
    # the --timeout a "run it again with a longer deadline" fix names (within the flag's range)
    "retry": runner.Stage(share=2.0, cap=3600.0),
}


def part(module, name):
    """A function of this package's `module`, imported when first called (see the module docstring)."""
    def call(*args):
        return getattr(importlib.import_module("sampling_checker." + module), name)(*args)
    call.__name__ = name
    return call


SPEC = runner.Spec(
    TOOL, build_parser, gather=part("run", "gather"), render=part("render", "render_sections"),
    rules=(part("rules", "diagnose"),), gates=part("rules", "evaluate_gates"), check=check,
    budget="timeout", stages=STAGES, markdown=part("render", "markdown"), summary=part("render", "summary"),
    interrupted=part("run", "interrupted_fix"), answers=(answer_schema, answer_wheels),
    watch=())  # a stray PyG in the probed interpreter is the checker's own finding (pyg-shadowed)
