"""A job script (or one launch line) as data: the allocation its #SBATCH directives and the sbatch
command line ask for, the variables it exports, and its launch steps (srun, torchrun,
python -m torch.distributed.run, mpirun), each with the program it starts. Words only: nothing is
expanded by a shell, and what the doctor cannot follow is listed in `not_understood`."""

import os
import re

from . import shell
from .options import mpirun_options, slurm_options, torchrun_options

# Idioms whose value is known without running them: the job's first node.
FIRST_NODE = "@first-node-of-the-job@"
FIRST_NODE_IDIOMS = (
    re.compile(r"\$\(\s*scontrol\s+show\s+hostnames?\s+[\"']?\$\{?SLURM_(JOB_)?NODELIST\}?[\"']?\s*\|\s*head\s+"
               r"(-n\s*1|-1|--lines=1)\s*\)"),
    re.compile(r"\$\(\s*hostname(\s+-[sf])?\s*\)"),   # the batch script runs on the job's first node
    re.compile(r"`\s*hostname(\s+-[sf])?\s*`"),
)
PYTHON = re.compile(r"^python[0-9.]*$")
WRAPPERS = ("exec", "time", "nohup", "command", "builtin", "stdbuf", "nice", "numactl", "taskset", "timeout")
SHELLS = ("bash", "sh", "zsh", "dash", "ksh")
LINE_MAX_CHARS = 16384  # shlex slows down quadratically on one huge word: a longer line is reported, not read
MAX_STEPS = 200  # a job script with more launch lines is generated: the rest is counted, not analysed


def replace_idioms(line):
    for idiom in FIRST_NODE_IDIOMS:
        line = idiom.sub(FIRST_NODE, line)
    return line


def command_name(word):
    return os.path.basename(word)


def strip_wrappers(words):
    """Words after wrappers that start the next word as their program (exec, time, env A=1, ...)."""
    env = {}
    while words:
        name = command_name(words[0])
        match = shell.ASSIGNMENT.match(words[0])
        if match:
            env[match.group(1)] = match.group(2)
            words = words[1:]
        elif name == "env":
            words = words[1:]
            while words and (words[0].startswith("-") or shell.ASSIGNMENT.match(words[0])):
                match = shell.ASSIGNMENT.match(words[0])
                if match:
                    env[match.group(1)] = match.group(2)
                words = words[1:]
        elif name in WRAPPERS:
            words = words[1:]
            # the wrapper's own options and values (timeout 60, numactl --cpunodebind=0, taskset -c 0-3)
            while words and (words[0].startswith("-") or (name in ("timeout", "taskset", "nice")
                                                          and re.match(r"^[0-9.,smhd-]+$", words[0]))):
                words = words[1:]
        else:
            break
    return words, env


def program_of(words):
    """What a word list starts: {"kind": torchrun|mpirun|python|other|none, ...}; a shell's -c string
    is read as a line of its own (the program is its first launcher command)."""
    words, env = strip_wrappers(list(words))
    if not words:
        return {"kind": "none", "env": env}
    name = command_name(words[0])
    if name in SHELLS and "-c" in words[1:]:
        index = words.index("-c")
        inner = words[index + 1] if index + 1 < len(words) else ""
        found = program_in_line(inner)
        found["env"] = dict(env, **found.get("env", {}))
        found["via_shell"] = True
        return found
    if name == "torchrun":
        return torchrun_program(words[1:], env, name)
    if PYTHON.match(name):
        rest = words[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m" and rest[0] != "-c":
            rest = rest[1:]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1] in ("torch.distributed.run", "torch.distributed.launch"):
            return torchrun_program(rest[2:], env, "python -m " + rest[1])
        return {"kind": "python", "env": env, "args": rest[:8]}
    if name in ("mpirun", "mpiexec", "orterun"):
        options, rest, unknown = mpirun_options(words[1:])
        inner = program_of(rest)
        return {"kind": "mpirun", "env": env, "options": options, "unknown": unknown, "inner": inner,
                "name": name}
    if name == "srun":
        return {"kind": "srun", "env": env, "words": words}
    return {"kind": "other", "env": env, "name": name}


def torchrun_program(words, env, name):
    options, rest, unknown = torchrun_options(words)
    return {"kind": "torchrun", "env": env, "options": options, "unknown": unknown, "name": name,
            "program": rest[:8]}


def program_in_line(line):
    """The first launcher-like command of a shell -c string, with the variables it assigns before it."""
    try:
        words = shell.tokens(replace_idioms(line))
    except ValueError:
        return {"kind": "other", "name": "(unbalanced quotes)", "env": {}}
    env = {}
    for command, _ in shell.split_commands(words):
        if command and command[0] == "export":
            for word in command[1:]:
                match = shell.ASSIGNMENT.match(word)
                if match:
                    env[match.group(1)] = match.group(2)
            continue
        found = program_of(command)
        if found["kind"] not in ("none", "other"):
            found["env"] = dict(env, **found["env"])
            return found
        env.update(found["env"])
    return {"kind": "other", "name": "(no launcher in the shell string)", "env": env}


def read_job(text, overrides=(), source="script", deadline=None):
    """-> the job as data: directives, allocation options, exports, steps, not_understood. Lines past
    `deadline` (time.time() seconds) are counted, not read."""
    import time
    job = {"source": source, "directives": [], "allocation_options": {}, "option_sources": {},
           "overrides": list(overrides), "exports": {}, "steps": [], "not_understood": [], "unknown_options": []}
    lines = shell.logical_lines(text)
    for number, line, words in shell.directives(lines):
        if words is None:
            job["not_understood"].append({"line": number, "text": line, "why": ["unbalanced quotes"]})
            continue
        options, _, unknown = slurm_options(words, stop_at_program=False)
        job["directives"].append({"line": number, "text": line})
        for name, value in options.items():
            job["allocation_options"][name] = value
            job["option_sources"][name] = {"line": number, "text": line}
        job["unknown_options"] += unknown
    if overrides:
        options, _, unknown = slurm_options(list(overrides), stop_at_program=False)
        for name, value in options.items():  # the sbatch command line wins over the directives
            job["allocation_options"][name] = value
            job["option_sources"][name] = {"line": None, "text": "sbatch " + " ".join(overrides)}
        job["unknown_options"] += unknown
    exports = job["exports"]
    for position, (number, line) in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if deadline is not None and time.time() > deadline:
            job["not_understood"].append({"line": number, "text": line, "why": [
                "the deadline came: this line and the %d after it were not read" % (len(lines) - position - 1)]})
            break
        if len(line) > LINE_MAX_CHARS:
            job["not_understood"].append({"line": number, "text": line[:500], "why": [
                "a line of %d characters (over %d): not read" % (len(line), LINE_MAX_CHARS)]})
            continue
        known = replace_idioms(line)
        tricks = shell.tricks(known)
        if tricks:
            job["not_understood"].append({"line": number, "text": line, "why": tricks})
        try:
            words = shell.tokens(known)
        except ValueError as error:
            job["not_understood"].append({"line": number, "text": line, "why": ["unbalanced quotes (%s)" % error]})
            continue
        for command, background in shell.split_commands(words):
            read_command(job, command, background, number, line, exports, bool(tricks))
    return job


def read_command(job, words, background, number, line, exports, partial):
    if not words:
        return
    if len(job["steps"]) >= MAX_STEPS:
        job["steps_not_analysed"] = job.get("steps_not_analysed", 0) + 1
        return
    if words[0] == "export":
        for word in words[1:]:
            match = shell.ASSIGNMENT.match(word)
            if match:
                exports[match.group(1)] = {"value": match.group(2), "line": number, "exported": True}
            elif word in exports:
                exports[word]["exported"] = True
        return
    if words[0] == "unset":
        for word in words[1:]:
            exports.pop(word, None)
        return
    if words[0] == "wait":
        job["steps"].append({"kind": "wait", "line": number})
        return
    program_words, env = strip_wrappers(list(words))
    if not program_words:  # plain assignments: shell variables, expanded in later lines
        for name, value in env.items():
            exports[name] = {"value": value, "line": number, "exported": exports.get(name, {}).get("exported", False)}
        return
    step = {"kind": "step", "line": number, "text": line, "background": background, "env": env,
            "exports": dict((k, dict(v)) for k, v in exports.items()), "partial": partial}
    if command_name(program_words[0]) == "srun":
        options, rest, unknown = slurm_options(program_words[1:])
        if options.get("help") or options.get("usage") or options.get("version"):
            return  # srun prints and exits: no step, no tasks
        step.update(launcher="srun", srun=options, srun_unknown=unknown, program=program_of(rest))
    else:
        program = program_of(program_words)
        if program["kind"] in ("none", "other"):
            return
        step.update(launcher=None, srun=None, srun_unknown=[], program=program)
    job["steps"].append(step)
