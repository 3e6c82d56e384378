"""One rank: a process that loads the graph itself (as each DDP rank does), then builds and measures
the loaders the coordinator asks for, answering on its pipe. User code runs here."""

import os


def rank_main(rank, connection, barrier, spec, closed_fds):
    from diagnostics_core.sandbox import quiet_child_process
    quiet_child_process()  # dies with the coordinator, writes nothing
    for fd in closed_fds:  # only the coordinator reports to the tool
        try:
            os.close(fd)
        except OSError:
            pass
    import torch
    default_threads = torch.get_num_threads()
    ready = setup(spec)
    connection.send(dict(ready.get("answer"), default_threads=default_threads))
    if "data" not in ready:
        return
    samplers = {}
    while True:
        message = connection.recv()
        if message["command"] == "stop":
            return
        if message["command"] == "breakdown":
            connection.send(guarded(lambda: run_breakdown(ready, spec, samplers, message["seconds"], default_threads)))
        elif message["command"] == "measure":
            connection.send(guarded(lambda: run_measure(ready, spec, samplers, message, barrier)))


def setup(spec):
    """Load the graph and check that the user's loader builds; -> {"answer": ..., "data", "seeds"}."""
    from .graph import InputProblem, build_loader, load_graph, seed_input, short_error
    try:
        data, facts = load_graph(spec)
        seeds = seed_input(data, spec)
        loader = build_loader(data, spec, {"num_workers": 0}, seeds, {})
    except InputProblem as problem:
        return {"answer": {"status": "input-problem", "finding": problem.finding_id, "evidence": problem.evidence}}
    except Exception as error:  # noqa: BLE001 - the user's settings on the user's graph
        return {"answer": {"status": "input-problem", "finding": "loader-setup-failed",
                           "evidence": {"error": short_error(error)}}}
    return {"answer": {"status": "ready", "graph": facts, "seeds": len(loader.dataset),
                       "batches_per_epoch": len(loader)}, "data": data, "seeds": seeds}


def guarded(work):
    from .graph import short_error
    try:
        return dict(work(), status="ok")
    except Exception as error:  # noqa: BLE001 - a configuration that fails is a finding, not the end
        import traceback
        return {"status": "failed", "error": short_error(error), "traceback": traceback.format_exc()[-1500:]}


def run_breakdown(ready, spec, samplers, seconds, default_threads):
    import torch
    from .graph import build_loader
    from .measure import breakdown
    torch.set_num_threads(default_threads)
    loader = build_loader(ready["data"], spec, {"num_workers": 0}, ready["seeds"], samplers)
    return breakdown(loader, seconds, bool(spec.get("link")))


def run_measure(ready, spec, samplers, message, barrier):
    import torch
    from .graph import build_loader
    from .measure import measure
    settings = message["settings"]
    torch.set_num_threads(settings["torch_threads"])
    loader = build_loader(ready["data"], spec, settings, ready["seeds"], samplers)
    barrier.wait(timeout=message["seconds"])  # every rank starts timing together, as DDP ranks run
    return measure(loader, settings, message["seconds"], bool(spec.get("link")), message.get("cores"))
