"""Each version and date is stated in one file (issue 33, item 3).

A fact written twice goes stale in one place first. So a version of a named package ("pyg-lib 0.8.0",
"PyG 2.8.1", "torch 2.13") or a date ("2026-07-21") appears in the prose (inline code included, fenced
code not) of one file among SKILL.md and the references; the others link to it. Within one file a
fact may recur (one section cites another). Wheel facts are printed by
`check_sampling_backends.py --wheels`, not restated.
"""

import collections
import re

from support.docs_text import DOCS, prose, relative

PACKAGES = (r"PyTorch|torch_geometric|torch-sparse|torch_sparse|torch-scatter|torch_scatter|torch-cluster|"
            r"pyg-lib|pyg_lib|torch|PyG|CUDA|cuDNN|NCCL|CPython|Python|glibc|cuGraph-PyG|cugraph-pyg|cuGraph|"
            r"GraphLearn-for-PyTorch|Kuzu|kuzu|WholeGraph|slurm-wlm|Slurm|SLURM|NumPy|numpy|Redis|redis")
VERSION = re.compile(r"(?<![\w/.-])(%s)(?:\s*(?:==|>=|<=|<|>|~=)\s*|\s+v?)(\d+\.\d+(?:\.(?:\d+|x))?)(?![\w.])" % PACKAGES)
DATE = re.compile(r"(?<![\w-])(20\d\d-[01]\d(?:-[0-3]\d)?)(?![\w-])")
ALIASES = {"pytorch": "torch", "torch_geometric": "pyg", "cpython": "python", "slurm-wlm": "slurm",
           "cugraph-pyg": "cugraph-pyg"}


def statements(text):
    """(fact key, matched text) for every version or date statement in `text`."""
    found = []
    for match in VERSION.finditer(text):
        name = match.group(1).lower().replace("_", "-")
        found.append(((ALIASES.get(name, name), match.group(2)), match.group(0)))
    found += [(("date", match.group(1)), match.group(0)) for match in DATE.finditer(text)]
    return found


def files_by_fact():
    where = collections.defaultdict(set)
    for path in DOCS:
        for key, _ in statements(prose(path)):
            where[key].add(relative(path))
    return where


def test_the_scanner_finds_versions_and_dates_and_ignores_lookalikes():
    keys = [key for key, _ in statements(
        "pyg-lib 0.8.0 (2026-07-21) needs torch>=2.13 and PyTorch 2.13; PyG 2.8.1, `torch_sparse==0.6.18`. "
        "Not: /opt/cuda-12.4, section 2.13, torch.cuda 12, v2026-13-40, CUDA_12.1")]
    assert keys == [("pyg-lib", "0.8.0"), ("torch", "2.13"), ("torch", "2.13"), ("pyg", "2.8.1"),
                    ("torch-sparse", "0.6.18"), ("date", "2026-07-21")], keys


def test_no_version_or_date_is_stated_in_more_than_one_file():
    repeated = {"%s %s" % key: sorted(files) for key, files in files_by_fact().items() if len(files) > 1}
    assert not repeated, ("state each once and link to it: %s" % repeated)
