"""A --coefficients file is checked key by key before the model reads it: not JSON, a key missing, a value of the
wrong type, NaN or Infinity, a number out of range. Each is a usage error naming the file and the key, with a fix
that measures the coefficients instead. In process, on edited copies of the committed file."""

import copy
import json

import pytest

from capacity_planner import coefficients
from diagnostics_core.cli import UsageError

COMMITTED = coefficients.load_committed()
RERUN = ["--nodes", "10", "--edges", "10", "--calibrate"]


def write(tmp_path, text):
    path = tmp_path / "coefficients.json"
    path.write_text(text)
    return str(path)


def edited(path, value):
    document = copy.deepcopy(COMMITTED)
    target = document
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


def refused(path):
    with pytest.raises(UsageError) as caught:
        coefficients.read_file(path, RERUN)
    error = caught.value
    assert error.finding_id == "plan-coefficients-invalid" and error.evidence["file"] == path
    assert path in error.line and "\n" not in error.line and "--calibrate" in error.fix
    return error


def test_the_committed_coefficients_pass_the_check(tmp_path):
    assert coefficients.read_file(write(tmp_path, json.dumps(COMMITTED)), RERUN) == COMMITTED


@pytest.mark.finding("plan-coefficients-invalid")
@pytest.mark.parametrize("path, value, key", [
    (("provenance",), KeyError, "provenance"),
    (("provenance",), 3, "provenance"),
    (("provenance", "torch"), None, "provenance.torch"),
    (("provenance", "how"), KeyError, "provenance.how"),
    (("process_base_bytes",), "big", "process_base_bytes"),
    (("process_base_bytes",), -1, "process_base_bytes"),
    (("process_base_bytes",), True, "process_base_bytes"),
    (("process_base_bytes",), 10 ** 30, "process_base_bytes"),
    (("loader",), [], "loader"),
    (("loader", "sorted_peak_bytes"), KeyError, "loader.sorted_peak_bytes"),
    (("loader", "private_shm_bytes", "per_edge"), "16", "loader.private_shm_bytes.per_edge"),
    (("loader", "private_shm_bytes", "per_node"), KeyError, "loader.private_shm_bytes.per_node"),
    (("loader", "private_peak_bytes", "per_edge"), float("nan"), "loader.private_peak_bytes.per_edge"),
    (("loader", "private_peak_bytes", "per_edge"), float("inf"), "loader.private_peak_bytes.per_edge"),
    (("loader", "private_peak_bytes", "per_edge"), -float("inf"), "loader.private_peak_bytes.per_edge"),
    (("loader", "private_peak_bytes", "per_edge"), 1e12, "loader.private_peak_bytes.per_edge"),
    (("preprocess", "sort"), 40, "preprocess.sort"),
    (("preprocess", "to_undirected"), KeyError, "preprocess.to_undirected"),
    (("conv", "gat"), KeyError, "conv.gat"),
    (("conv", "gat", "saved_per_channel", "per_edge"), float("nan"), "conv.gat.saved_per_channel.per_edge"),
    (("conv", "gin", "gathered_per_channel"), None, "conv.gin.gathered_per_channel"),
    (("processes",), KeyError, "processes"),  # a --calibrate file from before the launch shapes: measure again
    (("processes", "rank_anon_bytes"), KeyError, "processes.rank_anon_bytes"),
    (("processes", "spawn_worker_extra_anon_bytes"), -1, "processes.spawn_worker_extra_anon_bytes"),
    (("processes", "library_file_bytes"), "135MB", "processes.library_file_bytes"),
    (("processes", "main_batch_heap_batches"), 1e6, "processes.main_batch_heap_batches"),
    (("processes", "provenance", "date"), 20261205, "processes.provenance.date"),
])
def test_a_broken_key_is_named(path, value, key, tmp_path):
    text = json.dumps(edited(path, value))  # NaN and Infinity as Python writes them
    error = refused(write(tmp_path, text))
    assert error.evidence["key"] == key and key in error.line


@pytest.mark.parametrize("text, why", [
    ("not json\n", "not JSON"),
    ("", "not JSON"),
    ("[1, 2, 3]", "expected an object"),
    ('{"provenance": {"torch": "2.13"', "not JSON"),
    ("\xff\xfe{}", "not UTF-8"),
    ("[" * 100 + "]" * 100, "levels deep"),
    ('{"process_base_bytes": 1e400}', "provenance"),  # parsed as inf: the first missing key is named first
])
def test_a_file_that_is_no_coefficients_document_says_why(text, why, tmp_path):
    path = tmp_path / "coefficients.json"
    path.write_bytes(text.encode("latin-1"))
    error = refused(str(path))
    assert why in error.line, error.line


def test_infinity_written_as_a_huge_literal_is_named(tmp_path):
    text = json.dumps(COMMITTED).replace('"process_base_bytes": %d' % COMMITTED["process_base_bytes"],
                                         '"process_base_bytes": 1e400')
    error = refused(write(tmp_path, text))
    assert error.evidence["key"] == "process_base_bytes" and "finite" in error.evidence["error"]


@pytest.mark.parametrize("make", ["missing", "folder", "fifo"])
def test_a_path_that_is_no_regular_file_is_refused_without_blocking(make, tmp_path):
    import os
    path = tmp_path / "coefficients.json"
    if make == "folder":
        path.mkdir()
    elif make == "fifo":
        os.mkfifo(str(path))
    error = refused(str(path))
    assert error.evidence["key"] is None


@pytest.mark.parametrize("installed, recorded, mismatch", [
    ({"torch": "2.13.0", "torch_geometric": "2.8.1"}, {"torch": "2.13.0+cpu", "torch_geometric": "2.8.1"}, False),
    ({"torch": "2.13.0", "torch_geometric": "2.8.1"}, {"torch": "2.13.0+cpu", "torch_geometric": "2.5.0"}, True),
    ({"torch": None, "torch_geometric": None}, {"torch": "2.13.0+cpu", "torch_geometric": "2.5.0"}, False),
])
def test_other_versions_are_told_apart_from_another_build_of_the_same(installed, recorded, mismatch, monkeypatch):
    monkeypatch.setattr(coefficients, "installed_versions", lambda: installed)
    document = copy.deepcopy(COMMITTED)
    document["provenance"].update(recorded)
    chosen, used = coefficients.given("c.json", document)
    assert used["version_mismatch"] is mismatch and used["used"] == "file"
    assert chosen["provenance_label"].startswith("file on torch %s" % recorded["torch"])
