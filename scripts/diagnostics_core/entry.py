"""What a tool's entry file does, once for every tool: answer the metadata commands before argparse
loads, else run the tool its package declares (<package>.cli.SPEC) on the one runner; run as a script,
start the package's child when the command line is its private child flag.

An entry file only makes its own folder importable (and keeps it free of __pycache__), then imports its
package (a few constants: a reader and import tools see which package it runs) and hands it over; the
package's cli loads only after the metadata answers:
    import store_checker
    main = entry.tool_main(store_checker, "check_store_contract")
    if __name__ == "__main__":
        entry.run_script(main)
"""

import importlib
import sys

from . import fast, text


def tool_main(package, tool_name):
    """The tool's main(argv=None) -> exit code (console scripts call it too), for the package module the
    entry file imported."""
    name = package.__name__

    def main(argv=None):
        text.guard_standard_streams()
        answered = fast.answer(name, tool_name, argv)
        if answered is not None:
            return answered
        from . import runner
        return runner.main(importlib.import_module(name + ".cli").SPEC, argv)
    main.package = package  # the module itself: run_script reads its child's names from it
    return main


def run_script(main):
    """Exit with main()'s code, or, when argv is `<CHILD_FLAG> <options>`, with the package's child's.
    A package with a child names it in its __init__: CHILD_FLAG (not a user flag) and CHILD_MODULE."""
    if len(sys.argv) > 2 and sys.argv[1].startswith("--internal-child"):
        package = main.package
        if sys.argv[1] == getattr(package, "CHILD_FLAG", None):
            sys.exit(importlib.import_module(package.CHILD_MODULE).child_main(sys.argv[2]))
    sys.exit(main())
