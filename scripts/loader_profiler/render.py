"""Rendering, last: the profiler's sections of the JSON document, the markdown report for people, the
stderr summary."""

from diagnostics_core.markdown import cell, findings_list

FACT_SECTIONS = ("request", "host", "backend", "graph", "breakdown", "plan", "configs", "blocks", "recommendation",
                 "child")


def render(document, facts, options):
    """The fact sections after the envelope, in order; every one present (null where not learnt)."""
    for section in FACT_SECTIONS:
        document[section] = facts.get(section)
    if document["configs"] is None:
        document["configs"] = []


def rate(value, spread=None):
    if value is None:
        return "-"
    return "%.1f (%.1f-%.1f)" % (value, spread[0], spread[1]) if spread else "%.1f" % value


def ratio(value, spread=None):
    if value is None:
        return "-"
    return "%.2fx (%.2f-%.2f)" % (value, spread[0], spread[1]) if spread else "%.2fx" % value


SHOWN_DEFAULTS = {"filter_per_worker": True, "worker_threads": 1}


def settings_text(settings):
    return ", ".join("%s=%s" % (k, v) for k, v in sorted(settings.items())
                     if (v not in (None, False) and SHOWN_DEFAULTS.get(k, not v) != v) or k == "num_workers")


VERDICTS = {"faster": "beats %s in every round",
            "under-load": "beats %s in every round under the load measured; for a quiet machine see loader-load-decides",
            "baseline": "nothing beat %s in every round: keep it",
            "undecided": "could not tell: the rounds disagree by more than the differences; keep %s"}


def contest(advice):
    """How the choice among the settings that beat the baseline was made, in a line or two."""
    decided = advice.get("decided") or {}
    if not decided.get("contenders"):
        return []
    against = decided.get("against") or {}
    ratios = "; ".join("%s %s" % (cell(name), "/".join("%.2f" % r for r in against[name]))
                       for name in decided["contenders"] if name in against)
    lines = ["contenders (beat %s in every round, not left behind by another): %s; leader %s%s" % (
        cell(advice["baseline"]), ", ".join(cell(n) for n in decided["contenders"]), cell(decided.get("leader")),
        " (round by round over it: %s)" % ratios if ratios else ""), ""]
    if decided.get("unsettled") and advice["verdict"] == "undecided":
        lines.append("under load the leader did not leave %s behind: which is faster on a quiet machine is "
                     "not measured" % ", ".join(cell(n) for n in decided["unsettled"]))
    elif advice["verdict"] in ("faster", "under-load"):
        lines.append("chosen: the cheapest within 5%% of the leader at the median (%s); persistent workers' "
                     "start-up counted once over %s epochs (--epochs)" % (
                         ", ".join(cell(n) for n in decided.get("tied") or []), advice.get("epochs")))
    return lines + [""]


def paired_advice(advice):
    load = advice.get("load") or {}
    lines = ["#### Recommendation: %s (%s)" % (cell(advice["config"]), VERDICTS.get(advice["verdict"], "%s") % cell(
                 advice["baseline"])), "",
             "speedup %s over %s (paired, %s rounds), %s over the default; an epoch %s s against %s s" % (
                 ratio(advice["speedup"], advice.get("speedup_range")), cell(advice["baseline"]), advice.get("rounds"),
                 ratio(advice.get("speedup_over_default")), advice.get("epoch_s"), advice.get("baseline_epoch_s")), ""]
    lines += contest(advice)
    if load:
        lines += ["load: other processes used %s cores (median; %s-%s), %d of %d blocks above %s cores" % (
            load["other_cpu_cores_median"], load["other_cpu_cores_range"][0], load["other_cpu_cores_range"][1],
            load["busy_blocks"], load["blocks"], load["busy_threshold_cores"]), ""]
    return lines + ["```python", advice["code"], "```", ""]


def config_table(document, request, graph):
    """Every planned configuration: measured (its rounds, paired ratios, epoch time) or why not."""
    configs = document.get("configs") or []
    if not configs:
        return []
    plan = document.get("plan") or {}
    lines = []
    if any(c.get("rounds") for c in configs):
        lines += ["the loop (%s), in %s interleaved rounds; ratios are paired with **%s** in the same round"
                  % (cell(((request.get("loop") or {}).get("kind"))), max(c.get("rounds") or 0 for c in configs),
                     cell(plan.get("baseline"))), ""]
    lines += ["| config | settings | epoch steps/s (range) | vs %s (range) | vs default | epoch s | first batch s "
              "| other CPU, cores | peak RSS MB |" % cell(plan.get("baseline")), "|---|---|---|---|---|---|---|---|---|"]
    batches = graph.get("batches_per_epoch")
    for c in configs:
        settings = settings_text(c["settings"])
        if c.get("status") != "ok":
            lines.append("| %s | %s | %s | | | | | | |" % (cell(c["name"]), cell(settings), cell(c.get("status"))))
            continue
        others = c.get("other_cpu_cores") or []
        lines.append("| %s | %s | %s | %s | %s | %s | %.2f | %s | %.0f |" % (
            cell(c["name"]), cell(settings), rate(c["epoch_batches_per_s"], c["epoch_batches_per_s_range"]),
            ratio(c.get("ratio_to_baseline"), c.get("ratio_to_baseline_range")), ratio(c.get("ratio_to_default")),
            "%.1f" % (batches / c["epoch_batches_per_s"]) if batches and c["epoch_batches_per_s"] else "-",
            c["first_batch_s"], "-" if not others else "%.1f-%.1f" % (min(others), max(others)), c["peak_rss_mb"]))
    return lines + [""]


def markdown(document, redacted=True):
    """The report to paste; `redacted`: it says that user, home and host names are hidden (cli.markdown hides
    them)."""
    tool = document["tool"]
    request = document.get("request") or {}
    graph = document.get("graph") or {}
    host = document.get("host") or {}
    lines = ["### Loader profile (profile_loader %s)" % tool["version"], "",
             "status **%s**, exit %d, %.1f s of a %g s budget; gates: %s" % (
                 document["status"], document["exit_code"], tool["elapsed_s"], tool.get("budget_s") or 0,
                 ", ".join("%s %s" % (name, "passed" if g["passed"] else "FAILED")
                           for name, g in document["gates"].items()) or "none"), ""]
    if graph:
        lines.append("graph: %s, %s nodes, %s edges; %s seeds, batch size %s, %s batches per epoch; "
                     "fan-out %s; %d rank(s) on %d allowed cores (%s physical, %s NUMA node(s))" % (
                         cell(graph.get("kind")), graph.get("num_nodes"), graph.get("num_edges"),
                         graph.get("seeds"), request.get("batch_size"), graph.get("batches_per_epoch"),
                         cell(request.get("num_neighbors")), request.get("ranks", 1),
                         len(host.get("allowed_cores") or []), host.get("physical_cores"), host.get("numa_nodes")))
        lines.append("")
    lines += config_table(document, request, graph)
    split = document.get("breakdown")
    if split and split.get("status") == "ok":
        total = split["batch_s"] or 1
        lines += ["a default batch (num_workers=0): %.1f ms = sampling %.0f%%, feature fetch %.0f%%, collation %.0f%%"
                  % (split["batch_s"] * 1e3, 100 * split["sample_s"] / total, 100 * split["fetch_s"] / total,
                     100 * split["collate_s"] / total), ""]
    if document.get("recommendation"):
        lines += paired_advice(document["recommendation"])
    lines += findings_list(document["findings"], without_fix=("loader-faster-settings", "loader-default-is-best"))
    text = "\n".join(lines) + "\n"
    if redacted:
        text += "\n<sub>user, home and host names redacted (--no-redact shows them)</sub>\n"
    return text


def summary(document):
    """A few lines for the person at the terminal (the runner writes them to stderr); the JSON on stdout stays
    the contract."""
    lines = ["%s (exit %d) in %.1f s" % (document["status"], document["exit_code"], document["tool"]["elapsed_s"])]
    advice = document.get("recommendation")
    if advice:
        lines.append("  recommended: %s, speedup %sx over %s (%s)" % (
            advice["config"], advice["speedup"], advice["baseline"], advice["verdict"]))
    for item in document["findings"]:
        if item["severity"] in ("error", "warning"):
            lines.append("  %-7s %s: %s" % (item["severity"], item["id"], item["title"]))
    return lines
