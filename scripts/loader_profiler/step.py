"""The training step run on each batch, in a rank process: the user's own (--step), a built-in
forward/backward/optimizer step on the user's model (--model), or a stand-in sized like it
(--stand-in). User code runs here, never in the tool's process."""

from .graph import InputProblem, import_reference, short_error


def build_step(loop, batch):
    """-> a callable(batch) for one training step, or None to time the loader alone. `batch` is a
    first batch of the user's loader: the built-in step takes its sizes from it."""
    kind = loop["kind"]
    if kind == "loader-only":
        return None
    if kind == "step":
        target = user_callable(loop["reference"])
        if not callable(target):
            raise InputProblem("loader-step-failed", {"step": loop["reference"],
                                                      "error": "%s is not callable" % type(target).__name__})
        return target
    in_channels, classes = sizes(batch, loop)
    if kind == "model":
        factory = user_callable(loop["reference"])
        try:
            model = factory() if callable(factory) else factory
        except Exception as error:  # noqa: BLE001 - the user's factory
            raise InputProblem("loader-step-failed", {"model": loop["reference"], "error": short_error(error)})
        import torch
        if not isinstance(model, torch.nn.Module):
            raise InputProblem("loader-step-failed", {"model": loop["reference"], "error": "returned a %s, not a "
                                                      "torch.nn.Module" % type(model).__name__})
    else:
        model = stand_in_model(loop["conv"], loop["layers"], loop["hidden"], in_channels, classes)
    return builtin_step(model)


def user_callable(reference):
    try:
        return import_reference(reference)
    except Exception as error:  # noqa: BLE001 - the user's module
        raise InputProblem("loader-step-failed", {"step": reference, "error": short_error(error)})


def sizes(batch, loop):
    """(input features, output width) of the built-in step, from a batch of the user's loader."""
    import torch
    from torch_geometric.data import HeteroData
    what = loop.get("reference") or "the stand-in"
    if isinstance(batch, HeteroData):
        raise InputProblem("loader-step-failed", {"step": what, "error": "a heterogeneous batch: the built-in step "
                                                  "takes model(x, edge_index); give --step MODULE:CALLABLE"})
    x = getattr(batch, "x", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise InputProblem("loader-step-failed", {"step": what, "error": "the batch has no 2-d node features x; "
                                                  "give --step MODULE:CALLABLE"})
    y = getattr(batch, "y", None)
    classes = 10
    if isinstance(y, torch.Tensor) and y.dim() == 1 and not y.is_floating_point() and y.numel():
        classes = max(int(y.max()) + 1, 2)
    return x.size(-1), classes


def stand_in_model(conv, layers, hidden, in_channels, out_channels):
    import torch
    from torch_geometric import nn as pyg_nn

    def layer(inputs, outputs):
        if conv == "gcn":
            return pyg_nn.GCNConv(inputs, outputs)
        if conv == "gat":
            return pyg_nn.GATConv(inputs, outputs, heads=1)
        if conv == "gin":
            return pyg_nn.GINConv(torch.nn.Sequential(torch.nn.Linear(inputs, outputs), torch.nn.ReLU(),
                                                      torch.nn.Linear(outputs, outputs)))
        return pyg_nn.SAGEConv(inputs, outputs)

    widths = [in_channels] + [hidden] * (layers - 1) + [out_channels]

    class StandIn(torch.nn.Module):
        def __init__(self):
            torch.nn.Module.__init__(self)
            self.convs = torch.nn.ModuleList(layer(a, b) for a, b in zip(widths[:-1], widths[1:]))

        def forward(self, x, edge_index):
            for index, module in enumerate(self.convs):
                x = module(x, edge_index)
                if index < len(self.convs) - 1:
                    x = x.relu()
            return x
    return StandIn()


def builtin_step(model):
    """Forward on the batch, cross-entropy on its seeds (a squared mean where there are no labels),
    backward and an Adam step: what a node-classification loop does per batch."""
    import torch
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()

    def step(batch):
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)
        seeds = getattr(batch, "batch_size", None) or out.size(0)
        out = out[:seeds]
        y = getattr(batch, "y", None)
        if (isinstance(y, torch.Tensor) and y.dim() == 1 and not y.is_floating_point() and y.numel() >= seeds
                and out.dim() == 2 and int(y[:seeds].max()) < out.size(-1)):
            loss = torch.nn.functional.cross_entropy(out, y[:seeds])
        else:
            loss = out.float().pow(2).mean()
        loss.backward()
        optimizer.step()
    return step
