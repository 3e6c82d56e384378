"""A job script read as words, never run: logical lines (backslash continuations joined), the #SBATCH
directives sbatch reads (those before the first command), and simple commands split at ; && || | &.
Shell the doctor does not evaluate (command or process substitution, backticks, eval, source,
loops, unbalanced quotes) is reported as not understood, with the line; here-document bodies are
skipped as data."""

import re
import shlex

OPERATORS = (";", "&&", "||", "|", "&", "(", ")", "|&", ";;", "{", "}")
REDIRECTIONS = (">", ">>", "<", ">&", "&>", "<>", ">|", "&>>", "<&")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
CONTROL_WORDS = ("if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "!", "time", "exec",
                 "nohup", "command", "builtin")
LOOP_WORDS = ("for", "while", "until", "select", "function")
MAX_LINES = 20000


def logical_lines(text):
    """[(first physical line number, text)], continuations joined, here-document bodies left out."""
    lines, pending, start, heredoc = [], [], None, None
    for number, line in enumerate(text.splitlines()[:MAX_LINES], 1):
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        if start is None:
            start = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(part.strip() if i else part for i, part in enumerate(pending))
        lines.append((start, joined))
        pending, start = [], None
        match = HEREDOC.search(strip_single_quoted(joined))
        if match:
            heredoc = match.group(2)
    if pending:
        lines.append((start, " ".join(pending)))
    return lines


def strip_single_quoted(line):
    return re.sub(r"'[^']*'", "''", line)


def tricks(line):
    """What in `line` the shell would evaluate and the doctor does not: outside single quotes,
    command substitution, backticks, process substitution; a leading eval or source."""
    found, quote, index = [], None, 0
    while index < len(line):
        char = line[index]
        if char == "\\" and quote != "'":
            index += 2
            continue
        if char == "'" and quote != '"':
            quote = None if quote == "'" else "'"
        elif char == '"' and quote != "'":
            quote = None if quote == '"' else '"'
        elif quote != "'":
            pair = line[index:index + 2]
            if pair == "$(" and line[index:index + 3] != "$((":
                found.append("command substitution $(...)")
            elif char == "`":
                found.append("backticks")
            elif pair in ("<(", ">(") and quote is None:
                found.append("process substitution")
        elif char == "#" and quote is None and (index == 0 or line[index - 1].isspace()):
            break
        index += 1
    words = line.split()
    if words and words[0] in ("eval", "source", "."):
        found.append(words[0])
    if words and words[0] in LOOP_WORDS:
        found.append("a %s loop or function (its body may run any number of times)" % words[0])
    return sorted(set(found))


def tokens(line):
    """Words and operators of one line (quotes removed, comments dropped); ValueError when the
    quotes do not balance."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def split_commands(words):
    """[(words, background)] of the simple commands in a token list, redirections dropped."""
    commands, current, index = [], [], 0
    while index < len(words):
        word = words[index]
        if word in REDIRECTIONS:
            index += 2
            continue
        if word.isdigit() and index + 1 < len(words) and words[index + 1] in REDIRECTIONS:
            index += 1
            continue
        if word in OPERATORS:
            if current:
                commands.append((current, word == "&"))
            current = []
        else:
            current.append(word)
        index += 1
    if current:
        commands.append((current, False))
    return commands


def directives(lines):
    """[(line number, text, option words)] of the #SBATCH lines before the first command."""
    found = []
    for number, text in lines:
        stripped = text.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break  # sbatch stops reading directives at the first command
        body = stripped[len("#SBATCH"):].split(" #", 1)[0]
        try:
            found.append((number, text, shlex.split(body)))
        except ValueError:
            found.append((number, text, None))
    return found
