"""The parent side of a CallReporter child, with progress: diagnostics_core.sandbox.run_call_child
collects the same records but has no way to show them while the child runs. This keeps its
semantics (calls bounded by their announced timeout plus sandbox.CALL_GRACE_S) and hands each
"progress" record and each appended fact to `on_progress` as it arrives.

Candidate for diagnostics_core: run_call_child(..., on_record=None) would make this file go away.
"""

from diagnostics_core.sandbox import CALL_GRACE_S, run_sandboxed


def run_call_child_live(command, env, deadline, on_progress):
    """-> (facts, done record or None, the call running at the end or None, SandboxResult)."""
    facts, calls, state = {}, [], {"done": None}

    def on_record(stamp, record):
        event = record.get("event")
        if event == "call":
            calls.append({"what": record.get("what"), "timeout_s": float(record.get("timeout_s") or 0),
                          "started": stamp})
        elif event == "returned" and calls:
            calls.pop()
        elif event == "facts":
            facts[record.get("key")] = record.get("value")
        elif event == "append":
            facts.setdefault(record.get("key"), []).append(record.get("value"))
        elif event == "done":
            state["done"] = record
        if event in ("progress", "append", "facts"):
            on_progress(record)

    def watch(now):
        for call in calls:
            if now - call["started"] > call["timeout_s"] + CALL_GRACE_S:
                state["overrun"] = call
                return "call-timeout"
        return None

    result = run_sandboxed(command, env, deadline, on_record, watch)
    running = state.get("overrun") or (calls[-1] if calls else None)
    if running is not None:
        running = {"what": running["what"], "timeout_s": running["timeout_s"]}
    return facts, state["done"], running, result
