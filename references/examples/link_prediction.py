"""Link prediction end to end: a split without leakage, labels that stay {0, 1}, fresh negatives.

The safe setup: RandomLinkSplit(disjoint_train_ratio=0.3, add_negative_train_samples=False), binary
negative sampling in the training LinkNeighborLoader (new negatives every epoch), and evaluation
loaders without it (the validation and test splits hold fixed negatives, label 0, and positives,
label 1). Then triplet sampling for ranking losses. Without pyg-lib or torch-sparse the loaders fail
at their first batch; the script records that error instead of training.

    python link_prediction.py      # prints one JSON line
"""
import json

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader
from torch_geometric.nn import GraphSAGE
from torch_geometric.sampler import NegativeSampling


def split(num_nodes=300, num_edges=2000):
    data = T.ToUndirected()(Data(x=torch.randn(num_nodes, 16),
                                 edge_index=torch.randint(0, num_nodes, (2, num_edges))))
    return T.RandomLinkSplit(num_val=0.1, num_test=0.1, is_undirected=True,
                             disjoint_train_ratio=0.3, add_negative_train_samples=False)(data)


def scores(model, batch):
    z = model(batch.x, batch.edge_index)
    src, dst = batch.edge_label_index
    return (z[src] * z[dst]).sum(dim=-1)


def train_and_evaluate(train_data, val_data):
    train_loader = LinkNeighborLoader(
        train_data, num_neighbors=[10, 5], batch_size=64, shuffle=True,
        edge_label_index=train_data.edge_label_index, edge_label=train_data.edge_label,
        neg_sampling='binary')  # one fresh negative per positive, every epoch
    val_loader = LinkNeighborLoader(
        val_data, num_neighbors=[10, 5], batch_size=256,
        edge_label_index=val_data.edge_label_index, edge_label=val_data.edge_label)
    model = GraphSAGE(in_channels=16, hidden_channels=32, num_layers=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    labels = set()
    for batch in train_loader:
        assert set(batch.edge_label.unique().tolist()) <= {0.0, 1.0}  # not {0, 1, 2}
        labels.update(batch.edge_label.unique().tolist())
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(scores(model, batch), batch.edge_label)
        loss.backward()
        optimizer.step()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in val_loader:
            correct += int(((scores(model, batch) > 0).float() == batch.edge_label).sum())
            total += batch.edge_label.numel()
    # Triplet sampling: no edge_label; the batch carries src/dst_pos/dst_neg indices.
    triplets = LinkNeighborLoader(train_data, num_neighbors=[10, 5], batch_size=64,
                                  edge_label_index=train_data.edge_label_index,
                                  neg_sampling=NegativeSampling('triplet', amount=2))
    batch = next(iter(triplets))
    assert batch.dst_neg_index.shape == (batch.src_index.numel(), 2)
    return {'train_labels': sorted(labels), 'val_accuracy': correct / total,
            'triplet_negatives_per_source': batch.dst_neg_index.size(1)}


if __name__ == '__main__':
    torch.manual_seed(0)
    train_data, val_data, _ = split()
    message_passing = set(map(tuple, train_data.edge_index.t().tolist()))
    supervision = set(map(tuple, train_data.edge_label_index.t().tolist()))
    report = {'split_labels': sorted(set(train_data.edge_label.tolist())),
              'supervision_in_message_passing': len(supervision & message_passing)}
    try:
        report.update(train_and_evaluate(train_data, val_data))
    except ImportError as error:  # no pyg-lib or torch-sparse: the first batch fails
        report['sampling'] = 'ImportError: %s' % error
    print(json.dumps(report))
