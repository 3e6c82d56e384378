"""A fix is a value: a command line built from words, each rendered as one shell word, so that text from
the input (a path, a module name, a word of the user's job script, a store's message) runs nothing when
an agent pastes the line. Only the tool's own words may expand: a Variable is the tool's "$NAME"."""

import re

SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")  # needs no quotes in any POSIX shell
PARAMETER = re.compile(r"\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")


class Variable(str):
    """The tool's own parameter expansion, such as Variable("SLURM_JOB_ID"): rendered "$SLURM_JOB_ID",
    in double quotes, so it expands where the line runs and nothing else happens."""


class Raw(str):
    """Shell syntax the tool itself wrote (an operator such as && or a redirection): rendered as it is.
    Never built from input text."""


class NotCopied(ValueError):
    """A word of the user's that would run something when pasted (command substitution, backticks, an
    expansion with side effects): the tool does not copy it into a fix."""


def word(value):
    """One shell word for `value`: a Variable as "$NAME", a Raw as written, anything else literal."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Variable):
        return '"$%s"' % value
    value = "%s" % (value,)
    if value and SAFE.match(value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def line(*words):
    """A command line: each word rendered by word(); a word may itself be a list of words."""
    flat = []
    for item in words:
        flat.extend(item if isinstance(item, (list, tuple)) else [item])
    return " ".join(word(item) for item in flat)


def user_word(text):
    """A word the user wrote in a job script, for a corrected line that goes back into the same script: plain
    parameter expansions ($NAME, ${NAME}) stay expansions, as the user's shell would read them, inside double
    quotes; everything else is literal. Command substitution and backticks raise NotCopied: such a word runs
    a command, and the fix says the line was not rebuilt instead."""
    text = "%s" % (text,)
    if "$(" in text or "`" in text or "<(" in text or ">(" in text:
        raise NotCopied(text)
    if "$" not in text:
        return word(text)
    rest = PARAMETER.sub("", text)
    if "$" in rest or '"' in rest or "\\" in rest or "\n" in rest or "!" in rest:
        # ${x:-...}, ${x/...} and friends: not copied, rather than guessed at; "!" inside double quotes is
        # history expansion in an interactive bash, where a fix gets pasted
        raise NotCopied(text)
    return '"%s"' % text
