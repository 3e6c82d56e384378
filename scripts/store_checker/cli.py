"""The store checker's command line: metadata commands (--help, --list-findings, --explain) load
nothing beyond this module, the finding table and the shared library."""

import os
import re
import time

from diagnostics_core import calls, cli
from diagnostics_core.calls import CallerState
from diagnostics_core.markdown import stderr_line
from .budget import DEFAULT_SETUP_TIMEOUT, DEFAULT_TIMEOUT
from .findings import SCRATCH_NAME, TOOL
from .run import render, run_child



USAGE = """\
%(prog)s MODULE:CALLABLE [options]
       %(prog)s --feature-store MODULE:CALLABLE --graph-store MODULE:CALLABLE [options]
       %(prog)s --list-findings"""


EPILOG = """\
store references:
  MODULE:CALLABLE    MODULE is a dotted module importable from a --path
                     directory or the current directory (e.g. mypkg.stores),
                     or a path to a .py file (e.g. ./stores.py). CALLABLE
                     (dotted names allowed) is called with no arguments; it
                     may also name a ready object. The positional form must
                     give a (FeatureStore, GraphStore) pair; --feature-store
                     and --graph-store each give one store. Run from the
                     skill's folder, add --path /your/project so that MODULE
                     is found there.

exit codes:
  0  the gate "contract" passed: no error finding (warnings or info may remain)
  1  the gate "contract" failed: at least one error finding
  2  usage error: a bad flag or value, a MODULE or CALLABLE that does not
     exist (store-reference-not-found), or torch/torch_geometric missing in
     this interpreter (store-stack-missing); one line on stderr and a JSON
     document whose finding says so
  3  internal error in the checker; the JSON says so in "findings"

what it guarantees:
  Exactly one JSON document on stdout (anything the stores print goes to
  stderr). Read-only unless --write-check is given: only get_* calls are
  made, and no file, directory (__pycache__ included) or socket is created
  by the checker. The stores run in a child process, each call in the
  thread that built them: a store call that crashes is reported
  (store-call-crashed), one that runs past --timeout is ended even when it
  blocks in C (store-call-timeout), after which no further calls are made.
  One batch also runs in a forked loader worker (store-fork-unsafe when
  only that fails); the worker, and processes the stores start, are ended
  with the child.

examples:
  python scripts/check_store_contract.py mypkg.stores:make_stores --pretty
  python scripts/check_store_contract.py ./stores.py:build --timeout 30
  python scripts/check_store_contract.py --feature-store mypkg.fs:FS --graph-store mypkg.gs:GS
  python scripts/check_store_contract.py mypkg.stores:make_stores --write-check
  python scripts/check_store_contract.py mypkg.stores:make_stores | jq '.findings[] | {id, fix}'
"""


DESCRIPTION = """\
Validate a custom FeatureStore/GraphStore pair against PyG's CRUD and sampling
contract before training: attribute listings, tensor types, dtypes, row counts,
get_tensor_size, indexed reads, edge-index layouts, missing-key behaviour and
one real NeighborLoader batch. Prints one JSON document with findings (evidence,
fix, docs anchor).
"""


def build_parser():
    parser = cli.make_parser(TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("stores", nargs="?", metavar="MODULE:CALLABLE", type=reference,
                        help="callable returning a (FeatureStore, GraphStore) pair")
    parser.add_argument("--feature-store", metavar="MODULE:CALLABLE", type=reference,
                        help="callable returning the FeatureStore (use with --graph-store)")
    parser.add_argument("--graph-store", metavar="MODULE:CALLABLE", type=reference,
                        help="callable returning the GraphStore (use with --feature-store)")
    parser.add_argument("--path", metavar="DIR", action="append", default=[], type=directory,
                        help="directory to import MODULE from, searched before the current directory "
                             "(repeatable); needed when running from the skill's folder")
    parser.add_argument("--write-check", action="store_true",
                        help="also put, overwrite and remove a scratch feature '%s' and a scratch edge type, "
                             "restoring what was there (off by default: the store may be a live service)"
                             % SCRATCH_NAME)
    parser.add_argument("--skip-sampling", action="store_true",
                        help="do not build a NeighborLoader batch over the stores")
    cli.add_seconds(parser, "--timeout", DEFAULT_TIMEOUT, "bound on each store call")
    cli.add_seconds(parser, "--setup-timeout", DEFAULT_SETUP_TIMEOUT,
                    "bound on building the stores and on the NeighborLoader batch")
    return parser


def reference(text):
    import argparse
    module_part, colon, attr_path = text.rpartition(":")
    if not colon or not module_part or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", attr_path):
        raise argparse.ArgumentTypeError("expected MODULE:CALLABLE (e.g. mypkg.stores:make_stores), got %r" % text)
    if module_part.endswith(".py"):
        if not os.path.isfile(module_part):
            raise argparse.ArgumentTypeError("no such file: %r" % module_part)
    elif not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module_part):
        raise argparse.ArgumentTypeError("%r is neither a dotted module name nor a .py file" % module_part)
    return text


def directory(text):
    import argparse
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError("--path %r is not a directory" % text)
    return os.path.abspath(text)


class NoOptions:
    """Stand-in for parsed options when the command line itself was the problem."""
    timeout = setup_timeout = None
    write_check = False
    path = ()


def check_command_line(parser, options):
    if options.stores and (options.feature_store or options.graph_store):
        parser.error("give either MODULE:CALLABLE or --feature-store/--graph-store, not both")
    if not options.stores and not (options.feature_store and options.graph_store):
        parser.error("give MODULE:CALLABLE, or both --feature-store and --graph-store")
    calls.require_torch_stack(TOOL, "store-stack-missing")


def main(argv=None):
    started = time.time()
    options, answered = cli.parse_or_answer(TOOL, build_parser(), argv, check_command_line, lambda finding: render(
        {}, [finding], NoOptions(), CallerState(), started, usage_error=True)[0])
    if options is None:
        return answered
    from .rules import diagnose  # the rules load only for a run

    def report(facts, findings, state, internal_error=None, interrupted=None):
        # A store reference that names nothing is a usage error found by the child, not by argparse.
        not_found = internal_error is None and interrupted is None and (
            facts.get("setup") or {}).get("status") == "not-found"
        if not_found:
            stderr_line("check_store_contract.py: error: %s (store-reference-not-found)" % facts["setup"]["error"])
        return render(facts, findings, options, CallerState() if state is None else state, started,
                      usage_error=not_found, internal_error=internal_error, interrupted=interrupted)
    return calls.run_checker(options, run_child, diagnose, report)
