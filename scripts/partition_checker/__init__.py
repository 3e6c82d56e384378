"""The partition checker behind check_partition.py: findings, the child that reads the folder (gather),
the rules, the parent that runs it (run) and the command line (cli)."""
