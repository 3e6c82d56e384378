"""A job script read the way bash reads it, never run: words (with what in each would expand), operators,
redirections and here-documents, split into simple commands with their line numbers. Nothing is expanded,
substituted or executed; what bash would evaluate and the doctor does not is marked on the word.

Bash's rules kept here: quotes and `$(...)` may span lines; a backslash before a newline joins lines
outside single quotes; `#` starts a comment only at the start of a word; `<<` and `<<-` start a here-
document whose body begins on the line after the command line and ends at a line that is exactly the
delimiter (`<<-` strips leading tabs first); `<<<` is a here-string; `<<` inside `$(( ))`, `(( ))`, quotes
or a comment is no redirection. What cannot be read (an unclosed quote or substitution, a here-document
that never ends) is a problem naming the line and what was not read."""

import re
import time

OPERATORS = (";;&", "&&", "||", ";;", ";&", "|&", "|", "&", ";", "(", ")")
REDIRECTIONS = ("<<<", "<<-", "<<", "&>>", "<>", "<&", ">&", ">>", ">|", "&>", "<", ">")
ORDINARY = re.compile(r"[^\s'\"\\$`;&|()<>*?\[]+")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
SPECIAL_PARAMETERS = "0123456789@*#?$!-"
# words that open or close a compound command: the simple command after them is read as any other
RESERVED = ("if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time", "esac",
            "[[", "]]")
LOOPS = ("for", "select", "while", "until")
MAX_DEPTH = 32
# The job's first node, written as bash would compute it: hostname in the batch script (which runs on the
# job's first node), or the first name of the job's node list.
FIRST_NODE_IDIOMS = (
    re.compile(r"^\s*hostname(\s+-[sf])?\s*$"),
    re.compile(r"^\s*scontrol\s+show\s+hostnames?\s+[\"']?\$\{?SLURM_(JOB_)?NODELIST\}?[\"']?\s*\|\s*head\s+"
               r"(-n\s*1|-1|--lines=1)\s*$"),
)


class Unreadable(Exception):
    """Bash would stop here with a syntax error: what and where."""

    def __init__(self, line, why):
        Exception.__init__(self, why)
        self.line, self.why = line, why


class DeadlineReached(Exception):
    """The run's deadline came while reading: the line reached."""

    def __init__(self, line):
        Exception.__init__(self, "the deadline came at line %d" % line)
        self.line = line


class Word(object):
    """One shell word: `parts` [(kind, text, quoted)], kind one of lit (literal text, quotes removed),
    glob (an unquoted * ? [ that expands), param (a plain $NAME or ${NAME}), special ($1, $@, ...),
    braced (any other ${...}), cmdsub ($(...) or backticks), first-node (a cmdsub the doctor knows: the
    job's first node), arith ($((...))), procsub (<(...) >(...)), ansi ($'...'), tilde (~ or ~user);
    `raw` as written; `line` where it starts."""

    def __init__(self, line):
        self.parts, self.line, self.raw = [], line, ""

    def add(self, kind, text, quoted=False):
        if kind == "lit" and self.parts and self.parts[-1][0] == "lit" and self.parts[-1][2] == quoted:
            self.parts[-1] = ("lit", self.parts[-1][1] + text, quoted)
        else:
            self.parts.append((kind, text, quoted))

    def kinds(self):
        return set(kind for kind, _, _ in self.parts)

    @property
    def value(self):
        """The word as data: literal text, $NAME for a parameter, $(...) or ${...} as written for what the
        doctor does not evaluate, FIRST_NODE for the first-node idiom."""
        out = []
        for index, (kind, text, _) in enumerate(self.parts):
            if kind in ("lit", "glob"):
                out.append(text)
            elif kind == "param":
                after = self.parts[index + 1] if index + 1 < len(self.parts) else None
                glued = after is not None and after[0] in ("lit", "glob") and re.match(r"[A-Za-z0-9_]", after[1])
                out.append("${%s}" % text if glued else "$" + text)
            elif kind == "special":
                out.append("$" + text)
            elif kind == "braced":
                out.append("${%s}" % text)
            elif kind == "cmdsub":
                out.append(text if text.startswith("`") else "$(%s)" % text)
            elif kind == "first-node":
                out.append(FIRST_NODE)
            elif kind == "arith":
                out.append("$((%s))" % text)
            elif kind == "procsub":
                out.append(text)
            elif kind == "ansi":
                out.append("$'%s'" % text)
            elif kind == "tilde":
                out.append("~" + text)
        return "".join(out)

    def quoted(self):
        return any(quoted for _, _, quoted in self.parts) or "\\" in self.raw

    def evaluates(self):
        """What in this word runs something when bash expands it (not the known first-node idiom)."""
        found = []
        for kind, text, _ in self.parts:
            if kind == "cmdsub":
                found.append("backticks" if text.startswith("`") else "command substitution $(...)")
            elif kind == "procsub":
                found.append("process substitution")
        return found

    def as_dict(self):
        return {"raw": self.raw, "value": self.value, "parts": [[kind, text, quoted] for kind, text, quoted in self.parts]}


FIRST_NODE = "@first-node-of-the-job@"


class Lexer(object):
    """Tokens of a script: {"type": "word", "word": Word}, {"type": "op", "op"}, {"type": "newline"},
    {"type": "redir", "op", "fd", "target": Word, "heredoc": {...} for << and <<-}, each with "line"."""

    def __init__(self, text, deadline=None):
        self.text, self.pos, self.line = text, 0, 1
        self.deadline = deadline
        self.pending = []    # here-documents whose body starts after the next newline
        self.heredocs = []   # every here-document read: its line, delimiter, body lines, terminated
        self.depth = 0
        self.checked = 0

    # --- characters -----------------------------------------------------------------------------
    def peek(self, count=1):
        return self.text[self.pos:self.pos + count]

    def advance(self, count=1):
        chunk = self.text[self.pos:self.pos + count]
        self.line += chunk.count("\n")
        self.pos += count
        return chunk

    def tick(self):
        self.checked += 1
        if self.deadline is not None and self.checked % 2048 == 0 and time.time() > self.deadline:
            raise DeadlineReached(self.line)

    # --- tokens -----------------------------------------------------------------------------------
    def tokens(self, closer=None, out=None, opened=None):
        """Tokens to the end of the text, or (closer=")") to the ")" that closes a $( ... ) at depth 0; appended
        to `out` as they are read (what was read stays there when the reading stops)."""
        found, nesting = ([] if out is None else out), 0
        at_command_start = True
        while True:
            self.tick()
            char = self.peek()
            if not char:
                if closer:
                    raise Unreadable(opened or self.line, "a $( ... ) is never closed")
                return found
            if char in " \t":
                self.advance()
                continue
            if self.peek(2) == "\\\n":
                self.advance(2)
                continue
            if char == "\n":
                found.append({"type": "newline", "line": self.line})
                self.advance()
                self.read_heredoc_bodies()
                at_command_start = True
                continue
            if char == "#":
                end = self.text.find("\n", self.pos)
                self.advance((end if end >= 0 else len(self.text)) - self.pos)
                continue
            if at_command_start and self.peek(2) == "((":
                word = Word(self.line)
                start = self.pos
                self.advance(2)
                word.add("arith", self.balanced_parens(2, "a (( ... )) is never closed"))
                word.raw = self.text[start:self.pos]
                found.append({"type": "word", "word": word, "line": word.line})
                at_command_start = False
                continue
            redirection = self.redirection_operator()
            if redirection:
                found.append(self.read_redirection(redirection, None))
                continue
            operator = next((op for op in OPERATORS if self.text.startswith(op, self.pos)), None)
            if operator:
                if closer and operator == ")" and nesting == 0:
                    self.advance()
                    return found
                nesting += {"(": 1, ")": -1}.get(operator, 0)
                found.append({"type": "op", "op": operator, "line": self.line})
                self.advance(len(operator))
                at_command_start = operator != ")"
                continue
            word = self.read_word()
            number = re.match(r"^[0-9]+$", word.raw)
            redirection = self.redirection_operator()
            if number and redirection and word.kinds() == {"lit"} and not word.quoted():
                found.append(self.read_redirection(redirection, word.raw))
                continue
            found.append({"type": "word", "word": word, "line": word.line})
            at_command_start = word.raw in RESERVED or (at_command_start and ASSIGNMENT.match(word.value or "") is not None
                                                       and not word.quoted())

    def redirection_operator(self):
        if self.peek(2) in ("<(", ">("):
            return None
        return next((op for op in REDIRECTIONS if self.text.startswith(op, self.pos)), None)

    def read_redirection(self, operator, fd):
        line = self.line
        self.advance(len(operator))
        while self.peek() in (" ", "\t") and self.peek():
            self.advance()
        token = {"type": "redir", "op": operator, "fd": fd, "line": line, "target": None}
        if self.peek() and self.peek() not in "\n;&|()<>" and self.peek(2) != "\\\n":
            token["target"] = self.read_word()
        elif self.peek() in ("<", ">") and self.peek(2) in ("<(", ">("):
            token["target"] = self.read_word()
        if operator in ("<<", "<<-"):
            if token["target"] is None:
                raise Unreadable(line, "%s without a delimiter word" % operator)
            target = token["target"]  # the delimiter: the word with its quotes removed, nothing expanded
            heredoc = {"line": line, "delimiter": target.value, "quoted": target.quoted(), "strip_tabs": operator == "<<-",
                       "body": [], "start": None, "end": None, "terminated": False}
            token["heredoc"] = heredoc
            self.pending.append(heredoc)
        return token

    def read_heredoc_bodies(self):
        """After a newline: the bodies of the here-documents its line opened, in order."""
        pending, self.pending = self.pending, []
        for heredoc in pending:
            heredoc["start"] = self.line
            lines = 0
            while self.pos < len(self.text):
                self.tick()
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                body_line = self.text[self.pos:end]
                self.advance(end - self.pos + 1 if end < len(self.text) else end - self.pos)
                compared = body_line.lstrip("\t") if heredoc["strip_tabs"] else body_line
                if compared == heredoc["delimiter"]:
                    heredoc["terminated"] = True
                    break
                lines += 1
                if len(heredoc["body"]) < 64:
                    heredoc["body"].append(body_line[:500])
            heredoc["end"] = heredoc["start"] + lines - 1
            self.heredocs.append(heredoc)

    # --- words ------------------------------------------------------------------------------------
    def read_word(self):
        word = Word(self.line)
        start = self.pos
        while True:
            char = self.peek()
            if not char or char in " \t\n" or (char in ";&|()<>" and self.peek(2) not in ("<(", ">(")):
                break
            if char in "<>":  # <( or >( : process substitution
                opener = self.advance(2)
                word.add("procsub", opener + self.balanced_parens(1, "a process substitution is never closed") + ")")
                continue
            if char == "\\":
                if self.peek(2) == "\\\n":
                    self.advance(2)
                    continue
                self.advance()
                escaped = self.advance()
                word.add("lit", escaped, True)
                continue
            if char == "'":
                line = self.line
                end = self.text.find("'", self.pos + 1)
                if end < 0:
                    raise Unreadable(line, "unbalanced quotes: a ' is never closed")
                self.advance()
                word.add("lit", self.advance(end - self.pos), True)
                self.advance()
                continue
            if char == '"':
                self.read_double_quoted(word)
                continue
            if char == "$":
                self.read_dollar(word, False)
                continue
            if char == "`":
                word.add("cmdsub", self.read_backticks())
                continue
            if char in "*?[":
                word.add("glob", self.advance())
                continue
            if char == "~" and self.pos == start:
                match = re.compile(r"~([A-Za-z0-9._-]*)").match(self.text, self.pos)
                self.advance(match.end() - self.pos)
                word.add("tilde", match.group(1))
                continue
            match = ORDINARY.match(self.text, self.pos)
            word.add("lit", self.advance(match.end() - self.pos))
        word.raw = self.text[start:self.pos]
        self.mark_first_node(word)
        return word

    def read_double_quoted(self, word):
        line = self.line
        self.advance()
        while True:
            char = self.peek()
            if not char:
                raise Unreadable(line, 'unbalanced quotes: a " is never closed')
            if char == '"':
                self.advance()
                return
            if char == "\\":
                following = self.peek(2)[1:]
                if following == "\n":
                    self.advance(2)
                elif following in ("$", "`", '"', "\\"):
                    self.advance()
                    word.add("lit", self.advance(), True)
                else:
                    word.add("lit", self.advance(), True)
                continue
            if char == "$":
                self.read_dollar(word, True)
                continue
            if char == "`":
                word.add("cmdsub", self.read_backticks(), True)
                continue
            end = self.pos
            while end < len(self.text) and self.text[end] not in '"\\$`':
                end += 1
            word.add("lit", self.advance(end - self.pos), True)

    def read_dollar(self, word, quoted):
        following = self.peek(3)
        if following.startswith("$(("):
            self.advance(3)
            word.add("arith", self.balanced_parens(2, "a $(( ... )) is never closed"), quoted)
        elif following.startswith("$("):
            opened = self.line
            self.advance(2)
            start = self.pos
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise Unreadable(self.line, "command substitutions nested deeper than %d" % MAX_DEPTH)
            self.tokens(closer=")", opened=opened)
            self.depth -= 1
            word.add("cmdsub", self.text[start:self.pos - 1], quoted)
        elif following.startswith("${"):
            self.advance(2)
            start, depth, unclosed = self.pos, 1, "a ${ ... } is never closed"
            for char in self.characters(unclosed):
                if char in "'\"" and not quoted:
                    self.advance()
                    self.until(char, unclosed)
                    continue
                depth += 1 if self.peek(2) == "${" else -1 if char == "}" else 0
                self.advance(2 if self.peek(2) == "${" else 1)
                if depth == 0:
                    break
            inner = self.text[start:self.pos - 1]
            word.add("param" if NAME.fullmatch(inner) else "braced", inner, quoted)
        elif following.startswith("$'") and not quoted:
            self.advance(2)
            word.add("ansi", self.until("'", "unbalanced quotes: a $' is never closed"), True)
        elif following.startswith('$"') and not quoted:
            self.advance()
            self.read_double_quoted(word)
        else:
            match = NAME.match(self.text, self.pos + 1)
            if match:
                self.advance(match.end() - self.pos)
                word.add("param", match.group(0), quoted)
            elif following[1:2] and following[1:2] in SPECIAL_PARAMETERS:
                self.advance(2)
                word.add("special", following[1], quoted)
            else:
                word.add("lit", self.advance(), quoted)

    def read_backticks(self):
        self.advance()
        return "`" + self.until("`", "a backtick is never closed") + "`"

    def characters(self, unclosed):
        """Each character from here, a backslash and the character it escapes stepped over; Unreadable
        (`unclosed`, at the line where this began) when the text ends first. The caller advances."""
        line = self.line
        while True:
            char = self.peek()
            if not char:
                raise Unreadable(line, unclosed)
            if char == "\\":
                self.advance(2)
                continue
            yield char

    def until(self, closer, unclosed):
        """The text up to the next `closer` not escaped by a backslash; the position moves past it."""
        start = self.pos
        for char in self.characters(unclosed):
            if char == closer:
                inner = self.text[start:self.pos]
                self.advance()
                return inner
            self.advance()

    def balanced_parens(self, closing, unclosed):
        """The text up to the `closing` ")"s that end an arithmetic or process substitution, with the
        parentheses and quotes inside balanced; the position moves past them."""
        start, depth = self.pos, 0
        for char in self.characters(unclosed):
            if char in "'\"":
                self.advance()
                self.until(char, unclosed)
                continue
            if char == ")" and depth == 0:
                if closing == 2 and self.peek(2) != "))":
                    raise Unreadable(self.line, unclosed)
                inner = self.text[start:self.pos]
                self.advance(closing)
                return inner
            depth += {"(": 1, ")": -1}.get(char, 0)
            self.advance()

    @staticmethod
    def mark_first_node(word):
        for index, (kind, text, quoted) in enumerate(word.parts):
            if kind != "cmdsub":
                continue
            inner = text[1:-1] if text.startswith("`") else text
            if any(idiom.match(inner) for idiom in FIRST_NODE_IDIOMS):
                word.parts[index] = ("first-node", text, quoted)


def split_commands(tokens):
    """Simple commands of a token list: {"words", "redirects", "line", "end_line", "background", "joined",
    "reserved"}. A command ends at ; & && || | |& ( ) ;; or a newline; reserved words that open or close a
    compound command (if, then, do, done, {, ...) are taken off its front and noted."""
    commands, current, last_operator, depth = [], None, None, 0

    def finish(operator):
        if current and (current["words"] or current["redirects"]):
            current["separator"] = operator
            current["background"] = operator == "&"
            current["joined"] = current["joined"] or operator in ("&&", "||", "|", "|&")
            commands.append(current)
        return None

    for token in tokens:
        if token["type"] in ("op", "newline"):
            operator = token.get("op", "\n")
            current = finish(operator)
            last_operator = operator
            depth = max(0, depth + {"(": 1, ")": -1}.get(operator, 0))
            continue
        if current is None:
            current = {"words": [], "redirects": [], "line": token["line"], "end_line": token["line"],
                       "background": False, "joined": last_operator in ("&&", "||", "|", "|&"), "reserved": [],
                       "grouped": depth > 0}
        current["end_line"] = max(current["end_line"], token["line"])
        if token["type"] == "redir":
            current["redirects"].append(token)
            continue
        word = token["word"]
        current["end_line"] = max(current["end_line"], word.line + word.raw.count("\n"))
        if not current["words"] and word.raw in RESERVED and not word.quoted():
            current["reserved"].append(word.raw)
            continue
        current["words"].append(word)
    finish(None)
    return commands


def read(text, deadline=None):
    """-> {"commands", "heredocs", "problems"}: the script's simple commands as bash reads them; a problem
    ({"line", "why"}) where bash would stop (nothing after it is read) or a here-document never ends."""
    lexer = Lexer(text, deadline)
    problems, tokens = [], []
    last = text.count("\n") + (0 if text.endswith("\n") else 1)
    try:
        lexer.tokens(out=tokens)
    except (Unreadable, DeadlineReached) as stop:
        why = "the deadline came" if isinstance(stop, DeadlineReached) else "%s: bash stops here" % stop.why
        problems.append({"line": stop.line, "why": "%s; lines %d to %d were not read" % (why, stop.line, max(stop.line, last)),
                         "stopped": True})
        complete = max([index for index, token in enumerate(tokens) if token["type"] == "newline"] + [-1])
        del tokens[complete + 1:]  # the command being read when bash stopped never runs
    for heredoc in lexer.heredocs + lexer.pending:
        if not heredoc["terminated"]:
            problems.append({"line": heredoc["line"], "why": (
                "the here-document started here never ends (no line is exactly %r): bash reads lines %d to %d as its "
                "text, not as commands, and warns 'here-document at line %d delimited by end-of-file'" % (
                    heredoc["delimiter"][:40], heredoc["start"] or heredoc["line"] + 1, last, heredoc["line"]))})
    return {"commands": split_commands(tokens), "heredocs": lexer.heredocs + lexer.pending, "problems": problems}


def read_line(text):
    """The simple commands of one line (a launch line, a shell's -c string); Unreadable when bash could
    not read it."""
    lexer = Lexer(text)
    return split_commands(lexer.tokens())
