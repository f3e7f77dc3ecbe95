"""DTensor layouts in reshard's terms: the dtypes reshard moves, placement text from PyTorch placement objects (and
back), and the Unsupported exception that carries why a redistribution is left to PyTorch. The layout arithmetic is
in reshard/_shapes.py."""

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

# Target dtypes reshard writes that no source has (reshard's names).
TARGET_NAMES = {torch.float8_e4m3fn: "f8e4m3", torch.float8_e5m2: "f8e5m2"}

REDUCE_OPS = ("sum", "avg", "max", "min")


def dtype_name(dtype):
    """reshard's name of a torch dtype a source or target may have."""
    return TARGET_NAMES.get(dtype) or DTYPES[dtype][0]


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


def is_concrete(shape):
    return all(isinstance(s, numbers.Integral) for s in shape)
