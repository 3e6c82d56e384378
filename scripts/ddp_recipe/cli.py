"""The recipe's command line inside the skill. The recipe (scripts/ddp_neighbor_training.py) trains and keeps a
plain record of its job; here it runs on the one runner: refusals as findings, the /dev/shm diagnosis, the
interrupted document, the user's environment (the runner's). Self-spawn: this process is the parent, and the
ranks it starts run the recipe's functions alone (they import nothing of this). A launched rank (torchrun,
srun) trains as the recipe alone does, and its rank 0 hands the finished record to print_job."""

import os
import signal
import sys

import ddp_neighbor_training as recipe
from diagnostics_core import cli, runner, sandbox
from diagnostics_core.calls import stack_fix
from diagnostics_core.interrupt import Interrupted
from . import shm
from .findings import TOOL, backend_check_command
from .rules import RULES, gates


def build_parser():
    parser = cli.make_parser(TOOL, description=recipe.DESCRIPTION, epilog=recipe.EPILOG)
    recipe.add_arguments(parser)
    return parser


def refusal(message):
    message = str(message)
    return cli.UsageError("ddp_neighbor_training.py: error: %s" % message, "ddp-usage-error", {"message": message},
                          fix=TOOL.command("--help"))


def stack_refusal(message, missing):
    fix = "%s; then: %s" % (stack_fix(missing), backend_check_command())
    return cli.UsageError("ddp_neighbor_training.py: error: %s: %s" % (message, fix), "ddp-stack-missing",
                          {"error": message, "interpreter": sys.executable}, fix=fix)


STACK = ("torch", "torch_geometric")


def check(parser, options):
    try:
        recipe.check_arguments(options)
    except recipe.UsageError as error:
        raise refusal(error)
    missing = sandbox.missing_torch_stack()
    if missing:  # the recipe's refusal, with the checker's backend line after the install
        raise stack_refusal("ModuleNotFoundError: No module named %s -- this recipe needs torch and torch_geometric "
                            "in %s" % (" and ".join(repr(name) for name in missing), sys.executable), missing)


def end_job(processes):
    """The ranks and what they started (loader workers, found before the ranks go), SIGKILLed; -> their pids."""
    table = sandbox.process_table() or {}
    live = [process.pid for process in processes if process.is_alive()]
    ended = live + [pid for root in live for pid in sandbox.descendants_of(root, table)]
    for pid in ended:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for process in processes:
        process.join()
    return ended


def gather(run):
    """Self-spawn: run the job here and keep its record, with /dev/shm before and after."""
    if HANDED:
        return take_handed(run, HANDED[-1])
    options, facts = run.options, run.facts
    facts.update(python=sys.executable, argv=run.argv, shm=shm.state("free_bytes_at_start"))
    run.scratch()  # the ranks' and loader workers' temp files (PyG's templates, pymp-*) go with the run
    # multiprocessing starts the ranks with this interpreter's -W options; the runner reset this process's
    # filters, and the ranks get the same defaults (the finding names what the user set). Under -X dev the
    # ranks get -X dev too, and multiprocessing expects the "default" that dev mode put first.
    sys.warnoptions[:] = ["default"] if sys.flags.dev_mode else []
    job = facts["job"] = {}
    try:
        recipe.import_stack()
        with recipe.private_temp_dir():  # in the scratch, or in /tmp when the scratch's path is too long for sockets
            recipe.self_spawn(options, job, end=end_job)
    except recipe.StackMissing as error:
        raise stack_refusal(error, list(STACK))
    except recipe.UsageError as error:
        raise refusal(error)
    if job.get("refused") is not None:  # --load-per-rank: a rank refused the input
        raise refusal(job["refused"])
    after_job(run)


def after_job(run):
    facts = run.facts
    facts["shm"] = dict(facts.get("shm") or {}, **shm.state("free_bytes_at_end"))
    if run.options.data and os.path.isfile(run.options.data):
        facts["data_file_bytes"] = os.path.getsize(run.options.data)


HANDED = []  # a launched rank 0's finished job record, for print_job


def print_job(job, argv=None):
    """A launched job's rank 0, after training: its record as the tool's one document; -> the exit code."""
    HANDED.append(job)
    try:
        return runner.main(SPEC, argv)
    finally:
        HANDED.remove(job)


def take_handed(run, job):
    run.facts.update(job=job, python=sys.executable, argv=run.argv)
    if job.get("refused") is not None:
        if job.get("stack_missing"):
            raise stack_refusal(job["refused"], list(STACK))
        raise refusal(job["refused"])
    if job.get("interrupted"):  # torchrun stopped the rank: the runner's interrupted document, with the epochs
        raise Interrupted(job["interrupted"]["exit_code"] - 128)
    after_job(run)


HIDDEN = ("ok", "refused", "stack_missing", "interrupted")  # the envelope says these


def render(document, facts, options):
    document.update((key, value) for key, value in (facts.get("job") or {}).items() if key not in HIDDEN)


SPEC = runner.Spec(TOOL, build_parser, gather, render, rules=RULES, gates=gates, check=check, needs=STACK,
                   stack_missing_id="ddp-stack-missing")
