"""The memory claims the references make beside the planner, measured on CPU as the docs state them: which
convs gather the input width per edge, and what autocast does (and does not) halve in the first layer."""


NODES, EDGES, IN, OUT = 1000, 200000, 64, 16


def gathered_bytes(conv, autocast=False):
    """Bytes allocated by aten::index_select (the per-edge gather) in one forward."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    x = torch.randn(NODES, IN)
    edge_index = torch.randint(0, NODES, (2, EDGES))
    conv(x, edge_index)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                conv(x, edge_index)
        else:
            conv(x, edge_index)
    return sum(e.cpu_memory_usage for e in prof.events() if e.name == "aten::index_select" and e.cpu_memory_usage > 0)


def test_sage_gathers_the_input_width_and_gcn_the_output_width():
    from torch_geometric.nn import GCNConv, SAGEConv
    assert gathered_bytes(SAGEConv(IN, OUT)) == EDGES * IN * 4  # 51.2 MB: E * F_in * 4
    # GCNConv transforms first, then gathers F_out per edge, the self-loops it adds included: 12.85 MB, not 51.2 MB
    assert EDGES * OUT * 4 < gathered_bytes(GCNConv(IN, OUT)) <= (EDGES + NODES) * OUT * 4


def test_autocast_does_not_halve_the_first_layers_gather_of_float32_x():
    from torch_geometric.nn import GCNConv, SAGEConv
    assert gathered_bytes(SAGEConv(IN, OUT), autocast=True) == EDGES * IN * 4  # still float32 x rows
    halved = gathered_bytes(GCNConv(IN, OUT), autocast=True)  # the bf16 product of x @ W is gathered
    assert EDGES * OUT * 2 < halved <= (EDGES + NODES) * OUT * 2


def test_attention_convs_gather_per_head_products_and_their_weights():
    """The messages row for GATConv and TransformerConv: per edge (GAT: per edge after its self-loops), one
    heads * F_out product gather (Transformer: three, query, key and value) plus attention-weight gathers of
    heads floats each (GAT: four, Transformer: two)."""
    import torch
    from torch_geometric.nn import GATConv, TransformerConv
    heads = 4
    torch.manual_seed(0)  # the graph gathered_bytes builds
    torch.randn(NODES, IN)
    edge_index = torch.randint(0, NODES, (2, EDGES))
    with_self_loops = int((edge_index[0] != edge_index[1]).sum()) + NODES  # GATConv replaces self-loops
    assert gathered_bytes(GATConv(IN, OUT, heads=heads)) == with_self_loops * heads * (OUT + 4) * 4
    assert gathered_bytes(TransformerConv(IN, OUT, heads=heads)) == EDGES * heads * (3 * OUT + 2) * 4
