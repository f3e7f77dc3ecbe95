"""Hostile and careless input to the Python API: every bad argument is a one-line ValueError or TypeError, never a
crash, a silent conversion or a wrong value. The CI also runs this file under ASan + UBSan (python/CMakeLists.txt,
python_asan_tests)."""

import json

import numpy as np
import pytest

import reshard
from reshard import _core


def one_line(excinfo):
    assert "\n" not in str(excinfo.value), str(excinfo.value)
    return str(excinfo.value)


# ---- shards whose elements are not the dtype's values ----------------------------------------------------------

@pytest.mark.parametrize("array, dtype", [
    (np.array([1, 2], np.uint32), "i32"),
    (np.array([1.5, 2.0], np.float16), "bf16"),
    (np.array([1, 0], np.uint8), "bool"),
    (np.array(["ab", "cd"]), "i64"),
    (np.array([1, 2], "datetime64[s]"), "i64"),
])
def test_shards_of_another_kind_are_refused(array, dtype):
    with pytest.raises(ValueError) as e:
        reshard.run_host([2], "P", "R", [array.copy(), array.copy()], dtype=dtype)
    assert f"which does not hold {dtype} values" in one_line(e)


def test_shards_in_non_native_byte_order_are_refused():
    a = np.array([1.0, 2.0], ">f4" if np.little_endian else "<f4")
    with pytest.raises(ValueError) as e:
        reshard.run_host([2], "P", "R", [a, a.copy()])
    assert "shard of rank 0 is in non-native byte order" in one_line(e)


def test_unaligned_shards_are_refused():
    raw = np.zeros(4 * 2 + 1, np.uint8)
    a = raw[1:].view(np.float32)  # a float32 array one byte off its alignment
    assert not a.flags.aligned
    with pytest.raises(ValueError) as e:
        reshard.run_host([2], "P", "R", [a, np.zeros(2, np.float32)])
    assert "shard of rank 0 is not aligned to its element size" in one_line(e)


# ---- complex Partial(max/min): refused by the C++ rule, as on the CLI ------------------------------------------

@pytest.mark.parametrize("op", ["max", "min"])
def test_complex128_max_and_min_are_refused(op):
    a = np.array([1 + 5j, 2], np.complex128)
    b = np.array([3 + 1j, 2], np.complex128)
    with pytest.raises(ValueError) as e:
        reshard.run_host([2], f"P({op})", "R", [a, b])
    assert f"Partial({op}) is not supported on complex128 tensors" in one_line(e)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_complex_sums_and_averages_are_exact(np_dtype):
    a = np.array([1 + 5j, 2 - 1j], np_dtype)
    b = np.array([3 + 1j, 2 + 3j], np_dtype)
    for op, want in (("P", a + b), ("P(avg)", (a + b) / 2)):
        outs = reshard.run_host([2], op, "R", [a, b])
        assert all(o.dtype == np_dtype and (o == want).all() for o in outs)


# ---- __cuda_array_interface__ and addresses that lie about themselves ----------------------------------------

class Iface:
    def __init__(self, d):
        self.__cuda_array_interface__ = d


def cai(**changes):
    d = {"data": (4096, False), "shape": (4, 4), "typestr": "<f4", "strides": None, "version": 3}
    d.update(changes)
    return Iface(d)


@pytest.mark.parametrize("obj, needle", [
    (cai(strides=(16, 4, 4)), "3 strides for 2 dims"),
    (cai(shape=(4, -4)), "negative extent"),
    (cai(shape="ab"), "shape must be a tuple of integers"),
    (cai(shape=(4, 2.5)), "shape must be a tuple of integers"),
    (cai(shape=(2**70,)), "shape entry out of range"),
    (cai(shape=(1,) * 65), "at most 64"),
    (cai(shape=(2**40, 2**40)), "overflows"),
    (cai(strides=(16, "4")), "strides must be a tuple of integers"),
    (cai(data=(-1, False)), "address out of range"),
    (cai(data=[4096, False]), "(address, read-only flag)"),
    (cai(data=(4096,)), "(address, read-only flag)"),
    (cai(typestr="f4"), "typestr 'f4' is malformed"),
    (cai(typestr=4), "typestr must be a string"),
    (cai(typestr="<f0"), "is malformed"),
    (cai(typestr="<f\x1b"), "typestr '<f\\e' is malformed"),
    (cai(mask=np.zeros(16, bool)), "with a mask"),
    (Iface([1, 2]), "must be a dict"),
    (Iface({"shape": (1,)}), "lacks 'data'"),
    (-5, "data address must be an integer in 0..2^64-1"),
    (2**64, "data address must be an integer in 0..2^64-1"),
])
def test_cuda_array_interface_is_checked(obj, needle):
    with pytest.raises(ValueError) as e:
        _core.describe_buffer(obj)
    assert needle in one_line(e)


def test_well_formed_interfaces_still_read():
    d = _core.describe_buffer(cai(strides=(16, 4)))
    assert d["bytes"] == 64 and d["element_bits"] == 32 and d["data"] == 4096 and d["memory"] == "cuda"
    d = _core.describe_buffer(cai(shape=[4, 4], typestr="|u1", mask=None))
    assert d["bytes"] == 16 and d["element_bits"] == 8


@pytest.mark.skipif(not _core.HAVE_DLPACK, reason="built without dlpack/dlpack.h")
def test_dlpack_device_must_be_a_type_and_an_id():
    class Producer:
        def __init__(self, device):
            self._device = device

        def __dlpack__(self, stream=None):
            return np.zeros(4, np.float32).__dlpack__()

        def __dlpack_device__(self):
            return self._device

    for device in ((1,), [1, 0], ("cpu", 0), None):
        with pytest.raises(ValueError) as e:
            _core.describe_buffer(Producer(device))
        assert "__dlpack_device__ must return (device type, device id)" in one_line(e)
    assert _core.describe_buffer(Producer((1, 0)))["bytes"] == 16


# ---- arguments the CLI would refuse ----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, kind, needle", [
    ({"ranks": [True, 0]}, TypeError, "ranks[0] must be an int, got bool True"),
    ({"ranks_per_node": 2.0}, TypeError, "ranks_per_node must be an int, got float 2.0"),
    ({"world_size": 2.5}, TypeError, "world_size must be an int, got float 2.5"),
    ({"ranks_per_node": 2**40}, ValueError, "ranks_per_node must be in -2147483648..2147483647, got 1099511627776"),
    ({"ranks": [2**40, 0]}, ValueError, "ranks[0] must be in 0..2147483647, got 1099511627776"),
    ({"memory_budget": 2**70}, ValueError, "memory_budget must be in -9223372036854775808..9223372036854775807"),
    ({"memory_budget": "9000000000GiB"}, ValueError, "memory_budget must be in"),
])
def test_plan_arguments_are_never_truncated(kwargs, kind, needle):
    with pytest.raises(kind) as e:
        reshard.plan([2], "S0", "R", [8], **kwargs)
    assert needle in one_line(e)


def test_run_host_refuses_float_ranks():
    a = np.zeros(2, np.float32)
    with pytest.raises(TypeError) as e:
        reshard.run_host([2], "S0", "R", [a, a], ranks=[1.0, 0.0])
    assert "ranks[0] must be an int, got float 1.0" in one_line(e)


# ---- _StridedShard shards without shape= -------------------------------------------------------------------------

def test_strided_shard_shape_is_inferred():
    g = np.arange(8, dtype=np.float32)
    lay = reshard.layout([2, 2], "SS0/2,S0", [8])
    shards = [g[r["global_offset"][0]:r["global_offset"][0] + r["local_shape"][0]].copy() for r in lay["ranks"]]
    outs = reshard.run_host([2, 2], "SS0/2,S0", "R,R", shards)  # no shape=: inferred from the shards
    assert len(outs) == 4 and all((o == g).all() for o in outs)


def test_strided_shard_that_reshard_cannot_plan_is_a_clear_error():
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(ValueError) as e:
        reshard.run_host([2], "SS0/2", "R", [a[:2].copy(), a[2:].copy()])
    assert "_StridedShard" in one_line(e)


# ---- plans from text that lie --------------------------------------------------------------------------------

def test_table_escapes_labels_a_plan_text_sets():
    j = json.loads(reshard.plan([2], "S0", "S1", [8, 8], strategy="p2p").json())
    j["profile"] = "\x1b[31mred\x07\r"
    j["candidates"].append({"strategy": "hybrid", "transport": "nccl", "available": False,
                            "reason": "\x1b]0;title\x07", "estimated_us": 1.0, "steps": 1, "bytes_moved": 0,
                            "peak_workspace_bytes": 0, "fits_budget": True, "route": "r"})
    table = reshard.Plan.from_json(json.dumps(j)).table()
    assert not any(c in table for c in "\x1b\x07\r")
    assert "\\e[31mred" in table and "\\e]0;title" in table


def test_a_relabelled_strategy_is_refused():
    j = json.loads(reshard.plan([2], "S0", "S1", [8, 8], strategy="p2p").json())
    j["strategy"] = "collective"
    with pytest.raises(ValueError) as e:
        reshard.Plan.from_json(json.dumps(j))
    assert "step 0 is p2p but the plan's strategy is collective" in one_line(e)


# Block-scaled fp8 and conversion on the host: the arrays and numbers handed to C++ are checked first.
@pytest.mark.parametrize("array, needle", [
    (np.zeros((4, 4), ">f4" if np.little_endian else "<f4"), "non-native byte order"),
    (np.frombuffer(bytearray(68), np.float32, 16, 2).reshape(4, 4), "not aligned to its element size"),
    (np.zeros((4, 4), np.float32)[:, ::2], "C-contiguous"),
    (np.zeros((4, 4), object), "must hold 4-byte elements of its kind"),
    (np.zeros((2, 2), np.int32), "must hold 4-byte elements of its kind"),
])
def test_conversion_inputs_are_checked(array, needle):
    for call in (lambda: reshard._core.quantize_blocks(array, "f32", "f8e4m3", 2),
                 lambda: reshard._core.convert_array(array, "f32", "bf16")):
        with pytest.raises(ValueError) as e:
            call()
        assert needle in one_line(e)


@pytest.mark.parametrize("block", [-1, 0, 4097, 2**63 - 1, 2**64, 1.5, float("nan"), "128", True, [128]])
def test_hostile_block_sizes_are_refused(block):
    g = np.zeros((256, 256), np.float32)
    with pytest.raises(ValueError) as e:
        reshard.run_host_batch([2], [{"src": "S0", "dst": "S1", "shards": [g[:128], g[128:]], "to_dtype": "f8e4m3",
                                      "block_scale": block}])
    assert "\n" not in str(e.value) and "scale block" in str(e.value)
    if block is not True:  # the binding reads a bool as the integer it is
        with pytest.raises((ValueError, TypeError)):
            reshard._core.quantize_blocks(g, "f32", "f8e4m3", block)


def test_layout_checks_of_block_scaling_take_the_cli_messages():
    with pytest.raises(ValueError, match="mesh"):
        reshard._core.block_misalignment("2x", None, "S0", "8x8", 4)
    with pytest.raises(ValueError, match="2-D"):
        reshard._core.block_misalignment("2", None, "S0", "8x8x8", 4)
    with pytest.raises(ValueError, match="scale block"):
        reshard._core.block_misalignment("2", None, "S0", "8x8", 0)
    assert reshard._core.block_misalignment("2", None, "S0", "8x8", 4) == ""


# ---- durations (reshard.torch.configure(timeout_s=...)) ----------------------------------------------------------

@pytest.mark.parametrize("value", [0, -1, 0.0005, 1e7, float("inf"), float("-inf"), float("nan"), "soon", None, [1]])
def test_durations_out_of_range_or_not_numbers_are_refused(value):
    with pytest.raises(ValueError) as e:
        reshard._args.seconds("timeout_s", value)
    assert "timeout_s" in one_line(e)


def test_durations_refuse_bools_and_take_numbers_and_their_text():
    with pytest.raises(TypeError) as e:
        reshard._args.seconds("timeout_s", True)
    assert "timeout_s" in one_line(e)
    assert reshard._args.seconds("timeout_s", 60) == 60.0
    assert reshard._args.seconds("timeout_s", "2.5") == 2.5
