"""Rules: the partition facts -> findings, each a small function with a stable id."""

import json
import os
import sys

from diagnostics_core import calls, command
from diagnostics_core.contract import SCRIPTS
from .findings import MAX_PARTS_LIMIT, TOOL, finding
from .run import rerun_words, shown_meta


REPARTITION = ("re-run torch_geometric.distributed.Partitioner(data, num_parts, root).generate_partition() with "
               "the installed PyG into an empty folder and copy that folder whole to every machine")


def rule_meta(facts, options):
    meta = facts["meta"]
    if not meta["present"]:
        return [finding("partition-meta-missing", {"root": facts["root"], "layout": facts["layout"]},
                        fix="point at the folder Partitioner wrote (it holds META.json and part_0/...), or %s"
                            % REPARTITION)]
    if meta["error"] or meta["problems"]:
        return [finding("partition-meta-invalid", {"error": meta["error"], "problems": meta["problems"][:20],
                                                   "content": shown_meta(meta["content"])},
                        fix="%s; PyG %s reads num_parts, is_hetero, is_sorted, node_types and edge_types from it"
                            % (REPARTITION, facts["loading"]["torch_geometric"]))]
    return []


def rule_layout(facts, options):
    layout = facts["layout"]
    found = []
    if layout["missing"]:
        found.append(finding("partition-part-missing", {"missing": layout["missing"],
                                                        "missing_count": layout["missing_count"],
                                                        "found": layout["parts_found"],
                                                        "found_count": layout["parts_found_count"],
                                                        "misnamed": layout["misnamed"]},
                             fix="copy the missing part_N/ folders from the machine that ran the Partitioner "
                                 "(PyG names them part_0, part_1, ...), or %s" % REPARTITION))
    if layout["unexpected"]:
        found.append(finding("partition-part-unexpected", {"unexpected": layout["unexpected"],
                                                           "unexpected_count": layout["unexpected_count"],
                                                           "num_parts": layout["num_parts_expected"]},
                             fix="these folders come from an earlier run with more parts; partition into an "
                                 "empty folder so stale parts cannot mix in"))
    return found


def load_problem_findings(facts, options):
    """Missing, unloadable, unsafe or timed-out files, wherever they are."""
    found = []
    files = []
    for kind in ("node", "edge"):
        files.extend((None, entry) for entry in ((facts["maps"] or {}).get(kind) or {}).values())
    for part in facts["parts"]:
        files.extend((part["index"], entry) for entry in part.get("files", {}).values())
    by_status = {}
    for pid, entry in files:
        by_status.setdefault(entry["status"], []).append(dict(entry, part=pid))
    missing = by_status.get("missing", [])
    required = [e for e in missing if not e["path"].endswith(("node_feats.pt", "edge_feats.pt"))]
    optional = [e for e in missing if e not in required]
    if required:
        found.append(finding("partition-file-missing", {"files": required},
                             fix="copy the complete folder again (an interrupted copy is the usual cause), or %s"
                                 % REPARTITION))
    if optional:
        found.append(finding("partition-file-missing", {"files": optional}, severity="warning",
                             fix="from_partition loads without it, but the part then has no node or edge "
                                 "features; copy the complete folder again"))
    outside = by_status.get("outside-root", [])
    if outside:
        found.append(finding("partition-path-outside-root", {"files": outside[:20], "count": len(outside),
                                                             "root": facts["root"]},
                             fix="type names in META.json must be plain names (no '/' or '..', no symbolic links "
                                 "out of the folder); nothing outside ROOT was opened; %s" % REPARTITION))
    # A file is rewritten or loaded with weights_only=False only after the scan proved it holds nothing
    # but containers and tensors; anything else is reported as code, with no command that would load it.
    holds_code = [e for e in files_of(by_status, "error", "pickle-fallback-not-run", "pickle-holds-code")
                  if e.get("scan") is not None and (e["scan"].get("refused") or (
                      not e["scan"].get("safe") and (e["status"] != "error" or e.get("cause"))))]
    errors = [e for e in by_status.get("error", []) if e not in holds_code]
    defaultdicts = [e for e in errors if e.get("cause") == "defaultdict-weights-only"]
    others = [e for e in errors if e not in defaultdicts]
    if holds_code:
        found.append(finding("partition-pickle-holds-code", {"files": holds_code[:20], "count": len(holds_code)},
                             fix="do not load these files (no --allow-pickle, no torch.load without weights_only=True): "
                                 "unpickling them imports or calls what evidence.files[].scan.refused names. "
                                 "Delete the folder and %s, on a machine you trust" % REPARTITION))
    if defaultdicts:
        found.append(finding("partition-edge-feats-unloadable", {"files": defaultdicts,
                                                                 "torch": facts["loading"]["torch"]},
                             fix=edge_feats_fix(facts["root"], [e["path"] for e in defaultdicts])))
    if others:
        found.append(finding("partition-file-unloadable", {"files": others},
                             fix="the file is truncated or corrupt (or saved by a newer torch); copy it again "
                                 "from the source, or %s" % REPARTITION))
    on_meta = by_status.get("meta-device", [])
    if on_meta:
        found.append(finding("partition-tensor-on-meta-device", {"files": on_meta[:20], "count": len(on_meta)},
                             fix="these files hold tensors on the meta device: shapes without values (a tensor "
                                 "made under `with torch.device('meta')`, or saved before it was loaded); "
                                 "%s from the real data" % REPARTITION))
    unsafe = [e for e in files_of(by_status, "pickle-fallback-not-run", "pickle-fallback-loaded")
              if e not in holds_code]
    if unsafe:
        found.append(finding("partition-pickle-fallback", {"files": unsafe},
                             fix="save these files with tensors, dicts and lists only; the scan found nothing but "
                                 "those in them, so rerun with --allow-pickle to check their contents: %s"
                                 % TOOL.command(*rerun_words(options, allow_pickle=True))))
    return found


def files_of(by_status, *statuses):
    return [entry for status in statuses for entry in by_status.get(status, [])]


def edge_feats_fix(root, relative_paths):
    """Rewrite the named edge_feats.pt files as plain dicts, which weights_only loading accepts (tested).

    Only files the scan proved to hold containers and tensors get here; the rewrite scans each
    again and loads it through safe_pickle's restricted unpickler, so a file changed since this
    check is left alone. Paths travel as arguments, never inside the program text.
    """
    root = root.rstrip(os.sep)
    program = ("import sys; sys.path.insert(0, sys.argv[1]); from diagnostics_core import safe_pickle; "
               "sys.exit(safe_pickle.rewrite_as_dict(sys.argv[2:]))")
    # The interpreter running this checker has the torch that must load the files. The backup is made only
    # where none is yet (cp -a into an existing folder would nest the copy inside it).
    backup = root + ".bak"
    return command.line("test", "!", "-e", backup, command.Raw("&&"), "cp", "-a", root, backup,
                        command.Raw("&&"), sys.executable, "-B", "-c", program, SCRIPTS,
                        [os.path.join(root, path) for path in relative_paths])


def rule_maps(facts, options):
    maps = facts["maps"]
    if not maps:
        return []
    found = []
    bad = {}
    for kind in ("node", "edge"):
        for key, entry in maps[kind].items():
            if entry.get("problem") or entry.get("invalid_part_ids"):
                bad["%s_map %s" % (kind, json.loads(key))] = {k: entry.get(k) for k in (
                    "path", "type", "dtype", "shape", "problem", "invalid_part_ids")}
    if bad:
        found.append(finding("partition-map-invalid", {"maps": bad},
                             fix="each map must be an int64 tensor holding a part id in [0, num_parts) per node "
                                 "or edge; %s" % REPARTITION))
    if maps.get("extra_files"):
        found.append(finding("partition-types-mismatch", {"map_files_for_unlisted_types": maps["extra_files"]},
                             fix="META.json and node_map/, edge_map/ come from different runs; %s" % REPARTITION))
    return found


def iter_edge_summaries(facts):
    for part in facts["parts"]:
        for key, summary in part.get("graph", {}).get("per_type", {}).items():
            yield part["index"], key, summary


def iter_node_summaries(facts):
    for part in facts["parts"]:
        for key, summary in part.get("nodes", {}).get("per_type", {}).items():
            yield part["index"], key, summary


def rule_graph(facts, options):
    found, invalid, unsorted, size_mismatch, types = [], [], [], [], []
    for part in facts["parts"]:
        graph = part.get("graph", {})
        if graph.get("problem"):
            invalid.append({"part": part["index"], "problem": graph["problem"]})
        if graph.get("unknown_keys") or graph.get("missing_edge_types"):
            types.append({"part": part["index"], "file": "graph.pt", "unknown": graph.get("unknown_keys"),
                          "missing": graph.get("missing_edge_types")})
    for pid, key, summary in iter_edge_summaries(facts):
        if summary.get("problem"):
            invalid.append({"part": pid, "edge_type": key, "problem": summary["problem"]})
            continue
        if summary.get("row_out_of_range") or summary.get("col_out_of_range"):
            invalid.append({"part": pid, "edge_type": key, "size": summary["size"],
                            "row_out_of_range": summary["row_out_of_range"],
                            "col_out_of_range": summary["col_out_of_range"]})
        expected = summary.get("expected_size")
        if expected and None not in expected and summary["size"] != expected:
            size_mismatch.append({"part": pid, "edge_type": key, "graph_size": summary["size"],
                                  "node_map_lengths": expected})
        if (facts["meta"]["content"] or {}).get("is_sorted") is True and not summary.get("sorted_by_destination", True):
            unsorted.append({"part": pid, "edge_type": key})
    for finding_id, key, problems, fix in (
            ("partition-graph-invalid", "problems", invalid,
             "graph.pt must hold edge_id, row, col (1-D int64, one entry per edge, ids below size) and "
             "size=(num_src, num_dst)"),
            ("partition-map-size-mismatch", "problems", size_mismatch,
             "the node map does not describe this graph (truncated or from another run); copy node_map* again"),
            ("partition-graph-not-sorted", "parts", unsorted,
             "set \"is_sorted\": false in META.json (PyG then sorts on load); with the wrong flag PyG builds a "
             "wrong CSC and samples wrong neighbours"),
            ("partition-types-mismatch", "problems", types,
             "graph.pt and META.json edge_types come from different runs")):
        if problems:
            found.append(finding(finding_id, {key: problems[:20]}, fix="%s; or %s" % (fix, REPARTITION)))
    return found


def rule_edge_map_sizes(facts, options):
    maps, coverage = facts["maps"], facts["coverage"]
    if not maps or not coverage or not coverage["complete"]:
        return []
    problems = []
    for key, entry in maps["edge"].items():
        stored = coverage["edges_stored"].get(key)
        if entry.get("length") is not None and stored is not None and entry["length"] != stored:
            problems.append({"edge_type": json.loads(key), "edge_map_length": entry["length"],
                             "edges_stored_in_parts": stored})
    if not problems:
        return []
    return [finding("partition-map-size-mismatch", {"problems": problems},
                    fix="edge_map does not describe the edges stored in the parts (truncated or from another "
                        "run); copy edge_map* again or %s" % REPARTITION)]


def rule_coverage(facts, options):
    found = []
    coverage = facts["coverage"]
    if not coverage:
        return found
    for kind, finding_id, elsewhere_key in (("nodes", "partition-node-coverage", "nodes_mapped_elsewhere"),
                                            ("edges", "partition-edge-coverage", "edges_mapped_elsewhere")):
        problems = [dict(entry, type=json.loads(key)) for key, entry in coverage[kind].items()
                    if (entry["missing"] and coverage["complete"]) or entry["repeated"]]
        summaries = iter_node_summaries(facts) if kind == "nodes" else iter_edge_summaries(facts)
        for pid, key, summary in summaries:
            if summary.get(elsewhere_key):
                problems.append({"part": pid, "type": key, elsewhere_key: summary[elsewhere_key],
                                 "examples": summary.get(elsewhere_key + "_examples")})
            if summary.get("ids_out_of_range") or summary.get("edge_ids_out_of_range"):
                problems.append({"part": pid, "type": key, "ids_out_of_range": summary.get(
                    "ids_out_of_range") or summary.get("edge_ids_out_of_range")})
            if kind == "edges" and summary.get("destination_not_owned"):
                problems.append({"part": pid, "type": key, "destination_not_owned": summary["destination_not_owned"]})
        if problems:
            found.append(finding(finding_id, {"problems": problems[:20]},
                                 fix="every %s must be stored in exactly the part its map names; parts from "
                                     "different runs were mixed or files are incomplete; %s"
                                     % (kind[:-1], REPARTITION)))
    return found


def rule_offsets(facts, options):
    maps = facts["maps"]
    meta = facts["meta"]["content"] or {}
    if not maps or meta.get("is_hetero") is not True or facts["meta"]["problems"]:
        return []
    problems = []
    running = 0
    for node_type, offset in zip(meta["node_types"], meta["node_offset"]):
        if running is not None and offset != running:
            problems.append({"node_type": node_type, "meta_offset": offset, "sum_of_earlier_map_lengths": running})
        length = maps["node"].get(json.dumps(node_type), {}).get("length")
        running = running + length if running is not None and length is not None else None
    for pid, key, summary in iter_node_summaries(facts):
        if summary.get("offset_mismatches"):
            problems.append({"part": pid, "node_type": key, "global_id_minus_offset_differs_from_id":
                             summary["offset_mismatches"]})
    if not problems:
        return []
    return [finding("partition-offset-mismatch", {"problems": problems[:20]},
                    fix="node_offset must be the running sum of node counts in node_types order; META.json and "
                        "the files come from different runs; %s" % REPARTITION)]


def rule_features(facts, options):
    problems, types, empty = [], [], []
    for part in facts["parts"]:
        nodes = part.get("nodes", {})
        if nodes.get("problem"):
            problems.append({"part": part["index"], "file": "node_feats.pt", "problem": nodes["problem"]})
        if nodes.get("unknown_keys") or nodes.get("missing_node_types"):
            types.append({"part": part["index"], "file": "node_feats.pt", "unknown": nodes.get("unknown_keys"),
                          "missing": nodes.get("missing_node_types")})
        edges = part.get("edge_features", {})
        if edges.get("problem"):
            problems.append({"part": part["index"], "file": "edge_feats.pt", "problem": edges["problem"]})
        for key, summary in edges.get("per_type", {}).items():
            problems.extend(feature_problems(part["index"], "edge_feats.pt", key, summary))
            if summary.get("ids_match_graph") is False:
                problems.append({"part": part["index"], "file": "edge_feats.pt", "type": key,
                                 "problem": "global_id does not list the part's edges from graph.pt"})
    for pid, key, summary in iter_node_summaries(facts):
        if summary.get("problem"):
            problems.append({"part": pid, "file": "node_feats.pt", "type": key, "problem": summary["problem"]})
            continue
        problems.extend(feature_problems(pid, "node_feats.pt", key, summary))
        if summary.get("num_nodes") == 0:
            empty.append({"part": pid, "node_type": json.loads(key) if key != "nodes" else None})
    for key, by_part in (facts.get("feature_shapes") or {}).items():
        if len({json.dumps(v) for v in by_part.values()}) > 1:
            problems.append({"feature": json.loads(key), "problem": "dtype or width differs between parts",
                             "by_part": by_part})
    found = []
    if problems:
        found.append(finding("partition-feature-mismatch", {"problems": problems[:20]},
                             fix="each feature needs one row per id in its global_id, the same dtype and width "
                                 "in every part, and edge features must list the part's own edges; %s"
                                 % REPARTITION))
    if types:
        found.append(finding("partition-types-mismatch", {"problems": types[:20]},
                             fix="node_feats.pt and META.json node_types come from different runs; %s"
                                 % REPARTITION))
    if empty:
        found.append(finding("partition-empty-part", {"parts": empty[:20]},
                             fix="PyG cannot load a part that owns no node of some type (global_id.max() of an "
                                 "empty tensor); partition into fewer parts so every part owns nodes of every "
                                 "type"))
    return found


def feature_problems(pid, file, key, summary):
    problems = []
    for name, entry in (summary.get("features") or {}).items():
        if name == "problem":
            problems.append({"part": pid, "file": file, "type": key, "problem": entry})
        elif entry.get("type") != "torch.Tensor":
            problems.append({"part": pid, "file": file, "type": key, "feature": name,
                             "problem": "is %s, not a tensor" % entry.get("type")})
        elif entry.get("expected_rows") is not None and (entry["shape"] or [None])[0] != entry["expected_rows"]:
            problems.append({"part": pid, "file": file, "type": key, "feature": name,
                             "rows": (entry["shape"] or [None])[0], "expected_rows": entry["expected_rows"]})
    for field in ("time", "edge_time"):
        entry = summary.get(field)
        if entry and entry.get("expected_rows") is not None and (entry.get("shape") or [None])[0] != entry[
                "expected_rows"]:
            problems.append({"part": pid, "file": file, "type": key, "feature": field,
                             "rows": (entry.get("shape") or [None])[0], "expected_rows": entry["expected_rows"]})
    return problems


def rule_from_partition(facts, options):
    failing = {}
    for part in facts["parts"]:
        for store, verdict in part.get("from_partition", {}).items():
            if verdict["loads"] is False:
                failing.setdefault(str(part["index"]), {})[store] = verdict["error"]
    if not failing:
        return []
    shown = dict(list(failing.items())[:20])
    return [finding("partition-from-partition-fails", {"parts": shown, "parts_failing": len(failing),
                                                       "torch": facts["loading"]["torch"],
                                                       "torch_geometric": facts["loading"]["torch_geometric"]},
                    fix="apply the fixes of the other error findings (they name the cause); the errors are what "
                        "LocalGraphStore/LocalFeatureStore.from_partition raise on this machine")]


def rule_labels(facts, options):
    labels = facts["labels"]
    if labels is None:
        return []
    found = []
    if not labels["labels"] and not labels["features_named_y"]:
        found.append(finding("partition-labels-missing", {"searched": labels["paths_searched"]},
                             fix="Partitioner writes no labels: save them beside the folder, e.g. "
                                 "torch.save(data.y, '<parent>/<name>-label/label.pt'), and set "
                                 "feature_store.labels after from_partition"))
    problems = []
    for entry in labels["labels"]:
        if entry["status"] not in ("ok", "pickle-fallback-loaded"):
            problems.append({"path": entry["path"], "status": entry["status"], "error": entry.get("error")})
        elif entry.get("type") != "torch.Tensor" or not entry.get("shape"):
            problems.append({"path": entry["path"], "problem": "not a tensor with one row per node",
                             "type": entry.get("type")})
        elif entry.get("expected_rows") is None:
            problems.append({"path": entry["path"], "rows": entry["shape"][0],
                             "problem": "matches no node type's count; pass --label-node-type"})
        elif entry["shape"][0] != entry["expected_rows"]:
            problems.append({"path": entry["path"], "rows": entry["shape"][0], "node_type": entry.get("node_type"),
                             "expected_rows": entry["expected_rows"]})
    if problems:
        found.append(finding("partition-labels-invalid", {"problems": problems},
                             fix="save the full label tensor of the labelled node type, indexed by its global "
                                 "node id (e.g. torch.save(data.y, path) for the data you partitioned)"))
    seed_problems = []
    for name, split in labels["seeds"].items():
        for pid, entry in split["files"].items():
            if entry["status"] not in ("ok", "pickle-fallback-loaded"):
                seed_problems.append({"split": name, "part": int(pid), "status": entry["status"],
                                      "error": entry.get("error")})
            elif entry.get("index") is False or entry.get("out_of_range"):
                seed_problems.append({"split": name, "part": int(pid), "index_tensor": entry.get("index"),
                                      "out_of_range": entry.get("out_of_range"),
                                      "id_upper_bound": split["id_upper_bound"]})
    if seed_problems:
        found.append(finding("partition-seeds-invalid", {"problems": seed_problems[:20]},
                             fix="write one partition<N>.pt per part holding an int64 tensor of node ids of "
                                 "the labelled type, as PyG's example partition_graph.py does"))
    return found


def rule_crash(facts, options):
    crash = facts.get("crash")
    if not crash:
        return []
    return [finding("partition-load-crashed", crash,
                    fix="rewrite the file named in evidence.call (plain tensors and dicts, torch.save) on the "
                        "machine that wrote the partition, or repartition; evidence.stderr_tail holds the "
                        "Python stack of the crash")]


def rule_timeout(facts, options):
    timed_out = facts["caller"]["timed_out"]
    if timed_out is None:
        return []
    longer = calls.retry_timeout(timed_out.get("timeout_s") or options.timeout)
    return [finding("partition-load-timeout", timed_out,
                    fix="the filesystem did not deliver the file in time (network mount?): copy the folder to "
                        "local disk, or allow slower loads: %s" % TOOL.command(*rerun_words(options, timeout=longer)))]


def rule_capped(facts, options):
    """Parts not examined (--max-parts), or a child report too large to arrive whole."""
    examined, lost = facts.get("examined") or {}, facts.get("report_lost")
    if not examined.get("not_examined") and not lost:
        return []
    evidence = dict(examined)
    if lost:
        evidence["report_lost"] = dict(lost, parts_reported=len(facts["parts"]))
        return [finding("partition-output-capped", evidence, severity="error",
                        fix="the parts missing from \"parts\" were not verified; %s" % REPARTITION)]
    more = min(max(examined.get("parts") or 0, options.max_parts), MAX_PARTS_LIMIT)
    return [finding("partition-output-capped", evidence,
                    fix="%s of %s parts were checked; to check more: %s  # not run here: output and time grow "
                        "with the number of parts" % (examined.get("examined"), examined.get("parts"),
                                                      TOOL.command(*rerun_words(options, max_parts=more))))]


RULES = (rule_timeout, rule_meta, rule_layout, load_problem_findings, rule_maps, rule_graph, rule_edge_map_sizes,
         rule_coverage, rule_offsets, rule_features, rule_from_partition, rule_labels, rule_crash, rule_capped)
