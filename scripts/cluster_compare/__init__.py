"""The cluster comparison behind compare_reports.py: read one checker report per node, group the hosts
by each fact, and name what differs."""
