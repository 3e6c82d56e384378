"""A job script (or one launch line) as data: its encoding, the allocation its #SBATCH directives and the
sbatch command line ask for (one set of options per heterogeneous component), the variables it exports,
its environment setup (source, module load, conda activate), and its launch steps (srun, torchrun,
python -m torch.distributed.run, mpirun), each with its words (as written, for corrected lines) and the
program it starts. Words only: nothing is expanded by a shell; what the doctor cannot follow is listed
in `not_understood` with the line."""

import os
import re

from . import counts, shell
from .options import mpirun_options, slurm_options, torchrun_options

PYTHON = re.compile(r"^python[0-9.]*$")
WRAPPERS = ("exec", "time", "nohup", "command", "builtin", "stdbuf", "nice", "numactl", "taskset", "timeout")
SHELLS = ("bash", "sh", "zsh", "dash", "ksh")
LINE_MAX_CHARS = 16384  # a command longer than this is generated, not written: reported, not read
MAX_STEPS = 200  # a job script with more launch lines is generated: the rest is counted, not analysed
SHELL_DEPTH = 3  # bash -c "bash -c '...'" is followed this deep
# Commands that set up the environment a job runs in: understood (their effect on variables is not known)
ENVIRONMENT_SETUP = {"source": None, ".": None, "module": ("load", "add", "purge", "unload", "rm", "swap", "switch",
                                                            "use", "unuse", "restore", "reset", "try-load"),
                     "ml": None, "conda": ("activate", "deactivate"), "mamba": ("activate", "deactivate"),
                     "micromamba": ("activate", "deactivate"), "spack": ("load", "unload", "env"),
                     "pyenv": ("activate", "shell", "local")}
SHELL_HOOK = re.compile(r"^(conda|mamba|micromamba)\s+shell(\.\w+)?\s+hook(\s+.*)?$|^(module|spack)\s")
HET_SEPARATORS = ("hetjob", "packjob")


def command_name(word):
    return os.path.basename(word)


def values(words):
    return [word.value for word in words]


# --- the script as text: encoding, directives --------------------------------------------------------

def encoding(text):
    """What sbatch sees before bash does: CRLF line breaks (sbatch refuses them), a byte-order mark (at the
    start sbatch refuses the script; before a later line that directive is not one), the #! line."""
    lines = text.split("\n")
    crlf = [number for number, line in enumerate(lines, 1) if line.endswith("\r")]
    bom = [number for number, line in enumerate(lines, 1) if "\ufeff" in line]
    first = lines[0] if lines else ""
    return {"crlf_lines": crlf[:20], "crlf_count": len(crlf), "bom_lines": bom[:20],
            "interpreter_line": first.startswith("#!"), "first_line": first[:200]}


def clean(text):
    """The text once sbatch takes it: CR before a line break and a byte-order mark at the start (both make
    sbatch refuse the script) removed; a byte-order mark on a later line stays, as sbatch and bash read it
    (that line is no directive, and sbatch reads none after it)."""
    text = text.replace("\r\n", "\n")
    return text[1:] if text.startswith("\ufeff") else text


def directives(text):
    """[(line number, text, words or None)] of the #SBATCH lines sbatch reads: at the start of a line,
    before the first command (blank and comment lines may come between); a word list None when the
    directive cannot be split into words."""
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not line.startswith("#SBATCH")):
            continue  # blank, a comment, or an indented #SBATCH (sbatch reads only those at the line start)
        if not line.startswith("#SBATCH"):
            break  # sbatch stops reading directives at the first command
        body = line[len("#SBATCH"):]
        try:
            words = [value for command in shell.read_line(body) for value in values(command["words"])]
        except shell.Unreadable:
            words = None
        found.append((number, line, words))
    return found


# --- the program a step starts -------------------------------------------------------------------------

def strip_wrappers(words, start=0):
    """(index of the first word after the variable assignments and wrappers that start the next word as
    their program (exec, time, env A=1, timeout 60, ...), {assigned: value})."""
    env, index = {}, start
    while index < len(words):
        value = words[index].value
        name = command_name(value)
        if is_assignment(words[index]):
            match = shell.ASSIGNMENT.match(value)
            env[match.group(1)] = match.group(2)
            index += 1
        elif name == "env":
            index += 1
            while index < len(words) and (words[index].value.startswith("-") or shell.ASSIGNMENT.match(words[index].value)):
                match = shell.ASSIGNMENT.match(words[index].value)
                if match:
                    env[match.group(1)] = match.group(2)
                index += 1
        elif name in WRAPPERS:
            index += 1
            # the wrapper's own options and values (timeout 60, numactl --cpunodebind=0, taskset -c 0-3)
            while index < len(words) and (words[index].value.startswith("-") or (
                    name in ("timeout", "taskset", "nice", "numactl") and re.match(r"^[0-9.,smhd-]+$", words[index].value))):
                index += 1
        else:
            break
    return index, env


def is_assignment(word):
    """NAME=value with NAME= unquoted, as bash recognises an assignment before a command."""
    first = word.parts[0] if word.parts else None
    return bool(first and first[0] == "lit" and not first[2] and re.match(r"^[A-Za-z_][A-Za-z0-9_]*\+?=", first[1]))


def program_of(words, start=0, depth=0):
    """What words[start:] start: {"kind": torchrun|mpirun|python|srun|other|none, "at": the launcher's first
    word, "options_at"/"options_end": its options (where a flag goes), ...}; a shell's -c string is read as a
    line of its own (the program is its first launcher command, under "inner")."""
    index, env = strip_wrappers(words, start)
    if index >= len(words):
        return {"kind": "none", "env": env}
    value = words[index].value
    name = command_name(value)
    if name in SHELLS and depth < SHELL_DEPTH:
        rest = values(words[index + 1:])
        flags = [i for i, word in enumerate(rest) if re.match(r"^-[a-zA-Z]*c[a-zA-Z]*$", word)]
        if flags and index + 1 + flags[0] + 1 < len(words):
            string_at = index + 1 + flags[0] + 1
            found = program_in_string(words[string_at], depth + 1)
            found["env"] = dict(env, **found.get("env", {}))
            found["shell"] = {"at": index, "string_at": string_at}
            return found
    if name == "torchrun":
        return torchrun_program(words, index, index + 1, env, name)
    if PYTHON.match(name):
        rest_at = index + 1
        while rest_at < len(words) and words[rest_at].value.startswith("-") and words[rest_at].value not in ("-m", "-c"):
            rest_at += 1
        module = words[rest_at + 1].value if rest_at + 1 < len(words) else None
        if rest_at < len(words) and words[rest_at].value == "-m" and module in ("torch.distributed.run",
                                                                                  "torch.distributed.launch"):
            return torchrun_program(words, index, rest_at + 2, env, "python -m " + module)
        return {"kind": "python", "env": env, "at": index, "args": values(words[rest_at:rest_at + 8])}
    if name in ("mpirun", "mpiexec", "orterun"):
        options, rest, unknown = mpirun_options(values(words[index + 1:]))
        end = len(words) - len(rest)
        inner = program_of(words, end, depth)
        return {"kind": "mpirun", "env": env, "options": options, "unknown": unknown, "inner": inner, "name": name,
                "at": index, "options_at": index + 1, "options_end": end}
    if name == "srun":
        return {"kind": "srun", "env": env, "at": index}
    return {"kind": "other", "env": env, "name": name, "at": index}


def torchrun_program(words, at, options_at, env, name):
    options, rest, unknown = torchrun_options(values(words[options_at:]))
    end = len(words) - len(rest)
    ends_with_dashes = end > options_at and words[end - 1].value == "--"
    return {"kind": "torchrun", "env": env, "options": options, "unknown": unknown, "name": name,
            "program": values(words[end:end + 8]), "at": at, "options_at": options_at,
            "options_end": end - 1 if ends_with_dashes else end}


def program_in_string(word, depth):
    """The first launcher-like command of a shell's -c string, with the variables it exports before it;
    "inner" holds that command's words (a corrected line rebuilds the string from them)."""
    try:
        commands = shell.read_line(word.value)
    except shell.Unreadable as error:
        return {"kind": "other", "name": "(a -c string bash cannot read: %s)" % error.why, "env": {}, "unreadable": True}
    env = {}
    for index, command in enumerate(commands):
        words = command["words"]
        if words and words[0].value == "export":
            for item in values(words[1:]):
                match = shell.ASSIGNMENT.match(item)
                if match:
                    env[match.group(1)] = match.group(2)
            continue
        if words and command_name(words[0].value) == "srun":
            continue  # srun inside the string: a step inside a step, not followed
        found = program_of(words, 0, depth)
        if found["kind"] not in ("none", "other"):
            found["env"] = dict(env, **found["env"])
            found["string"] = {"commands": [command_dict(c) for c in commands], "index": index}
            return found
        env.update(found["env"])
    return {"kind": "other", "name": "(no launcher in the shell string)", "env": env}


def command_dict(command):
    """A simple command as plain data: its words and redirections (a corrected line is rebuilt from them)."""
    return {"words": [w.as_dict() for w in command["words"]], "redirects": [redirect_dict(r) for r in command["redirects"]],
            "separator": command.get("separator"), "reserved": command["reserved"], "grouped": command.get("grouped", False)}


def redirect_dict(token):
    return {"op": token["op"], "fd": token["fd"], "target": token["target"].as_dict() if token["target"] else None,
            "heredoc": bool(token.get("heredoc"))}


# --- the job ----------------------------------------------------------------------------------------------

def new_job(source, overrides):
    return {"source": source, "directives": [], "components": [{"options": {}, "option_sources": {}}],
            "allocation_options": {}, "option_sources": {}, "overrides": list(overrides), "exports": {},
            "steps": [], "not_understood": [], "unknown_options": [], "environment_setup": [], "invalid": [],
            "heredocs": [], "encoding": None}


def read_allocation(job, text):
    """The #SBATCH directives, split into heterogeneous components at `#SBATCH hetjob`, then the sbatch
    command line (its ':' separates components too), which wins over the directives."""
    components = job["components"]
    for number, line, words in directives(text):
        if words is None:
            job["not_understood"].append({"line": number, "text": line, "why": ["unbalanced quotes in a directive"]})
            continue
        if words and words[0] in HET_SEPARATORS:
            components.append({"options": {}, "option_sources": {}, "line": number})
            job["directives"].append({"line": number, "text": line, "component": len(components) - 1,
                                      "separator": words[0]})
            continue
        options, _, unknown = slurm_options(words, stop_at_program=False)
        component = components[-1]
        job["directives"].append({"line": number, "text": line, "component": len(components) - 1})
        for name, value in options.items():
            component["options"][name] = value
            component["option_sources"][name] = {"line": number, "text": line, "where": "directive",
                                                 "words": words}
        job["unknown_options"] += unknown
    groups = [[]]
    for word in job["overrides"]:
        if word == ":":
            groups.append([])
        else:
            groups[-1].append(word)
    for index, group in enumerate(groups if job["overrides"] else []):
        while index >= len(components):
            components.append({"options": {}, "option_sources": {}, "line": None})
        options, _, unknown = slurm_options(group, stop_at_program=False)
        for name, value in options.items():  # the sbatch command line wins over the directives
            components[index]["options"][name] = value
            components[index]["option_sources"][name] = {"line": None, "text": "sbatch " + " ".join(job["overrides"]),
                                                         "where": "sbatch", "words": group}
        job["unknown_options"] += unknown
    job["allocation_options"] = components[0]["options"]
    job["option_sources"] = components[0]["option_sources"]
    for index, component in enumerate(components):
        for name, value in component["options"].items():
            problem = counts.check(name, value)
            if problem:
                source = component["option_sources"][name]
                job["invalid"].append(dict(problem, line=source["line"], text=source["text"], where=source["where"],
                                           component=index))


def read_job(text, overrides=(), source="script", deadline=None):
    """-> the job as data: encoding, directives, components, exports, environment setup, steps,
    not_understood. Lines past `deadline` (time.time() seconds) are counted, not read."""
    job = new_job(source, overrides)
    if source == "script":
        job["encoding"] = encoding(text)
    text = clean(text)
    read_allocation(job, text if source == "script" else "")
    read = shell.read(text, deadline)
    for problem in read["problems"]:
        job["not_understood"].append({"line": problem["line"], "text": line_text(text, problem["line"]),
                                      "why": [problem["why"]]})
    job["heredocs"] = [heredoc_fact(h) for h in read["heredocs"]]
    exports = job["exports"]
    lines = {}
    for command in read["commands"]:
        for number in range(command["line"], command["end_line"] + 1):
            lines[number] = lines.get(number, 0) + 1
    for command in read["commands"]:
        command["shares_line"] = any(lines[n] > 1 for n in range(command["line"], command["end_line"] + 1))
        read_command(job, command, exports)
    if job.get("steps_not_analysed"):
        job["not_understood"].append({"line": None, "text": "", "why": [
            "%d commands past the first %d launch lines were counted, not analysed" % (
                job["steps_not_analysed"], len(job["steps"]))]})
    job["not_understood"].sort(key=lambda item: item["line"] or 0)
    return job


def heredoc_fact(heredoc):
    return {"line": heredoc["line"], "delimiter": heredoc["delimiter"][:80], "body_lines": [heredoc["start"], heredoc["end"]],
            "terminated": heredoc["terminated"], "strip_tabs": heredoc["strip_tabs"]}


def line_text(text, number):
    lines = text.split("\n")
    return lines[number - 1] if 0 < number <= len(lines) else ""


def command_text(command):
    parts = [word.raw for word in command["words"]]
    for redirect in command["redirects"]:
        parts.append("%s%s%s" % (redirect["fd"] or "", redirect["op"], redirect["target"].raw if redirect["target"] else ""))
    return " ".join(parts) + (" &" if command["background"] else "")


def read_command(job, command, exports):
    words = command["words"]
    number = command["line"]
    if not words:
        return
    length = sum(len(word.raw) + 1 for word in words)
    if length > LINE_MAX_CHARS:
        job["not_understood"].append({"line": number, "text": command_text(command)[:500], "why": [
            "a command of %d characters (over %d): not read" % (length, LINE_MAX_CHARS)]})
        return
    first = words[0].value
    evaluates = sorted(set(what for word in words for what in word.evaluates()) |
                       set(what for r in command["redirects"] if r["target"] for what in r["target"].evaluates()))
    loop = next((word for word in [first] + command["reserved"] if word in shell.LOOPS), None)
    if loop and (loop != first or not words[0].quoted()):
        job["not_understood"].append({"line": number, "text": command_text(command), "why": [
            "a %s loop (its body may run any number of times)" % loop]})
        if loop == first:
            return
    if first == "eval" and len(words) == 2 and shell_hook(words[1]):
        job["environment_setup"].append({"line": number, "command": "eval", "what": "a shell hook"})
        return
    if first == "eval":
        job["not_understood"].append({"line": number, "text": command_text(command), "why": ["eval"] + evaluates})
        return
    if evaluates:
        job["not_understood"].append({"line": number, "text": command_text(command), "why": evaluates})
    for redirect in command["redirects"]:
        if redirect.get("heredoc") and command_name(first) in SHELLS + ("python", "python3", "srun"):
            body = redirect["heredoc"]
            job["not_understood"].append({"line": number, "text": command_text(command), "why": [
                "a here-document feeds %s: its lines %s to %s are commands the doctor did not read" % (
                    command_name(first), body["start"], body["end"])]})
    if len(job["steps"]) >= MAX_STEPS:
        job["steps_not_analysed"] = job.get("steps_not_analysed", 0) + 1
        return
    if first in ("export", "declare", "typeset", "readonly") and not words[0].quoted():
        flags = [w.value for w in words[1:] if w.value.startswith("-")]
        if first == "export" or any("x" in flag for flag in flags):
            for word in words[1:]:
                match = shell.ASSIGNMENT.match(word.value)
                if match:
                    exports[match.group(1)] = {"value": match.group(2), "line": number, "exported": True}
                elif word.value in exports:
                    exports[word.value]["exported"] = True
                elif shell.NAME.fullmatch(word.value):
                    exports[word.value] = {"value": None, "line": number, "exported": True}
        return
    if first == "unset":
        for word in words[1:]:
            exports.pop(word.value, None)
        return
    if first == "wait":
        job["steps"].append({"kind": "wait", "line": number})
        return
    name = command_name(first)
    if name in ENVIRONMENT_SETUP and not words[0].quoted():
        sub = ENVIRONMENT_SETUP[name]
        if sub is None or (len(words) > 1 and words[1].value in sub):
            job["environment_setup"].append({"line": number, "command": name,
                                             "arguments": [w.value[:200] for w in words[1:5]]})
            return
    start, env = strip_wrappers(words)
    if start >= len(words):  # plain assignments: shell variables, expanded in later lines
        for key, value in env.items():
            exports[key] = {"value": value, "line": number, "exported": exports.get(key, {}).get("exported", False)}
        return
    step = {"kind": "step", "line": number, "end_line": command["end_line"], "text": command_text(command),
            "background": command["background"], "joined": command["joined"] or command["shares_line"], "env": env,
            "exports": dict((k, dict(v)) for k, v in exports.items()), "partial": bool(evaluates),
            "words": [word.as_dict() for word in words],
            "redirects": [redirect_dict(r) for r in command["redirects"]], "prefix_end": start}
    if command_name(words[start].value) == "srun":
        read_srun(job, step, words, start)
        if step.get("prints_only"):
            return
    else:
        program = program_of(words, 0)
        if program["kind"] in ("none", "other"):
            if program.get("unreadable"):
                job["not_understood"].append({"line": number, "text": step["text"], "why": [program["name"]]})
            return
        step.update(launcher=None, srun=None, srun_unknown=[], srun_at=None, program=program, srun_components=None)
    check_step_counts(job, step)
    job["steps"].append(step)


def read_srun(job, step, words, start):
    """srun's options and program, per ':' component (srun -n1 a : -n2 b starts a heterogeneous step)."""
    components, at = [], start
    while at < len(words):
        options, rest, unknown = slurm_options(values(words[at + 1:]))
        options_end = len(words) - len(rest)
        stop = next((i for i in range(options_end, len(words)) if words[i].value == ":" and not words[i].quoted()),
                    len(words))
        program = program_of(words[:stop], options_end)
        components.append({"srun": options, "srun_unknown": unknown, "program": program, "options_at": at + 1,
                           "options_end": options_end, "end": stop})
        at = stop  # the ':' word: the next component's options follow it
    first = components[0]
    if first["srun"].get("help") or first["srun"].get("usage") or first["srun"].get("version"):
        step["prints_only"] = True  # srun prints and exits: no step, no tasks
        return
    step.update(launcher="srun", srun=first["srun"], srun_unknown=first["srun_unknown"], program=first["program"],
                srun_at=start, srun_options_end=first["options_end"],
                srun_components=components if len(components) > 1 else None)


def check_step_counts(job, step):
    """Impossible counts on the launch line itself: srun's options and torchrun's."""
    options = dict(step["srun"] or {})
    for component in step.get("srun_components") or []:
        for name, value in component["srun"].items():
            options.setdefault(name, value)
    for name, value in options.items():
        problem = counts.check(name, value)
        if problem:
            job["invalid"].append(dict(problem, line=step["line"], text=step["text"], where="srun", step_line=step["line"]))
    program = step["program"]
    if program["kind"] == "mpirun" and program["inner"]["kind"] == "torchrun":
        program = program["inner"]
    if program["kind"] == "torchrun":
        for name in ("nnodes", "nproc-per-node"):
            if name in program["options"]:
                problem = counts.check_torchrun(name, program["options"][name])
                if problem:
                    job["invalid"].append(dict(problem, line=step["line"], text=step["text"], where="torchrun",
                                               step_line=step["line"]))


def shell_hook(word):
    """eval "$(conda shell.bash hook)" and its kin: environment setup, not a command the doctor must follow."""
    kinds = [kind for kind, _, _ in word.parts]
    if kinds != ["cmdsub"]:
        return False
    inner = word.parts[0][1]
    return bool(SHELL_HOOK.match(inner.strip("`").strip()))
