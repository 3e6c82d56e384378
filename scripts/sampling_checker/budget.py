"""The checker's time budget: --timeout split into the bound of each stage, in one place.

Every stage's deadline is derived here and nowhere else: the interpreter question, the static stage (in
this process or in the child), the import probe's hang limit, and the longer --timeout a fix suggests.
"""

import collections

GRACE_S = 0.5  # the static stage ends this long before its caller's deadline, twice over, so it can say why

Bounds = collections.namedtuple("Bounds", [
    "deadline",               # absolute: the whole run ends by then
    "interpreter_question_s",  # asking --python (or the active environment) what it is
    "hang_limit_s",           # one import or smoke sample still busy after this long is declared hung
    "static_here_deadline",   # absolute: --static-only in this interpreter
    "static_child_deadline",  # absolute: the static step inside the child, for another interpreter
    "static_margin_s",        # each probe attempt's static step ends this long before the deadline
    "retry_timeout_s",        # the --timeout a "run again with longer" fix names (within the flag's range)
])


def stage_bounds(timeout, started):
    """--timeout (seconds) and the run's start (time.time()) -> Bounds."""
    deadline = started + timeout
    return Bounds(
        deadline=deadline,
        interpreter_question_s=max(1.0, min(30.0, timeout * 0.5)),  # leaves the rest of --timeout to say so
        # An extension import or smoke sample normally takes well under a second once torch is loaded; one
        # still busy after this long is declared hung, leaving time to probe the rest without it.
        hang_limit_s=max(2.0, min(20.0, timeout * 0.4)),
        static_here_deadline=started + max(GRACE_S, timeout - 3 * GRACE_S),
        static_child_deadline=deadline - 3 * GRACE_S,
        static_margin_s=GRACE_S,
        retry_timeout_s=int(min(3600, timeout * 2)),
    )
