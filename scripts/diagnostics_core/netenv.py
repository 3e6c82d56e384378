"""The socket-interface variables of torch.distributed's backends and how their values are read:
the checker judges one node's, the cluster compare every node's."""


SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def absent_interfaces(variable, raw, interfaces):
    """Names in a *_SOCKET_IFNAME value that match no interface in `interfaces`.

    gloo and TensorPipe take exact names (comma-separated); NCCL takes name
    prefixes unless the value starts with '=' (exact), and '^' makes it an
    exclusion list, which cannot name a missing interface.
    """
    if raw.startswith("^"):
        return []
    exact = variable != "NCCL_SOCKET_IFNAME" or raw.startswith("=")
    wanted = [i.strip() for i in raw.lstrip("=").split(",") if i.strip()]
    if exact:
        return [i for i in wanted if i not in interfaces]
    return [i for i in wanted if not any(n.startswith(i) for n in interfaces)]
