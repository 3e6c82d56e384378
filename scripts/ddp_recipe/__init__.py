"""The DDP recipe's finding registry (findings.json). The recipe itself is one file to copy,
scripts/ddp_neighbor_training.py; this folder holds only its data."""
