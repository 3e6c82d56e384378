"""The recommendation: the configuration to use, as loader keyword arguments, environment and code
to paste, with its measured speedup over the user's settings and the default loader. Plain data in, plain
data out."""

from . import plan
from .graph import LOADER_KEYS

PYG_DEFAULTS = {"num_workers": 0, "persistent_workers": False, "filter_per_worker": True, "pin_memory": False}


def recommendation(configs, spec, blocks=None, baseline=None):
    """None when nothing was measured; else the recommendation section of the report, from interleaved
    rounds: speedups are the medians of the paired ratios (same round) against the user's settings (the
    baseline) and against the default loader."""
    if not blocks:
        return None
    baseline = baseline or "default"
    chosen, verdict, base, decided = plan.choose_paired(configs, blocks, baseline)
    if chosen is None:
        return None
    by_name = {c["name"]: c for c in plan.measured(configs)}
    default = by_name.get("default")
    settings = chosen["settings"]
    kwargs, env = kwargs_of(settings), env_of(settings)
    fastest = max((c for c in by_name.values() if c.get("rounds")), key=lambda c: c["ratio_to_baseline"] or 0)
    load = plan.load_of(blocks)
    section = {
        "config": chosen["name"], "settings": kwargs, "env": env, "loader_cores": None,
        "verdict": verdict, "beats_default": verdict in ("faster", "under-load") and chosen["name"] != "default"
        and (default is None or plan.wins(blocks, chosen["name"], "default") or baseline != "default"),
        "baseline": baseline, "speedup": chosen["ratio_to_baseline"],
        "speedup_range": chosen["ratio_to_baseline_range"],
        "speedup_over_default": chosen.get("ratio_to_default"),
        "median_epoch_batches_per_s": chosen["epoch_batches_per_s"],
        "baseline_median_epoch_batches_per_s": base["epoch_batches_per_s"],
        "default_median_epoch_batches_per_s": default["epoch_batches_per_s"] if default else None,
        "noise_batches_per_s": round(max(plan.spread(chosen), plan.spread(base)), 3),
        "fastest_measured": {"config": fastest["name"], "epoch_batches_per_s": fastest["epoch_batches_per_s"],
                             "ratio_to_baseline": fastest["ratio_to_baseline"],
                             "ratio_to_baseline_range": fastest["ratio_to_baseline_range"],
                             "ratio_to_default": fastest.get("ratio_to_default")},
        "rounds": chosen["rounds"], "load": load, "by_load": plan.winners_by_load(blocks, configs),
        "decided": dict(decided, against=contenders_against(decided, by_name, blocks)),
        "epochs": spec.get("epochs") or plan.DEFAULT_EPOCHS,
        "epoch_s": epoch_seconds(chosen, spec), "baseline_epoch_s": epoch_seconds(base, spec),
        "worker_threads": worker_threads_of(settings),
        "code": code(spec, kwargs, env, worker_threads_of(settings)),
    }
    return section


def kwargs_of(settings):
    kwargs = {key: settings[key] for key in LOADER_KEYS if settings[key] != PYG_DEFAULTS[key]}
    if not settings["num_workers"]:
        kwargs.pop("persistent_workers", None)
    return kwargs


def env_of(settings):
    return {"OMP_NUM_THREADS": str(settings["torch_threads"])}


def worker_threads_of(settings):
    return (settings.get("worker_threads") or 1) if settings["num_workers"] else 1


def contenders_against(decided, by_name, blocks):
    """Each contender's paired ratios over the leader, round by round: what decided between them."""
    leader = decided.get("leader")
    if not leader or not decided.get("contenders"):
        return {}
    return {name: [round(r, 3) for r in plan.paired(blocks, name, leader)] for name in decided["contenders"]
            if name != leader and name in by_name}


def epoch_seconds(config, spec):
    """One epoch's seconds at the measured rate: batches per epoch over epoch batches/s."""
    batches = spec.get("batches_per_epoch")
    return round(batches / config["epoch_batches_per_s"], 2) if batches and config["epoch_batches_per_s"] else None


def attribute_of(owner, name):
    """`owner.name` in Python, or owner['name'] where the name is not an identifier (a key of the user's file
    goes into the code as a string literal, never as code)."""
    import keyword
    plain = name.isidentifier() and not keyword.iskeyword(name)
    return "%s.%s" % (owner, name) if plain else "%s[%r]" % (owner, name)


def seeds_argument(spec):
    """The seeds as the loader's argument, written from --input-nodes / --input-edges."""
    if spec.get("link"):
        edges = spec.get("input_edges")
        return "edge_label_index=%r" % (tuple(edges),) if edges else None
    nodes = spec.get("input_nodes")
    if not nodes:
        return None
    node_type, _, attribute = nodes.rpartition(":")
    if spec.get("store"):
        return "input_nodes=%r" % nodes
    if node_type:
        return "input_nodes=(%r, %s)" % (node_type, attribute_of("data[%r]" % node_type, attribute))
    return "input_nodes=%r" % attribute if spec.get("hetero") else "input_nodes=" + attribute_of("data", attribute)


def loader_line(spec, kwargs, worker_threads=1):
    """`loader = NeighborLoader(...)` with these keyword arguments, as the user would write it."""
    cls = "LinkNeighborLoader" if spec.get("link") else "NeighborLoader"
    data = "(feature_store, graph_store)" if spec.get("store") else "data"
    arguments = [data, "num_neighbors=%r" % list(spec["num_neighbors"])]
    seeds = seeds_argument(spec)
    if seeds:
        arguments.append(seeds)
    arguments += ["batch_size=%d" % spec["batch_size"]] + (["shuffle=True"] if spec["shuffle"] else [])
    arguments += ["%s=%r" % (key, value) for key, value in kwargs.items()]
    if worker_threads != 1:
        arguments.append("worker_init_fn=lambda worker_id: torch.set_num_threads(%d)" % worker_threads)
    return "loader = %s(%s)" % (cls, ", ".join(arguments))


def code(spec, kwargs, env, worker_threads=1):
    """The loader as the user would write it with the recommended settings."""
    cls = "LinkNeighborLoader" if spec.get("link") else "NeighborLoader"
    return "\n".join(["# before Python starts: %s" % " ".join("export %s=%s" % item for item in sorted(env.items())),
                      "from torch_geometric.loader import %s" % cls, loader_line(spec, kwargs, worker_threads),
                      "for batch in loader:", "    ...  # train"])
