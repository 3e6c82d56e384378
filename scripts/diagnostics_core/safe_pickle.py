"""What a torch.save file would make the unpickler import and call, found without unpickling it.

A pickle runs code only through the callables it names (GLOBAL, STACK_GLOBAL, extension codes) and
then calls (REDUCE, NEWOBJ, INST, OBJ, BUILD). scan() walks the opcodes with pickletools and a small
symbolic stack, executing nothing, and says whether every name is one of the types a PyG partition
file holds. Files it proves safe can be rewritten with RestrictedUnpickler, which refuses every
other name even if the file changed after the scan.

Standard library only; torch is imported only by rewrite_as_dict().
"""

import io
import os
import pickletools
import stat
import zipfile

SCAN_LIMIT = 64 << 20  # bytes of pickle data scanned; a partition's data.pkl holds structure only
NAMES_SHOWN = 32  # names listed per kind in scan()'s facts

# Names a partition file may use: containers, and what torch.save writes for tensors and storages.
ALLOWED = frozenset([
    "collections.defaultdict", "collections.OrderedDict",
    "builtins.dict", "builtins.list", "builtins.tuple", "builtins.set", "builtins.frozenset",
    "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
    "torch.Size", "torch.device", "torch.storage.UntypedStorage", "torch.storage.TypedStorage",
])
STORAGE_MODULE = "torch"
STORAGE_SUFFIX = "Storage"  # torch.FloatStorage, torch.LongStorage, ...: persistent-id storage types


def canonical(module, attribute):
    """The name the unpickler imports: protocol 2 pickles use Python 2 names (__builtin__.dict)."""
    from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
    if (module, attribute) in NAME_MAPPING:
        module, attribute = NAME_MAPPING[(module, attribute)]
    elif module in IMPORT_MAPPING:
        module = IMPORT_MAPPING[module]
    return "%s.%s" % (module, attribute)


def allowed(name):
    module, _, attribute = name.rpartition(".")
    name = canonical(module, attribute)
    module, _, attribute = name.rpartition(".")
    if name in ALLOWED:
        return True
    return module == STORAGE_MODULE and attribute.endswith(STORAGE_SUFFIX) and attribute.isidentifier()


class _Global(object):
    def __init__(self, name):
        self.name = name


class _Result(object):
    """What a call left on the stack: calling it again would call whatever it returned."""

    def __init__(self, name):
        self.name = "<result of %s>" % name


_MARK = object()
_STRING_OPS = frozenset(["STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE",
                         "BINUNICODE", "BINUNICODE8"])
_CALL_OPS = {"REDUCE": 2, "NEWOBJ": 2, "NEWOBJ_EX": 3}  # callable sits this deep below the top


def _name(item):
    if isinstance(item, (_Global, _Result)):
        return item.name
    return "<%s>" % ("a string" if isinstance(item, str) else "a computed value")


def scan_pickle(data):
    """-> {"globals": [...], "calls": [...], "refused": [...]} for one pickle (bytes up to STOP).

    refused lists every name (or opcode) outside ALLOWED, in order of appearance.
    """
    stack, memo = [], {}
    globals_seen, calls, refused = {}, {}, {}  # dicts: ordered sets

    def note(kind, name):
        if not name.startswith("<"):
            module, _, attribute = name.rpartition(".")
            name = canonical(module, attribute)  # the name the unpickler would import
        (globals_seen if kind == "global" else calls)[name] = True
        if name not in refused and not allowed(name):
            refused[name] = True

    def pop_to_mark():
        while stack:
            if stack.pop() is _MARK:
                return

    for opcode, argument, _ in pickletools.genops(io.BytesIO(data)):
        name = opcode.name
        if name == "GLOBAL" or name == "INST":
            module, _, attribute = argument.partition(" ")
            target = "%s.%s" % (module, attribute)
            note("global", target)
            if name == "INST":
                note("call", target)
                pop_to_mark()
            stack.append(_Global(target) if name == "GLOBAL" else _Result(target))
        elif name == "STACK_GLOBAL":
            attribute = stack.pop() if stack else None
            module = stack.pop() if stack else None
            if isinstance(module, str) and isinstance(attribute, str):
                target = "%s.%s" % (module, attribute)
            else:
                target = "<STACK_GLOBAL of %s, %s>" % (_name(module), _name(attribute))
            note("global", target)
            stack.append(_Global(target))
        elif name in _STRING_OPS:
            stack.append(argument if isinstance(argument, str) else argument.decode("latin-1"))
        elif name in ("EXT1", "EXT2", "EXT4"):
            note("global", "<extension code %s>" % argument)
            stack.append(_Global("<extension code %s>" % argument))
        elif name in _CALL_OPS:
            depth = _CALL_OPS[name]
            target = stack[-depth] if len(stack) >= depth else None
            note("call", _name(target))
            del stack[-depth:]
            stack.append(_Result(_name(target)))
        elif name == "OBJ":
            items = []
            while stack and stack[-1] is not _MARK:
                items.insert(0, stack.pop())
            if stack:
                stack.pop()
            note("call", _name(items[0]) if items else "<OBJ without a class>")
            stack.append(_Result(_name(items[0]) if items else "?"))
        elif name == "BUILD":
            # BUILD sets state on the object below it; on a class or function (not an instance
            # made by an allowed call) it would change what later calls do.
            obj = stack[-2] if len(stack) >= 2 else None
            if stack:
                stack.pop()
            if not isinstance(obj, _Result):
                note("call", "<BUILD on %s>" % _name(obj))
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[argument] = stack[-1] if stack else None
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(argument))
        elif name == "MARK":
            stack.append(_MARK)
        elif name == "STOP":
            break
        else:
            before, after = opcode.stack_before, opcode.stack_after
            if pickletools.markobject in before:
                pop_to_mark()
                count = before.index(pickletools.markobject)
            else:
                count = len(before)
            del stack[len(stack) - min(count, len(stack)):]
            stack.extend([None] * len(after))
    return {"globals": list(globals_seen), "calls": list(calls), "refused": list(refused)}


def pickle_streams(path, limit=SCAN_LIMIT):
    """-> (format, [pickle bytes torch.load would unpickle]) without unpickling anything.

    The zip format (torch >= 1.6) unpickles exactly one member, <archive>/data.pkl. The legacy
    format is five pickles in a row (magic, protocol, sys info, the value, storage keys).
    """
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if len(set(names)) != len(names):
                raise ValueError("the zip lists a member twice (which one torch reads is unknown)")
            pickles = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise ValueError("the zip holds %d data.pkl members, not 1" % len(pickles))
            member = archive.getinfo(pickles[0])
            if member.file_size > limit:
                raise ValueError("data.pkl is larger than %d bytes" % limit)
            return "zip", [archive.read(member)]
    if info.st_size > limit:
        raise ValueError("larger than %d bytes and not the zip format" % limit)
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    streams, offset = [], 0
    for _ in range(5):
        stream = io.BytesIO(data[offset:])
        end = None
        for opcode, _, position in pickletools.genops(stream):
            if opcode.name == "STOP":
                end = position + 1
        if end is None:
            break
        streams.append(data[offset:offset + end])
        offset += end
    return "legacy", streams


def scan(path, limit=SCAN_LIMIT):
    """-> plain facts: {"safe": bool, "format", "globals", "calls", "refused", "error"}.

    safe is True only when every pickle torch.load would run was read to its end and names
    nothing outside ALLOWED. Nothing in the file is executed.
    """
    facts = {"safe": False, "format": None, "globals": [], "calls": [], "refused": [], "error": None}
    try:
        facts["format"], streams = pickle_streams(path, limit)
        if not streams:
            raise ValueError("no complete pickle found")
        for data in streams:
            found = scan_pickle(data)
            for key in ("globals", "calls", "refused"):
                facts[key] = list(dict.fromkeys(facts[key] + found[key]))
    except Exception as error:  # noqa: BLE001 - any malformed input: not proven safe
        facts["error"] = "%s: %s" % (type(error).__name__, str(error)[:300])
        return facts
    facts["safe"] = not facts["refused"]
    for key in ("globals", "calls", "refused"):  # a hostile file can name millions: keep the report bounded
        if len(facts[key]) > NAMES_SHOWN:
            facts[key + "_count"] = len(facts[key])
            facts[key] = facts[key][:NAMES_SHOWN]
    return facts


class Refused(Exception):
    """RestrictedUnpickler met a name outside ALLOWED."""


def restricted_pickle_module():
    """A pickle module for torch.load(pickle_module=...) whose Unpickler admits only ALLOWED names.

    The pure-Python unpickler, so BUILD can be checked too: it may only set state on instances.
    """
    import pickle
    import types

    class RestrictedUnpickler(pickle._Unpickler):
        dispatch = dict(pickle._Unpickler.dispatch)

        def find_class(self, module, name):
            full = "%s.%s" % (module, name)
            if not allowed(full):
                raise Refused("refused to load %s: not a type a partition file holds" % full)
            return pickle._Unpickler.find_class(self, module, name)

        def load_build(self):
            target = self.stack[-2] if len(self.stack) >= 2 else None
            if isinstance(target, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
                raise Refused("refused BUILD on %r: state may only be set on instances" % (target,))
            pickle._Unpickler.load_build(self)
        dispatch[pickle.BUILD[0]] = load_build

    def load(file, **kwargs):
        return RestrictedUnpickler(file, **kwargs).load()

    return types.SimpleNamespace(Unpickler=RestrictedUnpickler, load=load, __name__="restricted_pickle",
                                 UnpicklingError=pickle.UnpicklingError)


def rewrite_as_dict(paths):
    """Rewrite each torch.save file holding a defaultdict as a plain dict (weights_only loads those).

    Each file is scanned first and loaded only through the restricted unpickler; a file naming
    anything else is left untouched and reported. -> exit code (0 all rewritten, 1 otherwise).
    """
    import sys
    import torch
    status = 0
    for path in paths:
        facts = scan(path)
        if not facts["safe"]:
            sys.stderr.write("%s: not rewritten: %s\n" % (path, facts["error"] or "it names %s"
                                                         % ", ".join(facts["refused"][:5])))
            status = 1
            continue
        value = torch.load(path, weights_only=False, pickle_module=restricted_pickle_module())
        torch.save(dict(value) if isinstance(value, dict) else value, path)
        sys.stderr.write("%s: rewritten\n" % path)
    return status
