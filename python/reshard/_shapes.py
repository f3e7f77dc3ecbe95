"""Layout arithmetic without a GPU or a framework, used by reshard.torch where it cannot call into C++ (inside traced
graphs, where shapes may be symbolic): a rank's mesh coordinate, its local shape (PyTorch's chunking: full =
ceil(s / n), chunk i starts at full * i), size-1 mesh dims, and the placements a gradient goes back to. Placements are
canonical text ("R", "S1", "P", "P(avg)"); the CPU suite checks local_shape against reshard.layout."""


def mesh_coord(position, mesh_shape):
    """The coordinate of the rank at row-major `position` of the mesh."""
    coord = []
    for n in reversed(mesh_shape):
        coord.append(position % n)
        position //= n
    return coord[::-1]


def local_shape(global_shape, mesh_shape, placements, coord):
    """The local shape at a mesh coordinate."""
    shape = list(global_shape)
    for m, p in enumerate(placements):
        if p[0] == "S":
            d, n, i = int(p[1:]), mesh_shape[m], coord[m]
            s = shape[d]
            full = (s + n - 1) // n
            shape[d] = max(0, min(s, full * (i + 1)) - full * i)
    return shape


def canonical(placements, mesh_shape):
    """Size-1 mesh dims never change a box: they read as Replicate (as reshard's planner treats them)."""
    return tuple("R" if mesh_shape[m] == 1 else p for m, p in enumerate(placements))


def backward_target(grad_placements, input_placements):
    """PyTorch's backward rule for a redistribution: a mesh dim whose input was Partial and whose gradient arrives
    Shard or Replicate goes to Replicate (R->P is skipped, S->P becomes S->R); every other dim returns to the input's
    placement."""
    return tuple("R" if t[0] == "P" and c[0] != "P" else t for c, t in zip(grad_placements, input_placements))
