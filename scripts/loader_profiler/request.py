"""What the user asked for, as plain data: the request the children measure, and the same command line
again as words (a fix that reruns the profiler with a flag changed is built from these, each word quoted,
never from the text the user typed)."""

import os

DEFAULT_NUM_NEIGHBORS = [10, 5]
DEFAULT_BATCH_SIZE = 1024
DEFAULT_BUDGET_S = 60.0  # --budget is always written out: the fixes that change it say so


def request_spec(options):
    """The graph, the loader and the loop the ranks build (sent to the children as JSON)."""
    return {"synthetic": options.synthetic, "data": os.path.abspath(options.data) if options.data else None,
            "store": options.store, "num_neighbors": options.num_neighbors, "batch_size": options.batch_size,
            "shuffle": not options.no_shuffle, "link": options.link, "input_nodes": options.input_nodes,
            "input_edges": options.input_edges, "loop": loop_spec(options), "epochs": options.epochs}


def request_fact(options):
    """The "request" section: the spec, the ranks, the budget and the user's settings (rules read it)."""
    return dict(request_spec(options), ranks=options.ranks_per_node, budget_s=options.budget, current=options.current)


def loop_spec(options):
    """What runs per batch: the user's step, a built-in step on the user's model, the stand-in, or nothing."""
    if options.loader_only:
        return {"kind": "loader-only"}
    if options.step:
        return {"kind": "step", "reference": options.step, "cwd": os.getcwd()}
    if options.model:
        return {"kind": "model", "reference": options.model, "cwd": os.getcwd()}
    stand_in = options.stand_in or {"conv": "sage", "layers": len(options.num_neighbors), "hidden": 64}
    return dict(stand_in, kind="stand-in")


def file_reference(reference):
    """path/file.py:CALLABLE with an absolute path (it works from any folder); a module reference as given."""
    module, _, attribute = reference.rpartition(":")
    return "%s:%s" % (os.path.abspath(module), attribute) if module.endswith(".py") else reference


def needs_folder(reference):
    """True for MODULE:CALLABLE: the module is imported from the folder the profiler runs in."""
    return bool(reference) and not reference.rpartition(":")[0].endswith(".py")


def words(options):
    """The command line of `options` as words: the graph (a data file by absolute path), then every flag that
    differs from its default, and --budget. -> (words, the folder it must run from, or None)."""
    found = []
    if options.synthetic:
        found += ["--synthetic", ",".join(str(n) for n in options.synthetic)]
    elif options.data:
        found += ["--data", os.path.abspath(options.data)]
    elif options.store:
        found += ["--store", file_reference(options.store)]
    if list(options.num_neighbors) != DEFAULT_NUM_NEIGHBORS:
        found += ["--num-neighbors", ",".join(str(n) for n in options.num_neighbors)]
    if options.batch_size != DEFAULT_BATCH_SIZE:
        found += ["--batch-size", str(options.batch_size)]
    if options.input_nodes:
        found += ["--input-nodes", options.input_nodes]
    if options.link:
        found.append("--link")
    if options.input_edges:
        found += ["--input-edges", ",".join(options.input_edges)]
    if options.no_shuffle:
        found.append("--no-shuffle")
    if options.ranks_per_node != 1:
        found += ["--ranks-per-node", str(options.ranks_per_node)]
    if options.loader_only:
        found.append("--loader-only")
    elif options.step:
        found += ["--step", file_reference(options.step)]
    elif options.model:
        found += ["--model", file_reference(options.model)]
    elif options.stand_in:
        found += ["--stand-in", "%(conv)s,%(layers)d,%(hidden)d" % options.stand_in]
    if options.current:
        found += ["--current", ",".join("%s=%s" % item for item in options.current.items())]
    if options.epochs:
        found += ["--epochs", str(options.epochs)]
    if options.max_workers:
        found += ["--max-workers", str(options.max_workers)]
    found += ["--budget", "%g" % options.budget]
    if getattr(options, "format", "json") == "markdown":
        found += ["--format", "markdown"] + (["--no-redact"] if options.no_redact else [])
    if options.pretty:
        found.append("--pretty")
    modules = [options.store] + ([] if options.loader_only else [options.step, options.model])
    return found, (os.getcwd() if any(needs_folder(reference) for reference in modules) else None)
