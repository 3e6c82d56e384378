"""One rank: a process that loads the graph itself (as each DDP rank does), then builds and measures
the loaders the coordinator asks for, answering on its pipe. User code runs here."""

import os

from diagnostics_core.sandbox import quiet_child_process, remove_rendered_templates


def rank_main(rank, connection, barrier, spec, closed_fds):
    quiet_child_process()  # dies with the coordinator, writes nothing
    for fd in closed_fds:  # only the coordinator reports to the tool
        try:
            os.close(fd)
        except OSError:
            pass
    import torch
    default_threads = torch.get_num_threads()
    try:
        ready = setup(spec)
        connection.send(dict(ready.get("answer"), default_threads=default_threads))
        if "data" in ready:
            serve(ready, spec, {}, connection, barrier, default_threads)
    finally:  # the user's modules and the model's convs (stand-in or the user's) were loaded here
        remove_rendered_templates()


def serve(ready, spec, samplers, connection, barrier, default_threads):
    """Answer the coordinator's commands until it says stop."""
    while True:
        message = connection.recv()
        if message["command"] == "stop":
            return
        if message["command"] == "breakdown":
            connection.send(guarded(lambda: run_breakdown(ready, spec, samplers, message["seconds"], default_threads)))
        elif message["command"] == "step":
            connection.send(prepare_step(ready, spec, samplers))
            remove_rendered_templates()  # now, too: a rank ended at its deadline never reaches the end
        elif message["command"] == "block":
            connection.send(guarded(lambda: run_block(ready, spec, samplers, message, barrier)))


def setup(spec):
    """Load the graph, check that the user's loader builds and that the training step runs on one of
    its batches; -> {"answer": ..., "data", "seeds", "step"}."""
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


def prepare_step(ready, spec, samplers):
    """Build the training step on a first batch and run it once: a step that fails, fails here once,
    not in every configuration. -> {"status": "ok"} or the input problem that explains it."""
    from .graph import InputProblem, build_loader, short_error
    from .step import build_step
    loop = spec.get("loop") or {"kind": "loader-only"}
    try:
        loader = build_loader(ready["data"], spec, {"num_workers": 0}, ready["seeds"], samplers)
        batch = next(iter(loader))
    except Exception as error:  # noqa: BLE001 - the user's store or settings
        return {"status": "input-problem", "finding": "loader-setup-failed", "evidence": {"error": short_error(error)}}
    try:
        step = build_step(loop, batch)
        if step is not None:
            step(batch)
    except InputProblem as problem:
        return {"status": "input-problem", "finding": problem.finding_id, "evidence": problem.evidence}
    except Exception as error:  # noqa: BLE001 - the user's step or model
        import traceback
        return {"status": "input-problem", "finding": "loader-step-failed",
                "evidence": {"loop": loop, "error": short_error(error), "traceback": traceback.format_exc()[-1500:]}}
    ready["step"] = step
    return {"status": "ok", "loop": loop["kind"]}


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


def run_block(ready, spec, samplers, message, barrier):
    import torch
    from .graph import build_loader
    from .measure import loop_block
    settings = message["settings"]
    torch.set_num_threads(settings["torch_threads"])
    loader = build_loader(ready["data"], spec, settings, ready["seeds"], samplers)
    barrier.wait(timeout=message["seconds"] + 30)  # every rank starts together, as DDP ranks run
    return loop_block(loader, settings, message["seconds"], bool(spec.get("link")), ready.get("step"))
