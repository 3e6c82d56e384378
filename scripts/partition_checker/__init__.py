"""The partition checker behind check_partition.py: findings, the child that reads the folder (gather),
the rules, the parent that runs it (run) and the command line (cli)."""

# The entry file started with this flag (not a user flag) runs the child that loads the folder (diagnostics_core.entry).
CHILD_FLAG = "--internal-child-run"
CHILD_MODULE = "partition_checker.gather"
