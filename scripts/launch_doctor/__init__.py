"""The launch doctor behind check_launch.py: read a job script, its launch lines and its logs without
running them, compute the topology they start, and name the launch mistakes in it."""
