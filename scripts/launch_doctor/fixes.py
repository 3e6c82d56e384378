"""Corrected launch lines, rebuilt from the words the doctor parsed (never from the line's text): each of the
user's words goes back through diagnostics_core.command (a literal as one quoted word, a plain $NAME as an
expansion); the doctor's own flags are its words, placed where the launcher reads them (among srun's or
torchrun's options, before the program; inside a `bash -c` string, in the command the string runs). A
word that would run something when pasted (command substitution, backticks, ${...} with operators, a
glob, a here-document) is not copied: the fix then says which line was not rebuilt and what to add where.
The job's first node written as $(hostname) or $(scontrol show hostnames ... | head -n 1) becomes the
doctor's "$MASTER_ADDR" with its export line before the corrected line."""

import re

from diagnostics_core import command
from .options import SLURM_VALUES, TORCHRUN_VALUES
from .shell import FIRST_NODE

# The doctor's own idiom for the job's first node: it runs where the job script runs (the batch host, the
# job's first node), never on the machine the script was submitted from.
FIRST_NODE_COMMAND = 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
RUNS_CODE = ("$(", "`", "<(", ">(")
REDIRECTIONS = ("<<<", "&>>", "<>", "<&", ">&", ">>", ">|", "&>", "<", ">")
SEPARATORS = {";": "; ", "\n": "; ", None: "", "&&": " && ", "||": " || ", "|": " | ", "|&": " |& ", "&": " & "}
SRUN_SHORT = {"nodes": "-N", "ntasks": "-n", "cpus-per-task": "-c"}
TAKES_VALUE = SLURM_VALUES | TORCHRUN_VALUES


class NotRebuilt(Exception):
    """The line cannot be rebuilt safely; `why` says what in it (never its text)."""

    def __init__(self, why):
        Exception.__init__(self, why)
        self.why = why


def tool_word(text):
    """One word the doctor writes: it may name one of its variables ("--rdzv-id=$SLURM_JOB_ID") or carry a
    value read from the script (an endpoint host, an --export list); command.user_word renders it, so a plain
    $NAME stays an expansion in double quotes and anything that would run raises NotCopied."""
    return command.user_word(text)


def option(name, value):
    return tool_word("--%s=%s" % (name, value))


# --- the user's words ---------------------------------------------------------------------------------

def user_form(parts):
    """(the word's text for command.user_word, whether it names the job's first node): literal text, plain
    $NAME expansions, the first-node idiom as $MASTER_ADDR, a leading ~ as $HOME; NotRebuilt otherwise."""
    out, first_node, expands, literal_dollar = [], False, False, False
    for index, (kind, text, _) in enumerate(parts):
        following = parts[index + 1] if index + 1 < len(parts) else None
        glued = following is not None and following[0] == "lit" and re.match(r"[A-Za-z0-9_]", following[1])
        if kind == "lit":
            if "$" in text.replace(FIRST_NODE, ""):
                literal_dollar = True
            if FIRST_NODE in text:
                first_node = expands = True
                text = text.replace(FIRST_NODE, "${MASTER_ADDR}")
            out.append(text)
        elif kind == "param":
            expands = True
            out.append("${%s}" % text if glued else "$" + text)
        elif kind == "first-node":
            first_node = expands = True
            out.append("${MASTER_ADDR}" if glued else "$MASTER_ADDR")
        elif kind == "tilde" and index == 0 and text == "":
            expands = True
            out.append("$HOME")
        else:
            raise NotRebuilt(DESCRIBE.get(kind, kind))
    if expands and literal_dollar:  # a quoted '$' beside an expansion would become one
        raise NotRebuilt("a quoted '$' beside an expansion")
    return "".join(out), first_node, expands


DESCRIBE = {"cmdsub": "command substitution or backticks", "glob": "a glob (* ? [) that expands to file names",
            "braced": "a ${...} expansion with an operator", "special": "a special parameter ($1, $@, ...)",
            "arith": "arithmetic $((...))", "procsub": "process substitution", "ansi": "a $'...' string",
            "tilde": "~user"}


def render_word(word):
    """(one shell word for a word of the user's, names the first node)."""
    parts = [tuple(part) for part in word["parts"]]
    if not parts:
        return "''", False
    assignment = parts[0][0] == "lit" and not parts[0][2] and re.match(r"^([A-Za-z_][A-Za-z0-9_]*\+?=)(.*)$", parts[0][1], re.S)
    if assignment:  # NAME= stays bare, or bash would run the quoted word as a command
        rest = ([("lit", assignment.group(2), False)] if assignment.group(2) else []) + parts[1:]
        value = "".join(text for _, text, _ in rest) if all(kind == "lit" for kind, _, _ in rest) else "$"
        rendered, first_node = render_word({"parts": rest, "value": value}) if rest else ("''", False)
        return assignment.group(1) + rendered, first_node
    if all(kind == "lit" for kind, _, _ in parts) and FIRST_NODE not in word["value"]:
        if any(mark in word["value"] for mark in RUNS_CODE):
            raise NotRebuilt("a quoted string holding shell code ($(...), backticks) that runs where the line runs")
        return command.word(word["value"]), False
    form, first_node, expands = user_form(parts)
    if not expands:
        return command.word(form), first_node
    if "!" in form:
        raise NotRebuilt("a '!' beside an expansion (history expansion in an interactive shell)")
    try:
        return command.user_word(form), first_node
    except command.NotCopied:
        raise NotRebuilt("a quote, backslash or $ beside an expansion")


def render_redirect(redirect):
    if redirect.get("heredoc"):
        raise NotRebuilt("a here-document")
    if redirect["op"] not in REDIRECTIONS or not re.match(r"^[0-9]*$", redirect["fd"] or ""):
        raise NotRebuilt("a redirection")
    if redirect["target"] is None:
        raise NotRebuilt("a redirection without a target")
    target, first_node = render_word(redirect["target"])
    return "%s%s %s" % (redirect["fd"] or "", redirect["op"], target), first_node


# --- edits --------------------------------------------------------------------------------------------

class Line(object):
    """One command being corrected: the user's words, rendered one by one, with the doctor's words put
    before a word (`before`) or in place of one (`instead`)."""

    def __init__(self, words, redirects=(), background=False):
        self.words, self.redirects, self.background = words, list(redirects), background
        self.before, self.instead = {}, {}

    def insert(self, index, *rendered):
        self.before.setdefault(index, []).extend(rendered)

    def replace(self, index, *rendered):
        self.instead[index] = list(rendered)

    def render(self):
        """-> (the line, whether it names the first node); NotRebuilt when a user word cannot be copied."""
        out, first_node = [], False
        for index in range(len(self.words) + 1):
            out.extend(self.before.get(index, []))
            if index == len(self.words):
                break
            if index in self.instead:
                out.extend(self.instead[index])
                continue
            rendered, named = render_word(self.words[index])
            first_node = first_node or named
            out.append(rendered)
        for redirect in self.redirects:
            rendered, named = render_redirect(redirect)
            first_node = first_node or named
            out.append(rendered)
        if self.background:
            out.append("&")  # the doctor's operator: the step still runs in the background
        return " ".join(out), first_node


def find_option(words, start, end, names, short=None):
    """(index, number of words) of the first option named in `names` (long, '_' or '-') or `short` among
    words[start:end]; None when absent."""
    spelled = set(names) | set(name.replace("-", "_") for name in names)
    index = start
    while index < end:
        value = words[index]["value"]
        if value.startswith("--"):
            name, equals, _ = value[2:].partition("=")
            if name in spelled:
                return index, 1 if equals or index + 1 >= end else 2
        elif short and value.startswith(short):
            return index, 1 if len(value) > len(short) or index + 1 >= end else 2
        index += 1
    return None


def set_option(line, start, end, name, value, aliases=(), short=None):
    """--name=value among words[start:end]: in place of the option where it is, else added at `end` (the
    launcher's last option: before its program). value None removes the option."""
    found = find_option(line.words, start, end, (name,) + tuple(aliases), short)
    rendered = [] if value is None else [option(name, value) if value is not True else command.word("--" + name)]
    if found:
        index, count = found
        if count == 2 and name not in TAKES_VALUE:
            count = 1  # a flag (--standalone): the next word is not its value
        line.replace(index, *rendered)
        if count == 2:
            line.replace(index + 1)
    elif rendered:
        line.insert(end, *rendered)


class Edits(object):
    """What a rule changes in a step: srun's options, the launcher's options, variables set before the
    program, an srun prefix for a launcher that runs in the batch shell."""

    def __init__(self):
        self.srun, self.launcher, self.env, self.srun_prefix = [], [], [], None

    def set_srun(self, name, value):
        self.srun.append((name, value))
        return self

    def set_launcher(self, name, value, aliases=()):
        self.launcher.append((name, value, aliases))
        return self

    def set_env(self, name, value):
        self.env.append((name, value))
        return self

    def run_under_srun(self, options):
        self.srun_prefix = options
        return self


def apply_launcher(line, program, edits):
    if not edits.launcher:
        return
    if program.get("kind") == "mpirun" and program.get("inner", {}).get("kind") == "torchrun":
        program = program["inner"]
    if program.get("kind") != "torchrun" or "options_end" not in program:
        raise NotRebuilt("the launcher's options could not be located")
    for name, value, aliases in edits.launcher:
        set_option(line, program["options_at"], program["options_end"], name, value, aliases)


def rebuild(step, edits):
    """-> {"line": the corrected command, "first_node": it uses "$MASTER_ADDR" for the user's first-node idiom}
    or {"line": None, "why": what could not be copied}."""
    try:
        words = step["words"]
        line = Line(words, step.get("redirects") or (), step.get("background"))
        program = step["program"]
        at = program.get("at", step.get("prefix_end", 0))
        for name, value in edits.env:
            line.insert(step.get("srun_at") if step.get("srun_at") is not None else at, tool_word("%s=%s" % (name, value)))
        if edits.srun_prefix is not None:
            if step.get("launcher") == "srun":
                raise NotRebuilt("srun is already there")
            line.insert(at, command.word("srun"), *[option(name, value) for name, value in edits.srun_prefix])
        if edits.srun:
            if step.get("launcher") != "srun":
                raise NotRebuilt("the line has no srun")
            for name, value in edits.srun:
                set_option(line, step["srun_at"] + 1, step["srun_options_end"], name, value, short=SRUN_SHORT.get(name))
        first_node = False
        if edits.launcher and program.get("shell"):
            inner, first_node = rebuild_string(program, edits)
            line.replace(program["shell"]["string_at"], command.word(inner))
        else:
            apply_launcher(line, program, edits)
        text, named = line.render()
        return {"line": text, "first_node": first_node or named}
    except NotRebuilt as refused:
        return {"line": None, "why": refused.why}
    except command.NotCopied:
        return {"line": None, "why": "a word that would run something when pasted"}


def rebuild_string(program, edits):
    """The -c string of `bash -c "..."` with the launcher edited inside it: every command of the string
    rebuilt from its words, joined by the operators that joined them."""
    string = program["string"]
    out, first_node = [], False
    for index, inner in enumerate(string["commands"]):
        if inner["reserved"] or inner["grouped"]:
            raise NotRebuilt("a compound command (if, for, a group) inside the shell string")
        line = Line(inner["words"], inner["redirects"], False)
        if index == string["index"]:
            apply_launcher(line, program, edits)
        text, named = line.render()
        first_node = first_node or named
        out.append(text + SEPARATORS.get(inner["separator"], "; "))
    return "".join(out).rstrip("; ").rstrip(), first_node


def fix_text(step, edits, done, instead, also=""):
    """The fix for one step: the corrected line (with the first-node export before it when the user's
    idiom became "$MASTER_ADDR", or when `edits` use it), then a comment of the doctor's own words; or,
    when the line cannot be rebuilt, a comment saying so and `instead` (what to add where)."""
    rebuilt = rebuild(step, edits)
    where = "line %d" % step["line"] if not step.get("joined") else "the %s command in line %d (the rest of the line " \
        "stays)" % (launcher_word(step), step["line"])
    if rebuilt["line"] is None:
        return "# %s was not rebuilt (it holds %s, which the doctor does not copy): %s%s" % (
            where, rebuilt["why"], instead, also)
    uses_first_node = rebuilt["first_node"] or any("$MASTER_ADDR" in str(value) for _, value, _ in edits.launcher) \
        or any("$MASTER_ADDR" in str(value) for _, value in edits.env)
    head = FIRST_NODE_COMMAND + "; " if uses_first_node else ""
    note = ""
    if rebuilt["first_node"]:
        note = "; $(hostname) or $(scontrol ...) in the job script runs on the batch host (the job's first node), " \
               "not where the script was submitted: MASTER_ADDR above says it once"
    return "%s%s  # %s, corrected: %s%s%s" % (head, rebuilt["line"], where, done, note, also)


def launcher_word(step):
    return "srun" if step.get("launcher") == "srun" else step["program"].get("name") or step["program"]["kind"]
