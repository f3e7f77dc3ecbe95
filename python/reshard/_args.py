"""Python arguments in the CLI's terms.

Meshes and shapes become the CLI's text ("2x2", "8192x8192") and placements its comma-separated list ("S0,P(avg)"),
so that the C++ parsers check them and a bad value raises ValueError with the message `reshard layout` / `reshard
plan` prints for the same text. Accepted forms:

- mesh: an int, a sequence of ints, or the CLI text "2x2";
- shape: a sequence of ints or the CLI text "8x8" (an empty sequence is a scalar where the caller allows one);
- placements: the CLI text "S0,R", a sequence of strings ("S0", "P(avg)", "Shard(1)", ...), or PyTorch placement
  objects (Replicate(), Shard(d), _StridedShard(d, split_factor=f), Partial(op));
- dtype: a CLI name (f32, bf16, ...), a PyTorch spelling ("float32"), a NumPy dtype or type, or a torch.dtype.
"""

import numbers

def _int_text(value):
    # bool is an int in Python but never a size; leave it (and anything else) to the C++ parser's message.
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    return str(value)


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1  # byte counts are int64 in C++


def integer(name, value, lo=0, hi=INT32_MAX):
    """An integer argument as the CLI takes it: TypeError for anything but an int (a float is never truncated, a bool
    is never a count), ValueError outside lo..hi; one line each."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {v}")
    return v


def seconds(name, value, lo=1e-3, hi=1e6):
    """A duration in seconds: a number (not a bool) from lo to hi, finite; TypeError or ValueError (one line)
    otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds, got bool {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}") from None
    if not lo <= v <= hi:  # NaN fails too
        raise ValueError(f"{name} must be from {lo:g} to {hi:g} seconds, got {value!r}")
    return v


def mesh_text(mesh):
    if isinstance(mesh, str):
        return mesh
    if isinstance(mesh, numbers.Integral) and not isinstance(mesh, bool):
        return str(int(mesh))
    try:
        items = list(mesh)
    except TypeError:
        raise ValueError(f"mesh must be an int, a sequence of ints or text like '2x4', got {mesh!r}") from None
    return "x".join(_int_text(v) for v in items)


def shape_arg(shape, allow_scalar=False):
    """The CLI text of a shape, or [] for a scalar (where allowed)."""
    if isinstance(shape, str):
        return shape
    try:
        items = list(shape)
    except TypeError:
        raise ValueError(f"shape must be a sequence of ints or text like '1024x512', got {shape!r}") from None
    if not items and allow_scalar:
        return []
    return "x".join(_int_text(v) for v in items)


def placement_text(p):
    """One placement in the CLI's spelling (strings pass through for the C++ parser to check)."""
    if isinstance(p, str):
        return p
    name = type(p).__name__
    if name == "Replicate":
        return "R"
    if name == "Shard":  # exactly Shard: _StridedShard and other subclasses are not plain chunked sharding
        return f"S{int(p.dim)}"
    if name == "_StridedShard":  # PyTorch's _StridedShard(dim, split_factor): reshard's SS<dim>/<split factor>
        return f"SS{int(p.dim)}/{int(p.split_factor)}"
    if name == "Partial":
        return f"P({p.reduce_op})"
    raise ValueError(f"unsupported placement {p!r}; expected Replicate(), Shard(d), _StridedShard(d, f) or Partial(op)")


def placements_text(placements):
    if isinstance(placements, str):
        return placements
    try:
        items = list(placements)
    except TypeError:
        return placement_text(placements)
    return ",".join(placement_text(p) for p in items)


def dtype_name(dtype):
    if dtype is None:  # numpy.dtype(None) is float64: never a silent default
        raise TypeError("dtype must be a dtype name, a NumPy dtype or a torch.dtype, got None")
    if isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("torch."):  # torch.float32 -> float32
        return text[len("torch."):]
    try:
        import numpy

        return numpy.dtype(dtype).name
    except TypeError:
        return text


def byte_count(name, value):
    """An int, or the CLI's byte text ("64MiB", "2GiB", "512KiB", "1048576")."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return integer(name, value, -INT64_MAX - 1, INT64_MAX)
    text = str(value)
    scale = 1
    for suffix, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)):
        if len(text) > len(suffix) and text.endswith(suffix):
            text, scale = text[: -len(suffix)], factor
            break
    try:
        v = int(text, 10)
    except ValueError:
        raise ValueError(f"{name} '{value}' is not a byte count (e.g. 1048576, 64MiB)") from None
    return integer(name, v * scale, -INT64_MAX - 1, INT64_MAX)


_kinds = None  # the plan option table's kind of value per name (plan_option_table.hpp), read once


def plan_options(**given):
    """The plan options given as keywords (None: left at the default), as the text the plan option table parses:
    {name: text}, each by its kind of value in the table. Counts and byte counts are checked as integers here first
    (TypeError for a float or a bool)."""
    global _kinds
    if _kinds is None:
        from . import _core

        _kinds = _core.plan_option_kinds()
    out = {}
    for name, value in given.items():
        if value is None:
            continue
        kind = _kinds.get(name)
        if kind == "switch":
            out[name] = "true" if value else "false"
        elif kind == "byte_count":
            out[name] = str(byte_count(name, value))
        elif kind == "count":
            out[name] = str(integer(name, value, -INT32_MAX - 1))  # range: the table's check, in the CLI's words
        else:
            out[name] = str(value)
    return out
