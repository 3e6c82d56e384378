"""The store contract checker behind check_store_contract.py: findings, the child that calls the stores
(gather), the rules, the parent that runs it (run) and the command line (cli)."""
