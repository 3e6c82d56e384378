"""What every tool of the skill shares, once: the report contract (findings, verdict, exit codes,
usage errors, --list-findings, --explain), strict JSON output, markdown and terminal escaping with
redaction, and the sandbox that runs code we do not control.

Standard library only, importable by CPython 3.8+. No tool imports another tool; they all import this.
"""
