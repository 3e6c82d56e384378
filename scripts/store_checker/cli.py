"""The store checker's command line and its Spec on the one runner (diagnostics_core.runner); --help,
--list-findings and --explain are answered before this module loads (diagnostics_core.fast)."""

import os
import re

from diagnostics_core import calls, cli, runner
from .findings import SCRATCH_NAME, TOOL
from .rules import RULES
from .run import DEFAULT_SETUP_TIMEOUT, DEFAULT_TIMEOUT, gather, meta, render, rerun_words

WORKER_START_S = 10.0  # a worker's batch also forks and starts the worker


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
     exist (store-reference-not-found), torch/torch_geometric missing in
     this interpreter (store-stack-missing) or shadowed by a stray copy on
     PYTHONPATH or in the working folder (environment-package-shadowed);
     one line on stderr and a JSON document whose finding says so
  3  internal error in the checker; the JSON says so in "findings"

what it guarantees:
  Exactly one JSON document on stdout (anything the stores print goes to
  stderr). Read-only unless --write-check is given: only get_* calls are
  made, and the checker creates no file, directory (__pycache__ included)
  or socket outside its own folder under TMPDIR, which holds what the
  stores and the loader worker write to the temp dir and is removed however
  the run ends (a signal included). The stores run in a child process,
  each call in the thread that built them: a store call that crashes is
  reported (store-call-crashed), one that runs past --timeout is ended even
  when it blocks in C (store-call-timeout), after which no further calls
  are made. One batch also runs in a forked loader worker
  (store-fork-unsafe when only that fails); the worker, and processes the
  stores start, are ended with the child.

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


def check(parser, options):
    if options.stores and (options.feature_store or options.graph_store):
        parser.error("give either MODULE:CALLABLE or --feature-store/--graph-store, not both")
    if not options.stores and not (options.feature_store and options.graph_store):
        parser.error("give MODULE:CALLABLE, or both --feature-store and --graph-store")


# Every bound of a run, from --timeout and --setup-timeout; the child receives them as options.bounds.
STAGES = {
    "call_s": runner.Stage(flag="timeout"),                              # each store call: listings, reads, writes
    "import_s": runner.Stage(flag="setup_timeout"),                      # importing torch and PyG in the child
    "setup_s": runner.Stage(flag="setup_timeout"),                       # building the stores; a loader batch
    "worker_loader_s": runner.Stage(plus=WORKER_START_S, flag="timeout"),  # the loader's own wait for its worker
}

SPEC = runner.Spec(TOOL, build_parser, gather, render, rules=RULES, gates=runner.error_gate("contract"), check=check,
                   needs=runner.STACK, stack_missing_id="store-stack-missing", stages=STAGES, meta=meta,
                   interrupted=calls.rerun_after_signal(TOOL, rerun_words, "store call"))
