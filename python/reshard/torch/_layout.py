"""DTensor layouts in reshard's terms, without touching a GPU: placement text, the rank's mesh coordinate and local
shape (PyTorch's chunking: full = ceil(s / n), chunk i starts at full * i), and whether reshard takes a
redistribution or leaves it to PyTorch (with the reason)."""

import numbers

import torch

from .. import _args, _core

# torch dtype -> (reshard dtype name, complex: moved as pairs of the real type along a trailing dim of 2)
DTYPES = {
    torch.float32: ("f32", False),
    torch.bfloat16: ("bf16", False),
    torch.float16: ("f16", False),
    torch.float64: ("f64", False),
    torch.int32: ("i32", False),
    torch.int64: ("i64", False),
    torch.int8: ("i8", False),
    torch.uint8: ("u8", False),
    torch.complex64: ("f32", True),
    torch.complex128: ("f64", True),
}

REDUCE_OPS = ("sum", "avg", "max", "min")


class Unsupported(Exception):
    """A redistribution reshard leaves to PyTorch; the message is the reason counted in stats()."""


def placement_text(p):
    name = type(p).__name__
    if name == "Replicate":
        return "R"
    if name == "Shard":
        return f"S{int(p.dim)}"
    if name == "Partial":
        if p.reduce_op not in REDUCE_OPS:
            raise Unsupported(f"Partial({p.reduce_op})")
        return "P" if p.reduce_op == "sum" else f"P({p.reduce_op})"
    raise Unsupported(f"placement {name}")


def placements_text(placements, ndim):
    """Canonical text of DTensor placements ("S1,P(avg)"), shard dims resolved against the tensor's ndim."""
    out = []
    for p in placements:
        t = placement_text(p)
        if t[0] == "S" and int(t[1:]) < 0:
            t = f"S{int(t[1:]) + ndim}"
        out.append(t)
    return out


def to_torch_placements(placements, ndim):
    """PyTorch placement objects from reshard text or a mix of text and objects ("S0,R", ["S-1", Replicate()])."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    items = [placements] if isinstance(placements, str) else list(placements)
    if not any(isinstance(p, str) for p in items):
        return items
    out = []
    for p in items:
        if not isinstance(p, str):
            out.append(p)
            continue
        for t in _core.normalize_placements(_args.placements_text(p), ndim):
            if t == "R":
                out.append(Replicate())
            elif t[0] == "S":
                out.append(Shard(int(t[1:])))
            else:
                out.append(Partial(t[2:-1] if "(" in t else "sum"))
    return out


def mesh_coord(position, mesh_shape):
    coord = []
    for n in reversed(mesh_shape):
        coord.append(position % n)
        position //= n
    return coord[::-1]


def local_shape(global_shape, mesh_shape, placements, coord):
    """The local shape at a mesh coordinate (placements: canonical text)."""
    shape = list(global_shape)
    for m, p in enumerate(placements):
        if p[0] == "S":
            d, n, i = int(p[1:]), mesh_shape[m], coord[m]
            s = shape[d]
            full = (s + n - 1) // n
            shape[d] = max(0, min(s, full * (i + 1)) - full * i)
    return shape


def canonical(placements, mesh_shape):
    """Size-1 mesh dims never change a box: treat them as Replicate (as reshard's planner does)."""
    return tuple("R" if mesh_shape[m] == 1 else p for m, p in enumerate(placements))


def is_concrete(shape):
    return all(isinstance(s, numbers.Integral) for s in shape)
