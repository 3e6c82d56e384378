"""Stores over real systems, for tests/test_store_real_backends.py.

Each factory takes no arguments, as the store checker calls it (`tests/support/real_stores.py:<name>`),
and finds its data through environment variables the test sets: REAL_STORES_DIR (files written
by the write_* helpers) and REAL_STORES_REDIS_PORT (a redis-server the test started). The correct
stores keep PyG's contract; each broken one breaks it the way real clients do (named in its
docstring). Every feature store pairs with the on-disk CSC graph store below.
"""

import asyncio
import os
import sqlite3
import threading

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr

NUM_NODES = 40
WIDTH = 4


def graph():
    """(x float32 [N, 4], y int64 [N], COO edges): a ring both ways plus chords."""
    x = torch.randn(NUM_NODES, WIDTH, generator=torch.Generator().manual_seed(0))
    y = torch.arange(NUM_NODES) % 3
    nodes = torch.arange(NUM_NODES)
    src = torch.cat([nodes, (nodes + 1) % NUM_NODES, nodes])
    dst = torch.cat([(nodes + 1) % NUM_NODES, nodes, (nodes * 7 + 3) % NUM_NODES])
    return x, y, torch.stack([src, dst])


def data_dir():
    return os.environ["REAL_STORES_DIR"]


# Writers (run by the tests, never by the checker) ------------------------------

def write_all(folder):
    """SQLite, CSC and memory-mapped files for every store here."""
    x, y, edges = graph()
    connection = sqlite3.connect(os.path.join(folder, "graph.sqlite"))
    connection.execute("CREATE TABLE node (id INTEGER PRIMARY KEY, x BLOB NOT NULL, y INTEGER NOT NULL)")
    connection.executemany("INSERT INTO node VALUES (?, ?, ?)",
                           [(i, x[i].numpy().tobytes(), int(y[i])) for i in range(NUM_NODES)])
    connection.commit()
    connection.close()
    order = torch.argsort(edges[1], stable=True)  # CSC: edges grouped by destination
    colptr = torch.zeros(NUM_NODES + 1, dtype=torch.long)
    colptr[1:] = torch.cumsum(torch.bincount(edges[1], minlength=NUM_NODES), 0)
    np.save(os.path.join(folder, "row.npy"), edges[0][order].numpy())
    np.save(os.path.join(folder, "colptr.npy"), colptr.numpy())
    torch.save({"x": x, "y": y}, os.path.join(folder, "features.pt"))
    np.save(os.path.join(folder, "x.npy"), x.numpy())
    np.save(os.path.join(folder, "y.npy"), y.numpy())


def write_redis(port):
    import redis
    x, y, _ = graph()
    client = redis.Redis(host="127.0.0.1", port=port)
    client.mset({"x:%d" % i: x[i].numpy().tobytes() for i in range(NUM_NODES)})
    client.mset({"y:%d" % i: y[i].numpy().tobytes() for i in range(NUM_NODES)})
    client.set("num_nodes", NUM_NODES)
    client.close()


def write_kuzu(folder):
    import kuzu
    x, y, edges = graph()
    database = kuzu.Database(os.path.join(folder, "graph.kuzu"))
    connection = kuzu.Connection(database)
    connection.execute("CREATE NODE TABLE paper(id INT64, x FLOAT[4], y INT64, PRIMARY KEY(id))")
    connection.execute("CREATE REL TABLE cites(FROM paper TO paper)")
    for i in range(NUM_NODES):
        connection.execute("CREATE (:paper {id: $id, x: $x, y: $y})", {"id": i, "x": x[i].tolist(), "y": int(y[i])})
    for src, dst in edges.t().tolist():
        connection.execute("MATCH (a:paper {id: $a}), (b:paper {id: $b}) CREATE (a)-[:cites]->(b)", {"a": src, "b": dst})
    connection.close()
    database.close()


# The graph store: CSC arrays on disk ----------------------------------------------

class CSCGraphStore(GraphStore):
    """Homogeneous edges as (row, colptr) .npy files, memory-mapped."""

    def __init__(self, folder):
        super().__init__()
        self.row = torch.from_numpy(np.load(os.path.join(folder, "row.npy"), mmap_mode="r").copy())
        self.colptr = torch.from_numpy(np.load(os.path.join(folder, "colptr.npy"), mmap_mode="r").copy())

    def _get_edge_index(self, edge_attr):
        if edge_attr.edge_type is None and edge_attr.layout.value == "csc":
            return self.row, self.colptr
        return None

    def get_all_edge_attrs(self):
        return [EdgeAttr(None, "csc", size=(NUM_NODES, NUM_NODES))]

    def _put_edge_index(self, edge_index, edge_attr):
        raise NotImplementedError("read-only")

    def _remove_edge_index(self, edge_attr):
        raise NotImplementedError("read-only")


class ReadOnlyFeatureStore(FeatureStore):
    """Two node features, x and y, homogeneous; subclasses read them."""

    def get_all_tensor_attrs(self):
        return [TensorAttr(None, "x"), TensorAttr(None, "y")]

    def _get_tensor_size(self, attr):
        if attr.attr_name not in ("x", "y"):
            return None
        return (NUM_NODES, WIDTH) if attr.attr_name == "x" else (NUM_NODES,)

    def _put_tensor(self, tensor, attr):
        raise NotImplementedError("read-only")

    def _remove_tensor(self, attr):
        raise NotImplementedError("read-only")


def pair(feature_store):
    return feature_store, CSCGraphStore(data_dir())


# SQLite -----------------------------------------------------------------------------

def decode(column, values):
    if column == "x":
        return torch.from_numpy(np.stack([np.frombuffer(blob, dtype=np.float32) for blob in values]))
    return torch.tensor(values, dtype=torch.long)


class SQLiteIdOrder(ReadOnlyFeatureStore):
    """The issue's store: a thread-bound connection (sqlite3's default) opened in __init__, and a
    batch read with ORDER BY id, so rows come back in id order with repeats collapsed."""

    def __init__(self, path):
        super().__init__()
        self.connection = sqlite3.connect("file:%s?mode=ro" % path, uri=True)

    def rows(self, column, ids):
        marks = ",".join("?" * len(ids))
        return self.connection.execute("SELECT id, %s FROM node WHERE id IN (%s) ORDER BY id" % (column, marks),
                                       ids).fetchall()

    def _get_tensor(self, attr):
        if attr.attr_name not in ("x", "y"):
            return None
        ids = list(range(NUM_NODES)) if attr.index is None else [int(i) for i in attr.index]
        return decode(attr.attr_name, [value for _, value in self.rows(attr.attr_name, ids)])


class SQLiteRequestedOrder(SQLiteIdOrder):
    """The issue's store fixed: same thread-bound connection, rows put back in the requested order
    (repeats included); a missing id raises KeyError."""

    def _get_tensor(self, attr):
        if attr.attr_name not in ("x", "y"):
            return None
        ids = list(range(NUM_NODES)) if attr.index is None else [int(i) for i in attr.index]
        found = dict(self.rows(attr.attr_name, sorted(set(ids))))
        return decode(attr.attr_name, [found[i] for i in ids])


class SQLiteDeduplicated(SQLiteIdOrder):
    """Puts the rows back in the requested order but keeps one row per id: repeats collapse."""

    def _get_tensor(self, attr):
        if attr.attr_name not in ("x", "y"):
            return None
        ids = list(range(NUM_NODES)) if attr.index is None else [int(i) for i in attr.index]
        found = dict(self.rows(attr.attr_name, ids))
        return decode(attr.attr_name, [found[i] for i in dict.fromkeys(ids)])


class SQLiteBlobDtype(SQLiteRequestedOrder):
    """Decodes the float32 blobs with np.frombuffer's default dtype (float64): two wrong values per
    row instead of four, while get_tensor_size still says four."""

    def _get_tensor(self, attr):
        if attr.attr_name != "x":
            return super()._get_tensor(attr)
        ids = list(range(NUM_NODES)) if attr.index is None else [int(i) for i in attr.index]
        found = dict(self.rows("x", sorted(set(ids))))
        return torch.from_numpy(np.stack([np.frombuffer(found[i]) for i in ids]))


def sqlite_path():
    return os.path.join(data_dir(), "graph.sqlite")


def sqlite_id_order():
    return pair(SQLiteIdOrder(sqlite_path()))


def sqlite_fixed():
    return pair(SQLiteRequestedOrder(sqlite_path()))


def sqlite_deduplicated():
    return pair(SQLiteDeduplicated(sqlite_path()))


def sqlite_blob_dtype():
    return pair(SQLiteBlobDtype(sqlite_path()))


# Memory-mapped files ------------------------------------------------------------------

class MmapFeatureStore(ReadOnlyFeatureStore):
    """torch.load(mmap=True): pages are read on access and shared between forked workers."""

    def __init__(self, path):
        super().__init__()
        self.tensors = torch.load(path, mmap=True, weights_only=True)

    def _get_tensor(self, attr):
        tensor = self.tensors.get(attr.attr_name)
        if tensor is None or attr.index is None:
            return tensor
        return tensor[attr.index]


class SortedMemmapFeatureStore(ReadOnlyFeatureStore):
    """numpy.memmap read in sorted id order for sequential disk access, never put back in the
    order asked for."""

    def __init__(self, folder):
        super().__init__()
        self.arrays = {name: np.load(os.path.join(folder, name + ".npy"), mmap_mode="r") for name in ("x", "y")}

    def _get_tensor(self, attr):
        array = self.arrays.get(attr.attr_name)
        if array is None:
            return None
        if attr.index is None:
            return torch.from_numpy(np.array(array))
        return torch.from_numpy(np.array(array[np.sort(attr.index.numpy())]))


def mmap_torch_load():
    return pair(MmapFeatureStore(os.path.join(data_dir(), "features.pt")))


def mmap_sorted_reads():
    return pair(SortedMemmapFeatureStore(data_dir()))


# Redis (a networked key-value server) ----------------------------------------------------

class RedisFeatureStore(ReadOnlyFeatureStore):
    """One MGET per read (one round trip per batch, replies in the order asked, repeats kept); the
    client is opened lazily in each process that reads; a missing id raises KeyError."""

    def __init__(self, port):
        super().__init__()
        self.port = port
        self.client, self.pid = None, None

    def connection(self):
        import redis
        if self.pid != os.getpid():  # first use in this process (a forked worker included)
            self.client, self.pid = redis.Redis(host="127.0.0.1", port=self.port), os.getpid()
        return self.client

    def fetch(self, keys):
        return self.connection().mget(keys)

    def _get_tensor(self, attr):
        if attr.attr_name not in ("x", "y"):
            return None
        ids = list(range(NUM_NODES)) if attr.index is None else [int(i) for i in attr.index]
        values = self.fetch(["%s:%d" % (attr.attr_name, i) for i in ids])
        missing = [i for i, value in zip(ids, values) if value is None]
        if missing:
            raise KeyError("no %s for ids %s" % (attr.attr_name, missing[:10]))
        rows = np.stack([np.frombuffer(value, dtype=np.float32 if attr.attr_name == "x" else np.int64)
                         for value in values])
        return torch.from_numpy(rows if attr.attr_name == "x" else rows[:, 0])


class RedisLoopThreadFeatureStore(RedisFeatureStore):
    """An asyncio client driven by a background event-loop thread started in __init__ (how async
    and gRPC clients are bridged to synchronous code). fork() copies only the calling thread, so in
    a loader worker the loop is gone and every read waits forever."""

    def __init__(self, port):
        super().__init__(port)
        import redis.asyncio
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.async_client = redis.asyncio.Redis(host="127.0.0.1", port=port)

    def fetch(self, keys):
        return asyncio.run_coroutine_threadsafe(self.async_client.mget(keys), self.loop).result()


def redis_port():
    return int(os.environ["REAL_STORES_REDIS_PORT"])


def redis_store():
    return pair(RedisFeatureStore(redis_port()))


def redis_loop_thread():
    return pair(RedisLoopThreadFeatureStore(redis_port()))


# Kuzu (an embedded graph database with its own PyG backend) --------------------------------

def kuzu_path():
    return os.path.join(data_dir(), "graph.kuzu")


def kuzu_own_backend():
    """Kuzu's own remote backend, as its documentation shows it."""
    import kuzu
    return kuzu.Database(kuzu_path(), read_only=True).get_torch_geometric_remote_backend(1)


def kuzu_query_stores():
    """Kuzu's own classes with their reads done by Cypher queries: features by node offset, put back
    in the requested order, and edges as COO. The Database is opened lazily per process, since
    Kuzu's is not fork-safe (its own documentation says so); `per_process=False` keeps the one
    opened in the main process, which a forked worker inherits."""
    return kuzu_pair(per_process=True)


def kuzu_inherited_connection():
    """As kuzu_query_stores, but the Database opened in the main process is used in the workers too."""
    return kuzu_pair(per_process=False)


def kuzu_pair(per_process):
    import kuzu
    from kuzu.torch_geometric_feature_store import KuzuFeatureStore
    from kuzu.torch_geometric_graph_store import KuzuGraphStore

    handles = {}

    def connection():
        pid = os.getpid() if per_process else None
        if pid not in handles:  # inherited handles stay referenced: destroying them after fork hangs
            database = kuzu.Database(kuzu_path(), read_only=True)
            handles[pid] = (database, kuzu.Connection(database, 1))
        return handles[pid][1]

    class QueryFeatureStore(KuzuFeatureStore):
        def _get_tensor(self, attr):
            if attr.attr_name not in ("x", "y"):
                return None
            ids = list(range(NUM_NODES)) if attr.index is None else [int(i) for i in attr.index]
            result = connection().execute(
                "MATCH (n:%s) WHERE offset(id(n)) IN $ids RETURN offset(id(n)), n.%s" % (attr.group_name,
                                                                                        attr.attr_name),
                {"ids": sorted(set(ids))})
            found = {}
            while result.has_next():
                node, value = result.get_next()
                found[node] = value
            dtype = torch.float32 if attr.attr_name == "x" else torch.long
            return torch.tensor([found[i] for i in ids], dtype=dtype)

        def _get_tensor_size(self, attr):
            return (NUM_NODES, WIDTH) if attr.attr_name == "x" else (NUM_NODES,) if attr.attr_name == "y" else None

        def get_all_tensor_attrs(self):
            return [TensorAttr("paper", "x"), TensorAttr("paper", "y")]

    class QueryGraphStore(KuzuGraphStore):
        def _get_edge_index(self, edge_attr):
            if tuple(edge_attr.edge_type or ()) != ("paper", "cites", "paper") or edge_attr.layout.value != "coo":
                return None
            result = connection().execute("MATCH (a:paper)-[:cites]->(b:paper) "
                                          "RETURN offset(id(a)), offset(id(b)) ORDER BY offset(id(b))")
            pairs = []
            while result.has_next():
                pairs.append(result.get_next())
            edges = torch.tensor(pairs, dtype=torch.long).t()
            return edges[0], edges[1]

    database = kuzu.Database(kuzu_path(), read_only=True)
    feature_store, graph_store = QueryFeatureStore(database, 1), QueryGraphStore(database, 1)
    handles.setdefault(os.getpid() if per_process else None, (database, kuzu.Connection(database, 1)))
    graph_store.meta = {"is_hetero": True}
    return feature_store, graph_store


def kuzu_own_graph_store():
    """Kuzu's own graph store alone (its edge reads call get_num_rels)."""
    import kuzu
    return kuzu.Database(kuzu_path(), read_only=True).get_torch_geometric_remote_backend(1)[1]


def kuzu_query_feature_store():
    return kuzu_query_stores()[0]
