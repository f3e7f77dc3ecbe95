"""Two meshes of one world, as plan(), run_host() and run_host_batch() take them (the CLI's --from-mesh/--from-ranks,
--to-mesh/--to-ranks, --world-size): which world ranks hold a source shard and which receive a target one.

The source mesh is `mesh` on `ranks` (row-major coordinate order; unset: 0..n-1); the target mesh is dst_mesh on
dst_ranks (unset: 0..n-1 of dst_mesh, or the source's ranks when only dst_ranks or world_size is given and the target
has the source's shape); the world has world_size ranks (unset: one more than the largest rank of either mesh).
"""

from . import _args


def _size(mesh_text):
    n = 1
    for v in mesh_text.split("x"):
        n *= int(v)
    return n


class Between:
    """The ranks of each side and the world size (checked again, with the CLI's messages, by the C++ layer)."""

    __slots__ = ("src_ranks", "dst_ranks", "world")

    def __init__(self, src_ranks, dst_ranks, world):
        self.src_ranks = src_ranks
        self.dst_ranks = dst_ranks
        self.world = world


def between(mesh_text, ranks, dst_mesh, dst_ranks, world_size):
    """A Between when any of dst_mesh, dst_ranks, world_size is given (two meshes), else None (one mesh)."""
    if dst_mesh is None and dst_ranks is None and world_size is None:
        return None
    try:
        src = list(ranks) if ranks is not None else list(range(_size(mesh_text)))
        if dst_mesh is not None:
            dst_text = _args.mesh_text(dst_mesh)
            dst = list(dst_ranks) if dst_ranks is not None else list(range(_size(dst_text)))
        else:
            dst = list(dst_ranks) if dst_ranks is not None else list(src)
    except ValueError:
        return Between([], [], 0)  # a malformed mesh: the C++ parser's message comes when planning
    world = world_size if world_size is not None else max(src + dst, default=-1) + 1
    return Between(src, dst, world)
