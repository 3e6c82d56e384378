"""What every tool of the skill shares, once: the report contract (findings, verdict, exit codes,
usage errors, --list-findings, --explain), strict JSON output, markdown and terminal escaping with
redaction, the sandbox that runs code we do not control, and what a stop signal or an unwritable
stdout ends a run with.

Standard library only, importable by CPython 3.8+. No tool imports another tool; they all import this.
"""
