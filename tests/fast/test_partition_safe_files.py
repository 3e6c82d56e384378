"""How the partition checker reads files it does not trust, in process and without torch: META.json through
safe_json (bounded size and nesting, no FIFO opened, strict constants), pickles through safe_pickle's scan
(what unpickling would import and call, found by walking the opcodes, nothing executed) and its restricted
unpickler (every name outside a partition file's types refused before anything is called)."""

import collections
import io
import os
import pickle
import zipfile

import pytest

from diagnostics_core import safe_json, safe_pickle


@pytest.mark.parametrize("text, expected", [
    ('{"num_parts": 2, "node_types": null}', {"num_parts": 2, "node_types": None}),
    ('{"name": "[[[[[[[[[[[[[[[["}', {"name": "[[[[[[[[[[[[[[[["}),  # brackets in a string are not nesting
    ('[[[[1]]]]', [[[[1]]]]),
])
def test_meta_json_that_is_plain_json_loads(text, expected):
    assert safe_json.loads(text.encode(), max_depth=4) == expected


@pytest.mark.parametrize("data, reason", [
    (b"[" * 100000 + b"]" * 100000, "nested 100000 levels deep"),
    (b'{"num_parts": NaN}', "non-standard constant NaN"),
    (b'{"num_parts": Infinity}', "non-standard constant Infinity"),
    (b'{"num_parts": 2', "not JSON"),
    (b'{"name": "\xff"}', "not UTF-8 (byte 10)"),
])
def test_meta_json_past_its_bounds_is_refused_with_a_reason(data, reason):
    with pytest.raises(safe_json.Refused) as refused:
        safe_json.loads(data)
    assert reason in str(refused.value)


def test_a_fifo_is_refused_unopened_and_a_large_file_by_its_size(tmp_path):
    os.mkfifo(str(tmp_path / "META.json"))  # opening it for reading would block until a writer comes
    with pytest.raises(safe_json.Refused, match="not a regular file"):
        safe_json.load_file(str(tmp_path / "META.json"))
    (tmp_path / "big.json").write_text("[" + "0," * 100 + "0]")
    with pytest.raises(safe_json.TooLarge):
        safe_json.load_file(str(tmp_path / "big.json"), max_bytes=100)
    with pytest.raises(safe_json.Refused, match="cannot open"):
        safe_json.load_file(str(tmp_path / "missing.json"))


class Payload(object):
    """Unpickling it would call os.system: only ever scanned here, never loaded by a normal unpickler."""

    def __reduce__(self):
        return (os.system, (":>marker",))


class Setter(object):
    def __reduce__(self):
        return (collections.OrderedDict, (), {"state": 1})


PAYLOAD_NAME = "%s.system" % os.system.__module__


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("value, refused", [
    ({"feats": {"x": [1.0, 2.0]}, "global_id": (1, 2)}, []),
    (collections.defaultdict(list, {"a": [1]}), []),
    (frozenset([1, 2]), []),
    ({"graph": Payload()}, [PAYLOAD_NAME]),
    ([1, {"deep": [Payload()]}], [PAYLOAD_NAME]),
])
def test_the_scan_names_what_unpickling_would_call(value, refused, protocol):
    found = safe_pickle.scan_pickle(pickle.dumps(value, protocol=protocol))
    assert found["refused"] == refused
    if refused:
        assert PAYLOAD_NAME in found["calls"]


def hand_made(*parts):
    """A protocol-4 pickle from raw opcodes."""
    return b"\x80\x04" + b"".join(parts) + b"."


@pytest.mark.parametrize("data, refused", [
    # STACK_GLOBAL whose module and name are computed, not literal strings
    (hand_made(b"N", b"N", b"\x93", b")", b"R"), ["<STACK_GLOBAL of <a computed value>, <a computed value>>"]),
    # an extension code: whatever copyreg registered
    (hand_made(b"\x82\x07", b")", b"R"), ["<extension code 7>"]),
    # BUILD on a class named by GLOBAL: would change the class itself
    (hand_made(b"cbuiltins\ndict\n", b"}", b"b"), ["<BUILD on builtins.dict>"]),
    # a Python 2 name that maps onto os.system
    (b"cposix\nsystem\n(S':>marker'\ntR.", [PAYLOAD_NAME]),
])
def test_hand_made_opcodes_that_reach_code_are_refused(data, refused):
    assert safe_pickle.scan_pickle(data)["refused"] == refused


def torch_like_file(path, data, members=("archive/data.pkl",)):
    """The layout of torch.save's zip format: the value's pickle as <archive>/data.pkl."""
    with zipfile.ZipFile(str(path), "w") as archive:
        for name in members:
            archive.writestr(name, data)
    return str(path)


def test_a_zip_file_is_scanned_in_its_data_pkl_only(tmp_path):
    safe = safe_pickle.scan(torch_like_file(tmp_path / "safe.pt", pickle.dumps({"x": [1]}, protocol=2)))
    assert safe["safe"] is True and safe["format"] == "zip"
    hostile = safe_pickle.scan(torch_like_file(tmp_path / "hostile.pt", pickle.dumps(Payload(), protocol=2)))
    assert hostile["safe"] is False and hostile["refused"] == [PAYLOAD_NAME]
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("members, error", [
    (("a/data.pkl", "b/data.pkl"), "holds 2 data.pkl members"),
    (("a/other.pkl",), "holds 0 data.pkl members"),
])
def test_a_zip_torch_would_not_read_as_one_value_is_not_proven_safe(tmp_path, members, error):
    found = safe_pickle.scan(torch_like_file(tmp_path / "odd.pt", pickle.dumps({}), members))
    assert found["safe"] is False and error in found["error"]


def test_a_legacy_file_is_scanned_in_every_pickle_torch_would_read(tmp_path):
    path = tmp_path / "legacy.pt"
    path.write_bytes(b"".join(pickle.dumps(value, protocol=2) for value in (1, 1001, {"sys": 1}, Payload(), [])))
    found = safe_pickle.scan(str(path))
    assert found["format"] == "legacy" and found["refused"] == [PAYLOAD_NAME]


def test_names_past_the_shown_limit_are_counted(tmp_path):
    names = "".join("cmod%d\nf\n" % n for n in range(100))
    path = tmp_path / "many.pt"
    path.write_bytes(names.encode() + b"N." + b"N." * 4)  # the legacy format's five pickles, the first naming all
    found = safe_pickle.scan(str(path))
    assert found["refused_count"] == 100 and len(found["refused"]) == safe_pickle.NAMES_SHOWN


def test_the_restricted_unpickler_loads_containers_and_refuses_code_before_calling_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = safe_pickle.restricted_pickle_module()
    value = {"feats": collections.defaultdict(list, {"x": [1]}), "ids": (1, 2)}
    assert module.load(io.BytesIO(pickle.dumps(value))) == value
    with pytest.raises(safe_pickle.Refused, match=PAYLOAD_NAME):
        module.load(io.BytesIO(pickle.dumps(Payload())))
    with pytest.raises(safe_pickle.Refused, match="BUILD"):
        module.load(io.BytesIO(hand_made(b"cbuiltins\ndict\n", b"}", b"b")))
    assert not (tmp_path / "marker").exists()
