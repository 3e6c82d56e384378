"""The checker's command line. Metadata commands (--help, --list-findings, --schema, --explain)
import nothing beyond this module and the shared library; the probe's modules load only for a run."""

import sys
import time

from diagnostics_core import cli as shared_cli
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
(pyg-lib, torch-sparse, torch-scatter, ...) and print one JSON document with
facts and findings (each with evidence, an exact fix and a docs anchor). Run it
before debugging a PyG scaling job.
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


def refuse_gates_without_probe(options):
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


def main(argv=None):
    started = time.time()
    options = None
    try:
        options = build_parser().parse_args(argv)
        if options.schema:
            from diagnostics_core.text import write_json
            from .schema import json_schema
            write_json(json_schema(), True)
            return EXIT_OK
        answered = shared_cli.metadata_command(TOOL, options)
        if answered is not None:
            return answered
        if options.wheels is not None:
            return wheels_command(options)
        refuse_gates_without_probe(options)
    except UsageError as error:
        return refuse(error, options, started)
    from .run import run
    return run(options, started)


def wheels_command(options):
    """--wheels: the wheel table read for one torch build; a metadata command, so no probe."""
    import platform
    from diagnostics_core import wheels
    from diagnostics_core.text import bounded, echo, write_json, write_text
    spec, python_version = options.wheels, tuple(sys.version_info[:3])
    if not spec:  # the probed interpreter's torch, read from its torch/version.py
        spec, python_version = installed_torch(options)
    parsed = wheels.parse_torch_spec(spec)
    if parsed is None:
        raise UsageError("check_sampling_backends.py: error: --wheels: %s is not TORCH[+VARIANT] in ASCII digits, "
                         "e.g. 2.14.1+cu126" % echo(spec), "usage-error", {
                             "wheels": bounded(spec), "message": "expected e.g. 2.14.1, 2.14.1+cpu, "
                                                                             "2.14.1+cu126"},
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


def installed_torch(options):
    """(version with its variant, Python version) of the torch the checker would probe; UsageError if none."""
    from diagnostics_core.wheels import parse_version
    from .parsing import cuda_variant
    import time
    from .budget import stage_bounds
    from .run import Terminal, pick_interpreter, run_static_in
    from .static_facts import gather_static_facts
    bounds = stage_bounds(options.timeout, time.time())
    python, choice, answer = pick_interpreter(options, Terminal(options), bounds)
    if python == sys.executable:
        static = gather_static_facts(bounds.deadline, import_psutil=False)
    else:
        static = run_static_in(python, options, bounds, answer, choice)
    build = static.get("torch_build") or {}
    if not build.get("version"):
        raise UsageError("check_sampling_backends.py: error: --wheels without a value needs torch in %s; "
                         "name a build instead" % python, "usage-error",
                         {"python": python, "message": "torch is not installed there"},
                         fix=checker_command("--wheels", "2.14.1+cu126"))
    variant = "rocm" if build.get("hip") else cuda_variant(build.get("cuda"))
    return "%s+%s" % (build["version"].split("+")[0], variant), parse_version(static["python"]["version"])


def refuse(error, options, started):
    from .render import output, render
    from diagnostics_core.markdown import stderr_line
    document, exit_code = render({}, [error.finding(TOOL)], {}, options, started, usage_error=True)
    output(document, options)  # first: a stdout that cannot take it ends the run with its own one line
    stderr_line(error.line)
    return exit_code
