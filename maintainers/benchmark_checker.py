#!/usr/bin/env python3
"""Time check_sampling_backends.py (and the other tools' metadata commands) against the floors they
cannot beat.

Each pair runs its two commands alternately (A,B then B,A, ...) after a
warm-up, so drift on a busy machine hits both sides alike. Run it with the
interpreter that has torch and PyG, e.g. ``.venv/bin/python
scripts/benchmark_checker.py``: the floor ``import torch, torch_geometric`` and
the checker's probe both use that interpreter. This is a benchmark, not a test.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKER = os.path.join(REPO, "scripts", "check_sampling_backends.py")
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.dont_write_bytecode = True
from diagnostics_core.tools import TOOLS, console_script  # noqa: E402  the one list of tools

# The metadata commands of the other tools: pair name -> their entry file (each --help, against `python -c pass`)
OTHER_TOOLS = dict(("%s-help" % console_script(script), script + ".py") for script, _ in TOOLS
                   if script != "check_sampling_backends")
PAIRS = ("probe", "help", "help-argparse", "list-findings", "explain", "schema") + tuple(OTHER_TOOLS) + (
    "static", "segfault", "hang")
# Not installed in the project venv, and probed by the checker as optional
# extensions, so a fake of that name on PYTHONPATH is imported in its child.
SEGFAULT_MODULE, SEGFAULT_DIST = "torch_cluster", ("torch-cluster", "1.6.3")
HANG_MODULE, HANG_DIST = "torch_spline_conv", ("torch-spline-conv", "1.2.2")

EPILOG = """\
pairs (A vs B; target):
  probe     full probe vs `python -c "import torch, torch_geometric"`;
            A/B <= 1.10 (aim 1.05)
  help      --help vs `python -c pass`; A/B <= 5
  help-argparse
            the same --help printed by argparse (sampling_checker.cli), not
            from the generated text, vs `python -c pass`; reported, no target:
            what diagnostics_core/generated/ saves
  list-findings, explain, schema
            --list-findings, --explain usage-error, --schema vs `python -c pass`;
            A/B <= 5 (metadata commands import only the shared library: nothing
            is cached, every module they import is compiled on each run)
  <tool>-help (check-store-contract-help, ..., one per other tool of
  scripts/diagnostics_core/tools.py)
            --help of the other tools vs `python -c pass`; A/B <= 5
  static    --static-only vs `python -c pass`; reported, no target
  segfault  full probe, a fake torch_cluster that segfaults on import on
            PYTHONPATH, vs the import floor; A/B <= 2.2
  hang      --timeout T, a fake torch_spline_conv whose import never finishes
            on PYTHONPATH, vs T; A <= T + 1 s

output: a table on stderr, one JSON document on stdout.

exit codes:
  0  every target met
  1  a target was missed
  2  usage error
  3  a command misbehaved (wrong exit code, invalid JSON, expected finding absent,
     leftover process): no timing is reported as valid

example:
  .venv/bin/python maintainers/benchmark_checker.py --runs 7 > benchmark.json
  .venv/bin/python maintainers/benchmark_checker.py --quick --only help static
"""


class Misbehaved(Exception):
    """A benchmarked command did not do what it must; its timing means nothing."""


def write_fake(root, module, dist, init_source):
    """``root/<module>/__init__.py`` plus a minimal dist-info, so the checker sees an install."""
    os.makedirs(os.path.join(root, module))
    with open(os.path.join(root, module, "__init__.py"), "w") as handle:
        handle.write(init_source)
    name, version = dist
    dist_info = os.path.join(root, "{}-{}.dist-info".format(module, version))
    os.makedirs(dist_info)
    with open(os.path.join(dist_info, "METADATA"), "w") as handle:
        handle.write("Metadata-Version: 2.1\nName: {}\nVersion: {}\n".format(name, version))


def expect_exit_zero(done):
    if done.returncode != 0:
        raise Misbehaved("exit code {}".format(done.returncode))


def expect_checker_json(finding_id=None, module=None):
    """Validator: stdout is one JSON document, exit 0, and (if given) the finding naming module."""
    def validate(done):
        expect_exit_zero(done)
        try:
            report = json.loads(done.stdout)
        except ValueError as error:
            raise Misbehaved("stdout is not JSON: {}".format(error))
        if finding_id is None:
            return
        found = [f for f in report.get("findings", []) if f.get("id") == finding_id]
        if not any(f.get("evidence", {}).get("module") == module for f in found):
            ids = [f.get("id") for f in report.get("findings", [])]
            raise Misbehaved("no {} finding for {}; findings: {}".format(finding_id, module, ids))
    return validate


def expect_help(done):
    expect_exit_zero(done)
    if not done.stdout.startswith("usage:"):
        raise Misbehaved("--help printed no usage")


def expect_text(start):
    def validate(done):
        expect_exit_zero(done)
        if not done.stdout.startswith(start):
            raise Misbehaved("stdout does not start with {!r}".format(start))
    return validate


def run_once(command, validate, env, guard_s):
    """Seconds one command took; stdout is captured (both sides alike) to validate it."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, timeout=guard_s, universal_newlines=True)
    except subprocess.TimeoutExpired:
        raise Misbehaved("{} ran past {} s".format(command, guard_s))
    elapsed = time.perf_counter() - start
    try:
        validate(done)
    except Misbehaved as error:
        raise Misbehaved("{}: {}".format(" ".join(shlex.quote(c) for c in command), error))
    return elapsed


def processes_with_env(marker):
    """Pids of live processes whose environment contains ``marker`` (Linux; else none)."""
    pids = []
    if not os.path.isdir("/proc"):
        return pids
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        try:
            with open("/proc/{}/environ".format(pid), "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def measure(side_a, side_b, runs, warmup, guard_s):
    """Samples of both sides, alternating which goes first to cancel drift."""
    samples = {"a": [], "b": []}
    sides = [("a", side_a)] + ([("b", side_b)] if side_b else [])
    for index in range(warmup + runs):
        order = sides if index % 2 == 0 else sides[::-1]
        for key, (command, validate, env) in order:
            seconds = run_once(command, validate, env, guard_s)
            if index >= warmup:
                samples[key].append(seconds)
    return samples


def machine_facts(python):
    probe = ("import json, sys\ntry:\n import torch, torch_geometric as g\n"
             " v = [torch.__version__, g.__version__]\nexcept Exception:\n v = [None, None]\n"
             "print(json.dumps({'executable': sys.executable, 'python': sys.version.split()[0],"
             " 'torch': v[0], 'torch_geometric': v[1]}))")
    done = subprocess.run([python, "-c", probe], stdout=subprocess.PIPE, universal_newlines=True)
    if done.returncode != 0:
        raise Misbehaved("{} cannot run Python: exit {}".format(python, done.returncode))
    facts = json.loads(done.stdout)
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, universal_newlines=True).stdout.strip()
    except OSError:
        commit = ""
    facts.update(cpu_count=os.cpu_count(), platform=platform.platform(), git_commit=commit or None)
    return facts


def pair_definitions(python, timeout, fakes):
    """name -> (A side, B side or None, target); a side is (command, validator, env)."""
    plain = dict(os.environ)
    segfault_env = dict(plain, PYTHONPATH=os.path.join(fakes, "segfault"))
    hang_env = dict(plain, PYTHONPATH=os.path.join(fakes, "hang"))
    checker = [python, CHECKER]
    import_floor = ([python, "-c", "import torch, torch_geometric"], expect_exit_zero, plain)
    bare_start = ([python, "-c", "pass"], expect_exit_zero, plain)
    cheap = {"kind": "ratio", "limit": 5.0}
    through_argparse = ("import sys; sys.dont_write_bytecode = True; sys.path.insert(0, %r); "
                        "sys.argv[0] = 'check_sampling_backends.py'; from diagnostics_core import runner; "
                        "from sampling_checker.cli import SPEC; sys.exit(runner.main(SPEC, ['--help']))"
                        % os.path.join(REPO, "scripts"))
    pairs = {
        "probe": ((checker, expect_checker_json(), plain), import_floor,
                  {"kind": "ratio", "limit": 1.10, "aim": 1.05}),
        "help": ((checker + ["--help"], expect_help, plain), bare_start, cheap),
        "help-argparse": (([python, "-c", through_argparse], expect_help, plain), bare_start, None),
        "list-findings": ((checker + ["--list-findings"], expect_text("["), plain), bare_start, cheap),
        "explain": ((checker + ["--explain", "usage-error"], expect_text("### usage-error"), plain), bare_start,
                    cheap),
        "schema": ((checker + ["--schema"], expect_text("{"), plain), bare_start, cheap),
        "static": ((checker + ["--static-only"], expect_checker_json(), plain), bare_start, None),
        "segfault": ((checker, expect_checker_json("ext-import-crashed", SEGFAULT_MODULE),
                      segfault_env), import_floor, {"kind": "ratio", "limit": 2.2}),
        "hang": ((checker + ["--timeout", str(timeout)],
                  expect_checker_json("ext-import-hung", HANG_MODULE), hang_env), None,
                 {"kind": "seconds_over", "limit": 1.0}),
    }
    for name, script in OTHER_TOOLS.items():
        pairs[name] = (([python, os.path.join(REPO, "scripts", script), "--help"], expect_help, plain), bare_start,
                       cheap)
    return pairs


def summarize(name, side_a, side_b, target, samples, timeout):
    median_a = statistics.median(samples["a"])
    result = {"name": name,
              "a": {"command": side_a[0], "median_s": round(median_a, 4),
                    "samples_s": [round(s, 4) for s in samples["a"]]},
              "b": None, "target": target}
    if side_b:
        median_b = statistics.median(samples["b"])
        result["b"] = {"command": side_b[0], "median_s": round(median_b, 4),
                       "samples_s": [round(s, 4) for s in samples["b"]]}
        result["ratio"] = round(median_a / median_b, 3)
    else:  # the floor is the constant T
        result["ratio"] = round(median_a / timeout, 3)
        result["over_s"] = round(median_a - timeout, 3)
    if target is None:
        result["met"] = None
    elif target["kind"] == "ratio":
        result["met"] = result["ratio"] <= target["limit"]
    else:
        result["met"] = result["over_s"] <= target["limit"]
    return result


def table(results, timeout):
    rows = [("pair", "A median s", "B median s", "ratio / A-T", "target", "verdict")]
    for r in results:
        target = r["target"]
        if target is None:
            limit, verdict = "-", "info"
        elif target["kind"] == "ratio":
            limit, verdict = "<= {}".format(target["limit"]), None
        else:
            limit, verdict = "<= T+{} s".format(target["limit"]), None
        value = ("{:+.3f} s".format(r["over_s"]) if "over_s" in r
                 else "{:.3f}".format(r["ratio"]))
        b_median = "{:.3f}".format(r["b"]["median_s"]) if r["b"] else "T={}".format(timeout)
        rows.append((r["name"], "{:.3f}".format(r["a"]["median_s"]), b_median, value, limit,
                     verdict or ("PASS" if r["met"] else "MISS")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, metavar="PATH",
                        help="interpreter with torch and PyG, for the floors and the checker "
                             "(default: this one)")
    parser.add_argument("--runs", type=int, metavar="N",
                        help="measured runs per pair (default 7, minimum 5)")
    parser.add_argument("--warmup", type=int, metavar="N",
                        help="unmeasured runs first (default 1)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="T",
                        help="checker --timeout T for the hang pair (default 10)")
    parser.add_argument("--only", nargs="+", choices=PAIRS, metavar="NAME",
                        help="run only these pairs: " + ", ".join(PAIRS))
    parser.add_argument("--json-only", action="store_true", help="no table on stderr")
    parser.add_argument("--quick", action="store_true",
                        help="development only: runs=2, warmup=0, minimum not enforced")
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 2 if args.quick else 7
    if args.warmup is None:
        args.warmup = 0 if args.quick else 1
    if args.runs < (1 if args.quick else 5) or args.warmup < 0:
        parser.error("--runs must be at least 5 (and --warmup >= 0); --quick is for development")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    return args


def main(argv=None):
    args = parse_arguments(argv)
    names = [n for n in PAIRS if not args.only or n in args.only]
    # A misbehaving checker must fail, not hang the benchmark.
    guard_s = max(120.0, 3 * args.timeout + 60)
    fakes = tempfile.mkdtemp(prefix="benchmark-checker-")
    try:
        write_fake(os.path.join(fakes, "segfault"), SEGFAULT_MODULE, SEGFAULT_DIST,
                   "import ctypes\nctypes.string_at(0)  # reads address 0: SIGSEGV\n")
        write_fake(os.path.join(fakes, "hang"), HANG_MODULE, HANG_DIST,
                   "import time\ntime.sleep(10 ** 6)\n")
        machine = machine_facts(args.python)
        definitions = pair_definitions(args.python, args.timeout, fakes)
        results = []
        for name in names:
            side_a, side_b, target = definitions[name]
            if not args.json_only:
                print("benchmark: {} ...".format(name), file=sys.stderr, flush=True)
            samples = measure(side_a, side_b, args.runs, args.warmup, guard_s)
            results.append(summarize(name, side_a, side_b, target, samples, args.timeout))
        # The checker must kill the hung import's child; one left alive is a bug.
        leftover = processes_with_env(("PYTHONPATH=" + os.path.join(fakes, "hang")).encode())
        if leftover:
            for pid in leftover:  # our own descendants, orphaned by the checker
                os.kill(pid, signal.SIGKILL)
            raise Misbehaved("processes left running after the hang pair: {}".format(leftover))
    except Misbehaved as error:
        print("benchmark_checker: command misbehaved: {}".format(error), file=sys.stderr)
        return 3
    finally:
        shutil.rmtree(fakes, ignore_errors=True)
    all_met = all(r["met"] is not False for r in results)
    report = {"benchmark": "check_sampling_backends",
              "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine, "runs": args.runs, "warmup": args.warmup,
              "timeout_s": args.timeout, "quick": args.quick, "pairs": results,
              "all_met": all_met}
    if not args.json_only:
        print(table(results, args.timeout), file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
