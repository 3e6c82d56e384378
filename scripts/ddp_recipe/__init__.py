"""The DDP recipe inside the skill. The recipe itself is scripts/ddp_neighbor_training.py, one file a user copies
alone and edits; this package runs it on the skill's one runner (cli: SPEC) and turns its plain record of the
job into the skill's report (rules, shm: the /dev/shm diagnosis), with its finding registry (findings.json)."""
