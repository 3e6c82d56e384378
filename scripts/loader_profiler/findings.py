"""The profiler's name, versions and finding table: what --list-findings and --explain answer from."""

from diagnostics_core.contract import Tool


# MAJOR changes when a key is removed or renamed or changes meaning; MINOR when keys or ids are added.
SCHEMA_VERSION = "1.0"
VERSION = "1.0.0"

# id -> (default severity, title); each id has a `### id` section in references/troubleshooting.md.
FINDINGS = {
    "profile-loader-usage-error": ("error", "the command line asks for something the profiler cannot do"),
    "profile-loader-internal-error": ("error", "the profiler itself failed"),
    "loader-stack-missing": ("error", "torch or torch_geometric is not importable by this interpreter"),
    "loader-no-sampler-backend": ("error", "no neighbour-sampling backend (pyg-lib or torch-sparse)"),
    "loader-data-unsafe-pickle": ("error", "the data file holds pickled objects that only weights_only=False loads"),
    "loader-data-load-failed": ("error", "the data file does not load as a Data or HeteroData"),
    "loader-store-failed": ("error", "the store factory did not give a (FeatureStore, GraphStore) pair"),
    "loader-setup-failed": ("error", "the loader cannot be built with these settings"),
    "loader-config-failed": ("warning", "a loader configuration raised while it was measured"),
    "loader-config-hung": ("error", "a loader configuration did not finish within its time bound"),
    "loader-rank-crashed": ("error", "a loader process died while it was measured"),
    "loader-budget-short": ("warning", "the budget ran out before every planned configuration was measured"),
    "loader-faster-settings": ("info", "measured faster loader settings than the default"),
    "loader-default-is-best": ("info", "no configuration beat the default loader by more than the noise"),
    "loader-sampler-bound": ("info", "neighbour sampling takes most of a batch's time"),
    "loader-fetch-bound": ("info", "feature fetch takes most of a batch's time"),
    "loader-threads-oversubscribed": ("warning", "fewer torch threads measured faster: threads oversubscribe the cores"),
    "loader-affinity-hurts": ("warning", "CPU affinity measured slower than no affinity"),
    "loader-worker-startup-unpaid": ("warning", "worker start-up per epoch costs more than the workers save"),
    "loader-shm-too-small": ("warning", "shared memory (/dev/shm) is too small for the loader workers"),
}

TOOL = Tool("profile_loader", VERSION, SCHEMA_VERSION, FINDINGS, usage_id="profile-loader-usage-error",
            internal_id="profile-loader-internal-error", meta_key="tool")
finding = TOOL.finding
