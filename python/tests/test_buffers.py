"""What the CUDA executor bindings read from a tensor (DLPack, __cuda_array_interface__, raw addresses), checked on
NumPy arrays: the same parsing code runs for torch.Tensor on the GPU."""

import numpy as np
import pytest

from reshard import _core


@pytest.mark.skipif(not _core.HAVE_DLPACK, reason="built without dlpack/dlpack.h")
def test_dlpack_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = _core.describe_buffer(a)
    assert d["data"] == a.ctypes.data and d["bytes"] == 48 and d["memory"] == "host" and d["element_bits"] == 32
    b = a[1:]  # dense, offset view
    assert _core.describe_buffer(b)["data"] == b.ctypes.data
    with pytest.raises(ValueError, match="not dense row-major"):
        _core.describe_buffer(a[:, ::2])
    with pytest.raises(ValueError, match="not dense row-major"):
        _core.describe_buffer(a.T)
    assert _core.describe_buffer(np.zeros((0, 5), np.int16))["bytes"] == 0


class CudaArray:
    """A minimal __cuda_array_interface__ producer (pointing at host memory: only parsing is tested here)."""

    def __init__(self, a, strides=None, typestr=None):
        self._a = a
        self.__cuda_array_interface__ = {"data": (a.ctypes.data, False), "shape": a.shape,
                                         "typestr": typestr or a.dtype.str, "strides": strides, "version": 3}


def test_cuda_array_interface():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    d = _core.describe_buffer(CudaArray(a))
    assert d["data"] == a.ctypes.data and d["bytes"] == 48 and d["memory"] == "cuda" and d["element_bits"] == 64
    assert _core.describe_buffer(CudaArray(a, strides=(24, 8)))["bytes"] == 48
    with pytest.raises(ValueError, match="not dense row-major"):
        _core.describe_buffer(CudaArray(a, strides=(8, 16)))
    with pytest.raises(ValueError, match="typestr"):
        _core.describe_buffer(CudaArray(a, typestr="<f"))


def test_addresses_and_bad_objects():
    assert _core.describe_buffer(12345)["data"] == 12345
    assert _core.describe_buffer(12345)["bytes"] is None
    with pytest.raises(ValueError, match="expected a tensor"):
        _core.describe_buffer("not a tensor")
    with pytest.raises(ValueError, match="expected a tensor"):
        _core.describe_buffer(True)


def test_cuda_array_interface_with_fewer_strides_than_dims_is_refused():
    class Described:
        __cuda_array_interface__ = {"data": (4096, False), "shape": (4, 4, 4), "typestr": "<f4", "strides": (64,),
                                    "version": 3}

    with pytest.raises(ValueError, match="1 strides for 3 dims"):
        _core.describe_buffer(Described())
