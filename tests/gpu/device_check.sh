#!/usr/bin/env bash
# One short check of the skill's GPU path on a lent GPU machine (one run, a few minutes).
#
#   OUT=/some/empty/dir bash tests/gpu/device_check.sh
#
# Uses the python on PATH (or DEVICE_CHECK_PYTHON) with the image's torch and PyG;
# installs nothing, writes only under $OUT:
#   1. the checker with the real driver: its NVML facts against nvidia-smi --query-gpu;
#   2. proof the checker created no CUDA context: its PIDs never appear in
#      nvidia-smi --query-compute-apps, polled while it runs;
#   3. the checker's cuda.available / device_count / NCCL against torch's own answers
#      (asked after the checker finished, in a process that does create a context);
#   4. an nccl all_reduce on one GPU, and the DDP recipe on one GPU with nccl;
#   5. a NeighborLoader batch moved to the GPU (without pyg-lib or torch-sparse
#      NeighborLoader cannot sample: detected and said so).
# $OUT/summary.json holds every check's verdict.
# Exit: 0 every check passed (a check that cannot run here says why), 1 a check failed,
#       77 no nvidia-smi on PATH: not a GPU machine, nothing was checked (dry mode).
set -u
OUT=${OUT:?set OUT to the folder for the results}
PYTHON=${DEVICE_CHECK_PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "device_check: no nvidia-smi on PATH: not a GPU machine; dry mode, nothing checked"
    printf '{"mode": "dry", "gpu": false, "reason": "no nvidia-smi on PATH", "checks": {}}\n' > "$OUT/summary.json"
    exit 77
fi

step() { echo "device_check: $*"; }
LIMIT="timeout 300"
command -v timeout >/dev/null 2>&1 || LIMIT=""

step "nvidia-smi"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,compute_cap,memory.total,driver_version --format=csv,noheader \
    > "$OUT/nvidia-smi-gpus.csv" 2> "$OUT/nvidia-smi-gpus.err"

step "checker, polling nvidia-smi --query-compute-apps while it runs"
: > "$OUT/compute-apps.log"
: > "$OUT/checker-pids.log"
"$PYTHON" "$ROOT/scripts/check_sampling_backends.py" --pretty --require-cuda \
    > "$OUT/checker.json" 2> "$OUT/checker.stderr" &
CHECKER_PID=$!
POLLS=0
while kill -0 "$CHECKER_PID" 2>/dev/null; do
    # The checker and its probe child (its only process; a new session, same parent).
    { echo "$CHECKER_PID"; cat /proc/"$CHECKER_PID"/task/*/children 2>/dev/null | tr ' ' '\n'; } \
        >> "$OUT/checker-pids.log"
    nvidia-smi --query-compute-apps=pid --format=csv,noheader >> "$OUT/compute-apps.log" 2>&1
    POLLS=$((POLLS + 1))
    sleep 0.05
done
wait "$CHECKER_PID"
echo "$?" > "$OUT/checker.rc"
echo "$POLLS" > "$OUT/polls"

step "torch's own answers (this process creates a CUDA context)"
$LIMIT "$PYTHON" - > "$OUT/torch-truth.json" 2> "$OUT/torch-truth.stderr" <<'PY'
import json, torch
truth = {"version": torch.__version__, "cuda": torch.version.cuda, "available": torch.cuda.is_available()}
if truth["available"]:
    truth["device_count"] = torch.cuda.device_count()
    truth["devices"] = [{"name": torch.cuda.get_device_name(i),
                         "capability": "%d.%d" % torch.cuda.get_device_capability(i)}
                        for i in range(truth["device_count"])]
    truth["nccl_version"] = list(torch.cuda.nccl.version())
    try:
        truth["kernel"] = float((torch.ones(4, device="cuda") * 2).sum().item())
    except Exception as error:  # e.g. no kernel image for this GPU
        truth["kernel_error"] = "%s: %s" % (type(error).__name__, error)
else:
    truth["device_count"] = 0
print(json.dumps(truth))
PY

step "nccl all_reduce on one GPU"
$LIMIT "$PYTHON" - > "$OUT/nccl.json" 2> "$OUT/nccl.stderr" <<'PY'
import json, socket, torch, torch.distributed as dist
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1,
                        device_id=torch.device("cuda", 0))
value = torch.full((4,), 3.0, device="cuda")
dist.all_reduce(value)
print(json.dumps({"ok": value.tolist() == [3.0] * 4, "backend": dist.get_backend()}))
dist.destroy_process_group()
PY

step "DDP recipe, one GPU, nccl"
$LIMIT "$PYTHON" "$ROOT/scripts/ddp_neighbor_training.py" --nprocs 1 --backend nccl --epochs 1 \
    --num-nodes 500 > "$OUT/ddp.json" 2> "$OUT/ddp.stderr"
echo "$?" > "$OUT/ddp.rc"

step "NeighborLoader batch to the GPU"
$LIMIT "$PYTHON" - > "$OUT/neighbor-loader.json" 2> "$OUT/neighbor-loader.stderr" <<'PY'
import json, torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
import torch_geometric.typing as T
edge_index = torch.tensor([[1, 4, 0, 2, 3, 0, 5, 4], [0, 0, 1, 1, 1, 2, 2, 3]])
data = Data(x=torch.randn(6, 4), edge_index=edge_index)
result = {"WITH_PYG_LIB": T.WITH_PYG_LIB, "WITH_TORCH_SPARSE": T.WITH_TORCH_SPARSE}
try:
    batch = next(iter(NeighborLoader(data, num_neighbors=[2], batch_size=2))).to("cuda")
    result.update(sampled=True, device=str(batch.x.device), nodes=batch.num_nodes)
except ImportError as error:  # no pyg-lib/torch-sparse: NeighborLoader cannot sample
    result.update(sampled=False, error=str(error))
    whole = data.to("cuda")  # the GPU side still works: a full-graph batch there
    result.update(device=str(whole.x.device), nodes=whole.num_nodes)
print(json.dumps(result))
PY

step "verdicts"
OUT="$OUT" "$PYTHON" - <<'PY'
import csv, json, os
out = os.environ["OUT"]


def load(name):
    try:
        with open(os.path.join(out, name)) as handle:
            return json.loads(handle.read() or "null")
    except (OSError, ValueError) as error:
        return {"unreadable": str(error)}


def stderr_tail(name):
    try:
        with open(os.path.join(out, name + ".stderr"), errors="replace") as handle:
            return handle.read()[-600:] or None
    except OSError:
        return None


checks = {}
checker = load("checker.json") or {}
nvml = ((checker.get("cuda") or {}).get("nvml")) or {}
with open(os.path.join(out, "nvidia-smi-gpus.csv")) as handle:
    smi = [[field.strip() for field in row] for row in csv.reader(handle) if row]
ours = [[d.get("name"), d.get("uuid"), d.get("capability"), "%d MiB" % (d.get("memory_total_bytes", 0) // 2 ** 20),
         nvml.get("driver_version")] for d in nvml.get("devices") or []]
checks["nvml_vs_nvidia_smi"] = {"passed": ours == smi, "checker": ours, "nvidia_smi": smi}

with open(os.path.join(out, "compute-apps.log")) as handle:
    apps = set(line.strip() for line in handle if line.strip().isdigit())
with open(os.path.join(out, "checker-pids.log")) as handle:
    pids = set(line.strip() for line in handle if line.strip().isdigit())
polls = int(open(os.path.join(out, "polls")).read())
checks["no_cuda_context"] = {"passed": polls > 0 and not (apps & pids), "polls": polls,
                             "checker_pids": sorted(pids), "compute_app_pids_seen": sorted(apps),
                             "context_created_reported": (checker.get("cuda") or {}).get("context_created")}

truth = load("torch-truth.json") or {}
if "available" not in truth:
    truth["stderr_tail"] = stderr_tail("torch-truth")
cuda = checker.get("cuda") or {}
usable = truth.get("available") and "kernel_error" not in truth
checks["checker_vs_torch"] = {
    "passed": cuda.get("available") == bool(usable) and cuda.get("device_count") == truth.get("device_count")
    and (not usable or cuda.get("nccl_version") == truth.get("nccl_version")),
    "checker": {k: cuda.get(k) for k in ("available", "device_count", "blocked_by", "nccl_version")},
    "torch": truth, "checker_exit_code": int(open(os.path.join(out, "checker.rc")).read())}

nccl = load("nccl.json") or {}
checks["nccl_all_reduce"] = {"passed": nccl.get("ok") is True, "result": nccl,
                             "stderr_tail": None if nccl.get("ok") else stderr_tail("nccl")}

ddp = load("ddp.json") or {}
no_backend = any(f.get("id") == "neighbor-sampling-unavailable" for f in ddp.get("findings") or [])
checks["ddp_recipe_nccl"] = {"passed": ddp.get("ok") is True or no_backend, "ran": ddp.get("ok") is True,
                             "backend": ddp.get("backend"), "epochs": ddp.get("epochs"),
                             "error": ddp.get("error"), "exit_code": int(open(os.path.join(out, "ddp.rc")).read()),
                             "stderr_tail": None if ddp.get("ok") else stderr_tail("ddp"),
                             "note": "no pyg-lib or torch-sparse in this image: the recipe cannot sample "
                                     "(it says neighbor-sampling-unavailable)" if no_backend else None}

loader = load("neighbor-loader.json") or {}
checks["neighbor_loader_to_gpu"] = {"passed": str(loader.get("device", "")).startswith("cuda"),
                                    "sampled": loader.get("sampled"), "result": loader,
                                    "note": "NeighborLoader cannot sample without pyg-lib or torch-sparse; "
                                            "a full-graph Data was moved to the GPU instead"
                                    if loader.get("sampled") is False else None,
                                    "stderr_tail": None if loader.get("device") else stderr_tail("neighbor-loader")}
summary = {"mode": "gpu", "gpu": True, "passed": all(c["passed"] for c in checks.values()), "checks": checks}
with open(os.path.join(out, "summary.json"), "w") as handle:
    json.dump(summary, handle, indent=2)
for name, check in checks.items():
    print("device_check: %-24s %s" % (name, "passed" if check["passed"] else "FAILED"))
raise SystemExit(0 if summary["passed"] else 1)
PY
