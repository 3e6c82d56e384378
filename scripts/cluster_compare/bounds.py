"""What a document shows of a comparison, bounded whatever the number of reports: a fixed number of hosts
per list, of values per fact, of reports, each report's text cut, and always the counts of the rest. The
rules decide on every node; only what is shown is cut."""

import json

from diagnostics_core.text import sanitise_text

HOSTS_NAMED = 8       # hosts named in one list; "count" says how many there are
GROUPS_LISTED = 6     # values listed per fact (largest groups first); the rest are counted
REPORTS_LISTED = 24   # reports in the document's "reports" section; "counts" has the total
COMMANDS_LISTED = 3   # distinct commands in one fix; the hosts that need others are counted
RANKS_LISTED = 64     # missing ranks listed
TEXT_CHARS = 256      # characters of a value, path or fix shown from a report (a fix's own words are whole)
ITEMS_LISTED = 8      # items of a list from a report shown (network interfaces, a version list)
# A fix stays whole: the document cuts any longer text (diagnostics_core.text.TEXT_LIMIT), and a command cut
# in its middle could lose a closing quote. Commands that do not fit are counted, not printed.
FIX_CHARS = 3000
VALUE_IN_FIX_CHARS = 1024  # a launch value longer than this is not exported (a host name has at most 253)

# The document's size whatever the number of reports, with every text from the reports at its longest
# (tests/fast/test_compare_bounds.py builds that case): --help and troubleshooting.md state it.
DOCUMENT_MAX_BYTES = 256 << 10


def text(value):
    """A text from a report as shown (head and tail of a long one)."""
    return sanitise_text(value, TEXT_CHARS) if isinstance(value, str) else value


def value(item):
    """A compared value as shown: a long text or list is cut (the grouping used the whole value)."""
    if isinstance(item, list):
        if len(item) <= ITEMS_LISTED and len(json.dumps(item)) <= TEXT_CHARS:
            return item
        return text(json.dumps(item))
    return text(item)


def items(values):
    """A list from a report as shown: its first ITEMS_LISTED items, each cut."""
    return [text(v) for v in values[:ITEMS_LISTED]]


def hosts(nodes, members):
    """{count, hosts}: how many nodes, and the labels of the first HOSTS_NAMED."""
    return {"count": len(members), "hosts": [nodes[i]["label"] for i in members[:HOSTS_NAMED]]}


def groups(nodes, grouped):
    """(the first GROUPS_LISTED groups as {value, count, hosts}, None or {values, hosts} of the rest)."""
    shown = [dict(hosts(nodes, g["members"]), value=value(g["value"])) for g in grouped[:GROUPS_LISTED]]
    rest = grouped[GROUPS_LISTED:]
    return shown, ({"values": len(rest), "hosts": sum(len(g["members"]) for g in rest)} if rest else None)


def entry(item):
    """A report as the document's "reports" section lists it."""
    return {"file": text(item["file"]), "hostname": text(item["hostname"]), "host": item["host"],
            "label": item.get("label", item["host"]), "rank": item["rank"], "rank_variable": item["rank_variable"],
            "world_size": item["world_size"], "checker_status": text(item["checker_status"]),
            "schema_version": text(item["schema_version"])}
