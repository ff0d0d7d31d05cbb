"""Device layouts -> framework shapes (reference §1.8), against hand-computed arrays.

Small C0/N0/Ni (4 and 2 instead of 16) keep the expected arrays short enough to
write out by hand; the converters read these sizes from the data shape. P marks
padding, which must disappear.
"""
import numpy as np
import pytest

from npu_dump_hook.errors import FormatError
from npu_dump_hook.formats import device_format as df

P = 99


def test_nc1hwc0_to_nchw_and_nhwc_drop_channel_padding():
    # NCHW x[0, c, 0, w] = 10*c + w with C=3, H=1, W=2; C0=4 -> C1=1, one padded channel.
    device = np.array([[[[[0, 10, 20, P], [1, 11, 21, P]]]]])  # (N=1, C1=1, H=1, W=2, C0=4)
    nchw = df.to_original(device, "NC1HWC0", (1, 3, 1, 2), "NCHW")
    assert nchw.tolist() == [[[[0, 1]], [[10, 11]], [[20, 21]]]]
    nhwc = df.to_original(device, "NC1HWC0", (1, 1, 2, 3), "NHWC")
    assert nhwc.tolist() == [[[[0, 10, 20], [1, 11, 21]]]]


def test_nc1hwc0_with_two_c1_blocks():
    # 5 channels, C0=4: block 0 holds channels 0..3, block 1 channel 4 + three pads.
    device = np.array([[[[[1, 2, 3, 4]]], [[[5, P, P, P]]]]])  # (1, 2, 1, 1, 4)
    assert df.nc1hwc0_to_nchw(device, 5).tolist() == [[[[1]], [[2]], [[3]], [[4]], [[5]]]]


def test_nc1hwc0_guesses_layout_from_original_shape():
    device = np.array([[[[[0, 10, 20, P], [1, 11, 21, P]]]]])
    # (1, 1, 2, 3) only fits NHWC; (1, 3, 1, 2) only fits NCHW.
    assert df.to_original(device, "NC1HWC0", (1, 1, 2, 3)).tolist() == [[[[0, 10, 20], [1, 11, 21]]]]
    assert df.to_original(device, "NC1HWC0", (1, 3, 1, 2), "ND").tolist() == [[[[0, 1]], [[10, 11]], [[20, 21]]]]


def test_fractal_nz_to_nd():
    # ND x[i, j] = 10*i + j, shape (3, 5); C0=4, Ni=2 -> C1=2, No=2.
    device = np.array([
        [[[0, 1, 2, 3], [10, 11, 12, 13]], [[20, 21, 22, 23], [P, P, P, P]]],  # c1 = 0
        [[[4, P, P, P], [14, P, P, P]], [[24, P, P, P], [P, P, P, P]]],  # c1 = 1
    ])  # (C1=2, No=2, Ni=2, C0=4)
    expected = [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14], [20, 21, 22, 23, 24]]
    assert df.to_original(device, "FRACTAL_NZ", (3, 5)).tolist() == expected


def test_fractal_nz_with_batch_dim():
    dev0 = np.array([
        [[[0, 1, 2, 3], [10, 11, 12, 13]], [[20, 21, 22, 23], [P, P, P, P]]],
        [[[4, P, P, P], [14, P, P, P]], [[24, P, P, P], [P, P, P, P]]],
    ])
    device = np.stack([dev0, np.where(dev0 == P, P, dev0 + 100)])  # batch b adds 100*b
    result = df.to_original(device, "FRACTAL_NZ", (2, 3, 5))
    assert result.tolist() == [
        [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14], [20, 21, 22, 23, 24]],
        [[100, 101, 102, 103, 104], [110, 111, 112, 113, 114], [120, 121, 122, 123, 124]],
    ]


def test_fractal_z_to_nchw_and_hwcn():
    # Weights x[n, c, 0, w] = 100*n + 10*c + w, N=3, C=2, H=1, W=2; C0=4, N0=2 -> C1=1, N1=2.
    device = np.array([
        [[[0, 10, P, P], [100, 110, P, P]], [[200, 210, P, P], [P, P, P, P]]],  # w = 0
        [[[1, 11, P, P], [101, 111, P, P]], [[201, 211, P, P], [P, P, P, P]]],  # w = 1
    ])  # (C1*H*W=2, N1=2, N0=2, C0=4)
    nchw = df.to_original(device, "FRACTAL_Z", (3, 2, 1, 2), "NCHW")
    assert nchw.tolist() == [[[[0, 1]], [[10, 11]]], [[[100, 101]], [[110, 111]]], [[[200, 201]], [[210, 211]]]]
    hwcn = df.to_original(device, "FRACTAL_Z", (1, 2, 2, 3), "HWCN")
    assert hwcn.tolist() == [[[[0, 100, 200], [10, 110, 210]], [[1, 101, 201], [11, 111, 211]]]]
    # Unknown original format: TF's HWCN is tried first and fits.
    assert df.to_original(device, "FRACTAL_Z", (1, 2, 2, 3)).tolist() == hwcn.tolist()


def test_ndc1hwc0_to_ncdhw_and_ndhwc():
    # x[0, c, d, 0, 0] = 10*c + d, C=3, D=2, H=W=1; C0=4.
    device = np.array([[[[[[0, 10, 20, P]]]], [[[[1, 11, 21, P]]]]]])  # (N=1, D=2, C1=1, H=1, W=1, C0=4)
    ncdhw = df.to_original(device, "NDC1HWC0", (1, 3, 2, 1, 1), "NCDHW")
    assert ncdhw.tolist() == [[[[[0]], [[1]]], [[[10]], [[11]]], [[[20]], [[21]]]]]
    ndhwc = df.to_original(device, "NDC1HWC0", (1, 2, 1, 1, 3), "NDHWC")
    assert ndhwc.tolist() == [[[[[0, 10, 20]]], [[[1, 11, 21]]]]]


def test_from_original_produces_hand_computed_layouts():
    x = np.array([[[[0, 1]], [[10, 11]], [[20, 21]]]])  # NCHW (1, 3, 1, 2)
    assert df.from_original(x, "NC1HWC0", "NCHW", c0=4).tolist() == [[[[[0, 10, 20, 0], [1, 11, 21, 0]]]]]
    nd = np.array([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14], [20, 21, 22, 23, 24]])
    assert df.from_original(nd, "FRACTAL_NZ", c0=4, n0=2).tolist() == [
        [[[0, 1, 2, 3], [10, 11, 12, 13]], [[20, 21, 22, 23], [0, 0, 0, 0]]],
        [[[4, 0, 0, 0], [14, 0, 0, 0]], [[24, 0, 0, 0], [0, 0, 0, 0]]],
    ]
    ncdhw = np.array([[[[[0]], [[1]]], [[[10]], [[11]]], [[[20]], [[21]]]]])  # (1, 3, 2, 1, 1)
    assert df.from_original(ncdhw, "NDC1HWC0", "NCDHW", c0=4).tolist() == [
        [[[[[0, 10, 20, 0]]]], [[[[1, 11, 21, 0]]]]]]
    w = np.array([[[[0, 1]], [[10, 11]]], [[[100, 101]], [[110, 111]]], [[[200, 201]], [[210, 211]]]])
    assert df.from_original(w, "FRACTAL_Z", "NCHW", c0=4, n0=2).tolist() == [
        [[[0, 10, 0, 0], [100, 110, 0, 0]], [[200, 210, 0, 0], [0, 0, 0, 0]]],
        [[[1, 11, 0, 0], [101, 111, 0, 0]], [[201, 211, 0, 0], [0, 0, 0, 0]]],
    ]


@pytest.mark.parametrize("device_format, original_format, shape", [
    ("NC1HWC0", "NHWC", (2, 3, 4, 17)),
    ("NC1HWC0", "NCHW", (1, 33, 2, 2)),
    ("NDC1HWC0", "NDHWC", (1, 2, 3, 3, 20)),
    ("FRACTAL_Z", "HWCN", (3, 3, 17, 18)),
    ("FRACTAL_NZ", "ND", (2, 17, 33)),
    ("FRACTAL_NZ", "ND", (7,)),
])
def test_round_trip_with_default_block_sizes(device_format, original_format, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
    device = df.from_original(x, device_format, original_format)
    assert device.shape[-1] == 16
    assert np.array_equal(df.to_original(device, device_format, shape, original_format), x)


def test_plain_formats_reshape_and_mismatches_raise():
    assert df.to_original(np.arange(6), "ND", (2, 3)).shape == (2, 3)
    with pytest.raises(FormatError, match="cannot be reshaped"):
        df.to_original(np.arange(6), "NCHW", (4, 2), source="f.bin")
    with pytest.raises(FormatError) as info:
        df.to_original(np.zeros((1, 1, 1, 2, 4)), "NC1HWC0", (1, 9, 1, 2), "NCHW", source="f.bin")
    assert info.value.path == "f.bin" and "does not hold original shape" in info.value.rule
    with pytest.raises(FormatError, match="FRACTAL_NZ"):
        df.to_original(np.zeros((2, 2, 2, 4)), "FRACTAL_NZ", (5, 5))
    with pytest.raises(FormatError, match="FRACTAL_Z"):
        df.to_original(np.zeros((2, 2, 2, 4)), "FRACTAL_Z", (3, 2, 2, 2), "NCHW")
    # dims beyond int64 (forged uint64 header values) are a FormatError, not OverflowError
    with pytest.raises(FormatError):
        df.to_original(np.zeros(4), "ND", (2 ** 64 - 1, 2))
