"""The store contract checker behind check_store_contract.py: findings, the child that calls the stores
(gather), the rules, the parent that runs it (run) and the command line (cli)."""

# The entry file started with this flag (not a user flag) runs the child that calls the stores (diagnostics_core.entry).
CHILD_FLAG = "--internal-child-run"
CHILD_MODULE = "store_checker.gather"
