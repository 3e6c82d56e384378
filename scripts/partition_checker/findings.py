"""The partition checker's name, versions, finding table and the limits it reads folders under."""

from diagnostics_core.contract import Tool, registered_findings


SCHEMA_VERSION = "1.0"


VERSION = "1.0.0"




DEFAULT_TIMEOUT = 120.0


DEFAULT_MAX_PARTS = 256  # parts examined; each adds a few kilobytes of JSON and its files' load time


MAX_PARTS_LIMIT = 100000


MAX_TYPES = 1000  # node or edge types in META.json; more is not a graph PyG's Partitioner wrote


LIST_SHOWN = 64  # part numbers quoted per layout list


META_MAX_BYTES = 1 << 20


META_MAX_DEPTH = 32


META_SHOWN_BYTES = 8192  # META.json content quoted in the JSON up to this size


META_KEYS = ("num_parts", "node_types", "edge_types", "node_offset", "is_hetero", "is_sorted")


PART_FILES = ("graph.pt", "node_feats.pt", "edge_feats.pt")


EXAMPLES_SHOWN = 5  # offending ids quoted per problem


FEATURES_SHOWN = 256  # features described per type and part; a file may hold any number


NAME_LIMIT = 256  # characters of a feature name kept


FINDINGS = registered_findings("partition_checker")  # id -> (severity, title)


TOOL = Tool("check_partition", VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="partition-usage-error", internal_id="partition-checker-internal-error",
            interrupted_id="partition-interrupted")


finding = TOOL.finding
