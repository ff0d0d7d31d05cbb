"""Device (Ascend cube) tensor layouts <-> framework layouts, with padding removal.

Layouts (docs/reference/ascend-dump-formats.md §1.8; C0/N0/Ni are read from the data,
16 for float16/float32 in practice, C1 = ceil(C / C0), padding is zeros)::

    NC1HWC0   (N, C1, H, W, C0)          dev[n, c1, h, w, c0]    = NCHW[n, c1*C0 + c0, h, w]
    NDC1HWC0  (N, D, C1, H, W, C0)       dev[n, d, c1, h, w, c0] = NCDHW[n, c1*C0 + c0, d, h, w]
    FRACTAL_Z (C1*H*W, N1, N0, C0)       dev[(c1*H + h)*W + w, n1, n0, c0] = NCHW[n1*N0 + n0, c1*C0 + c0, h, w]
              (convolution weights; N = output channels, C = input channels)
    FRACTAL_NZ (..., C1, No, Ni, C0)     dev[..., c1, no, ni, c0] = ND[..., no*Ni + ni, c1*C0 + c0]
              for ND (..., n, c); a 1-D original [c] is treated as [1, c].

:func:`to_original` turns a device-layout array into the framework shape recorded
in the dump (``original_shape``), choosing the framework layout from
``original_format`` ("NCHW", "NHWC", "HWCN", "NCDHW", "NDHWC") or, when that is
None / "ND" / unknown, from which layout matches ``original_shape`` (NHWC /
NDHWC / HWCN first: TensorFlow's defaults). :func:`from_original` is the inverse,
for writers (the emulator). Shape mismatches raise :class:`FormatError`
naming ``source``, and so do original shapes numpy cannot hold (more than
:data:`NUMPY_MAX_DIMS` dims, a dim over 2**63-1, or more than 2**63-1 bytes counting
only the non-zero dims: see :func:`shape_problem`; dump headers carry uint64 dims).
Results of ``to_original`` are views where numpy allows.
"""
from typing import Optional, Sequence, Tuple

import numpy as np

from ..errors import FormatError, OptionError

__all__ = [
    "CONVERTIBLE_FORMATS",
    "NUMPY_MAX_DIMS",
    "shape_problem",
    "to_original",
    "from_original",
    "nc1hwc0_to_nchw",
    "nchw_to_nc1hwc0",
    "ndc1hwc0_to_ncdhw",
    "ncdhw_to_ndc1hwc0",
    "fractal_z_to_nchw",
    "nchw_to_fractal_z",
    "fractal_nz_to_nd",
    "nd_to_fractal_nz",
]

#: Device formats :func:`to_original` converts; any other format is reshaped as is.
CONVERTIBLE_FORMATS = ("NC1HWC0", "NDC1HWC0", "FRACTAL_Z", "FRACTAL_NZ")

# Framework layout -> permutation from the canonical channels-first layout to it.
_FROM_NCHW = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 2, 3, 1), "HWCN": (2, 3, 1, 0)}
_FROM_NCDHW = {"NCDHW": (0, 1, 2, 3, 4), "NDHWC": (0, 2, 3, 4, 1)}
# Preference when the original format is not known: TensorFlow layouts first.
_GUESS_4D = ("NHWC", "NCHW")
_GUESS_4D_WEIGHT = ("HWCN", "NCHW", "NHWC")
_GUESS_5D = ("NDHWC", "NCDHW")


def _numpy_max_dims() -> int:
    try:
        np.empty((1,) * 64, dtype=np.uint8)
    except ValueError:
        return 32  # numpy 1.x
    return 64  # numpy 2.x


#: Most dims a numpy array may have (32 in numpy 1.x, 64 in numpy 2.x).
NUMPY_MAX_DIMS = _numpy_max_dims()
_INTP_MAX = int(np.iinfo(np.intp).max)


def shape_problem(shape: Sequence[int], itemsize: int = 1) -> Optional[str]:
    """Why numpy cannot make an array of ``shape`` with ``itemsize``-byte elements, else None.

    numpy's rules: at most :data:`NUMPY_MAX_DIMS` dims, each in [0, 2**63-1] (intp), and the
    byte count of the non-zero dims within intp even when another dim is 0.
    """
    if len(shape) > NUMPY_MAX_DIMS:
        return "has {} dims, numpy holds at most {}".format(len(shape), NUMPY_MAX_DIMS)
    nbytes = max(int(itemsize), 1)
    for dim in shape:
        dim = int(dim)
        if not 0 <= dim <= _INTP_MAX:
            return "has dim {}, outside numpy's [0, {}]".format(dim, _INTP_MAX)
        if dim:
            nbytes *= dim
            if nbytes > _INTP_MAX:
                return "needs more than {} bytes without its zero dims (numpy's limit)".format(_INTP_MAX)
    return None


def _check_shape(source: str, what: str, shape: Sequence[int], itemsize: int) -> None:
    problem = shape_problem(shape, itemsize)
    if problem is not None:
        raise _fail(source, "{} {} {}".format(what, tuple(int(v) for v in shape), problem))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _count(dims: Sequence[int]) -> int:
    # Python ints: dims come from uint64 header fields and must not overflow int64.
    total = 1
    for dim in dims:
        total *= int(dim)
    return total


def _fail(source: str, rule: str) -> FormatError:
    return FormatError(source, rule)


def _inverse(perm: Sequence[int]) -> Tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


# --- NC1HWC0 / NDC1HWC0 -------------------------------------------------------

def nc1hwc0_to_nchw(data: np.ndarray, channels: int, source: str = "<array>") -> np.ndarray:
    """(N, C1, H, W, C0) -> (N, C, H, W), dropping the C padding."""
    if data.ndim != 5 or not 0 <= channels <= data.shape[1] * data.shape[4]:
        raise _fail(source, "NC1HWC0 data of shape {} cannot hold {} channels".format(data.shape, channels))
    n, c1, h, w, c0 = data.shape
    return data.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)[:, :channels]


def nchw_to_nc1hwc0(data: np.ndarray, c0: int = 16) -> np.ndarray:
    """(N, C, H, W) -> (N, ceil(C/C0), H, W, C0), zero padded."""
    n, c, h, w = data.shape
    c1 = _ceil_div(c, c0)
    padded = np.zeros((n, c1 * c0, h, w), dtype=data.dtype)
    padded[:, :c] = data
    return np.ascontiguousarray(padded.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2))


def ndc1hwc0_to_ncdhw(data: np.ndarray, channels: int, source: str = "<array>") -> np.ndarray:
    """(N, D, C1, H, W, C0) -> (N, C, D, H, W), dropping the C padding."""
    if data.ndim != 6 or not 0 <= channels <= data.shape[2] * data.shape[5]:
        raise _fail(source, "NDC1HWC0 data of shape {} cannot hold {} channels".format(data.shape, channels))
    n, d, c1, h, w, c0 = data.shape
    return data.transpose(0, 2, 5, 1, 3, 4).reshape(n, c1 * c0, d, h, w)[:, :channels]


def ncdhw_to_ndc1hwc0(data: np.ndarray, c0: int = 16) -> np.ndarray:
    """(N, C, D, H, W) -> (N, D, ceil(C/C0), H, W, C0), zero padded."""
    n, c, d, h, w = data.shape
    c1 = _ceil_div(c, c0)
    padded = np.zeros((n, c1 * c0, d, h, w), dtype=data.dtype)
    padded[:, :c] = data
    return np.ascontiguousarray(padded.reshape(n, c1, c0, d, h, w).transpose(0, 3, 1, 4, 5, 2))


# --- FRACTAL_Z ----------------------------------------------------------------

def fractal_z_to_nchw(data: np.ndarray, nchw: Sequence[int], source: str = "<array>") -> np.ndarray:
    """(C1*H*W, N1, N0, C0) -> weights (N, C, H, W), dropping N and C padding."""
    n, c, h, w = (int(v) for v in nchw)
    if data.ndim != 4:
        raise _fail(source, "FRACTAL_Z data must be 4-D, got shape {}".format(data.shape))
    chw, n1, n0, c0 = data.shape
    c1 = _ceil_div(c, c0) if c0 else 0
    if c0 == 0 or chw != c1 * h * w or n > n1 * n0 or (n1 > 0 and n <= (n1 - 1) * n0):
        raise _fail(source, "FRACTAL_Z data of shape {} does not hold NCHW weights {}".format(data.shape, tuple(nchw)))
    full = data.reshape(c1, h, w, n1 * n0, c0).transpose(3, 0, 4, 1, 2).reshape(n1 * n0, c1 * c0, h, w)
    return full[:n, :c]


def nchw_to_fractal_z(data: np.ndarray, c0: int = 16, n0: int = 16) -> np.ndarray:
    """Weights (N, C, H, W) -> (ceil(C/C0)*H*W, ceil(N/N0), N0, C0), zero padded."""
    n, c, h, w = data.shape
    c1, n1 = _ceil_div(c, c0), _ceil_div(n, n0)
    padded = np.zeros((n1 * n0, c1 * c0, h, w), dtype=data.dtype)
    padded[:n, :c] = data
    blocks = padded.reshape(n1 * n0, c1, c0, h, w).transpose(1, 3, 4, 0, 2)  # (C1, H, W, N, C0)
    return np.ascontiguousarray(blocks).reshape(c1 * h * w, n1, n0, c0)


# --- FRACTAL_NZ ---------------------------------------------------------------

def _nz_dims(shape: Sequence[int]) -> Tuple[Tuple[int, ...], int, int]:
    dims = tuple(int(v) for v in shape)
    if len(dims) == 0:
        dims = (1, 1)
    elif len(dims) == 1:
        dims = (1,) + dims
    return dims[:-2], dims[-2], dims[-1]


def fractal_nz_to_nd(data: np.ndarray, nd_shape: Sequence[int], source: str = "<array>") -> np.ndarray:
    """(..., C1, No, Ni, C0) -> ND ``nd_shape`` (..., n, c), dropping padding."""
    _check_shape(source, "ND shape", nd_shape, data.dtype.itemsize)
    batch, n, c = _nz_dims(nd_shape)
    if data.ndim < 4:
        raise _fail(source, "FRACTAL_NZ data must have at least 4 dims, got shape {}".format(data.shape))
    c1, no, ni, c0 = data.shape[-4:]
    batch_size = _count(batch)
    data_batch = _count(data.shape[:-4])
    if data_batch != batch_size or n > no * ni or c > c1 * c0:
        raise _fail(source, "FRACTAL_NZ data of shape {} does not hold ND shape {}".format(
            data.shape, tuple(nd_shape)))
    flat = data.reshape(batch_size, c1, no, ni, c0).transpose(0, 2, 3, 1, 4).reshape(batch_size, no * ni, c1 * c0)
    return flat[:, :n, :c].reshape(tuple(int(v) for v in nd_shape))


def nd_to_fractal_nz(data: np.ndarray, c0: int = 16, ni: int = 16) -> np.ndarray:
    """ND (..., n, c) -> (..., ceil(c/C0), ceil(n/Ni), Ni, C0), zero padded."""
    batch, n, c = _nz_dims(data.shape)
    c1, no = _ceil_div(c, c0), _ceil_div(n, ni)
    batch_size = _count(batch)
    padded = np.zeros((batch_size, no * ni, c1 * c0), dtype=data.dtype)
    padded[:, :n, :c] = data.reshape(batch_size, n, c)
    blocks = padded.reshape(batch_size, no, ni, c1, c0).transpose(0, 3, 1, 2, 4)
    return np.ascontiguousarray(blocks).reshape(batch + (c1, no, ni, c0))


# --- dispatch -----------------------------------------------------------------

def _layout_dims(layout: str, original: Tuple[int, ...]) -> Tuple[int, ...]:
    """Canonical channels-first dims (NCHW or NCDHW) of ``original`` read as ``layout``."""
    perm = _FROM_NCHW.get(layout) or _FROM_NCDHW[layout]
    return tuple(original[i] for i in _inverse(perm))


def _candidates(original_format: Optional[str], table: dict, guesses: Sequence[str]) -> Sequence[str]:
    if original_format in table:
        return (original_format,)
    return guesses


def _fits_c1hwc0(data_shape: Tuple[int, ...], canon: Tuple[int, ...], spatial_first: bool) -> bool:
    # canon = (N, C, *spatial); data = (N, C1, H, W, C0) or (N, D, C1, H, W, C0)
    n, c, spatial = canon[0], canon[1], canon[2:]
    c0 = data_shape[-1]
    c1 = data_shape[2] if spatial_first else data_shape[1]
    data_spatial = (data_shape[1],) + data_shape[3:5] if spatial_first else data_shape[2:4]
    return data_shape[0] == n and c0 > 0 and c1 == _ceil_div(c, c0) and tuple(data_spatial) == tuple(spatial)


def _to_original_c1hwc0(data, original, original_format, source, six_d):
    table = _FROM_NCDHW if six_d else _FROM_NCHW
    guesses = _GUESS_5D if six_d else _GUESS_4D
    name = "NDC1HWC0" if six_d else "NC1HWC0"
    if data.ndim != (6 if six_d else 5) or len(original) != (5 if six_d else 4):
        raise _fail(source, "{} data of shape {} does not hold original shape {}".format(name, data.shape, original))
    for layout in _candidates(original_format, table, guesses):
        canon = _layout_dims(layout, original)
        if _fits_c1hwc0(data.shape, canon, six_d):
            convert = ndc1hwc0_to_ncdhw if six_d else nc1hwc0_to_nchw
            return convert(data, canon[1], source).transpose(table[layout])
    raise _fail(source, "{} data of shape {} does not hold original shape {} ({})".format(
        name, data.shape, original, original_format or "format unknown"))


def _to_original_fractal_z(data, original, original_format, source):
    if len(original) != 4 or data.ndim != 4:
        raise _fail(source, "FRACTAL_Z data of shape {} does not hold original shape {}".format(data.shape, original))
    chw, n1, n0, c0 = data.shape
    for layout in _candidates(original_format, _FROM_NCHW, _GUESS_4D_WEIGHT):
        n, c, h, w = _layout_dims(layout, original)
        if c0 and chw == _ceil_div(c, c0) * h * w and n1 == _ceil_div(n, n0 or 1):
            return fractal_z_to_nchw(data, (n, c, h, w), source).transpose(_FROM_NCHW[layout])
    raise _fail(source, "FRACTAL_Z data of shape {} does not hold original shape {} ({})".format(
        data.shape, original, original_format or "format unknown"))


def to_original(
    data: np.ndarray,
    device_format: str,
    original_shape: Sequence[int],
    original_format: Optional[str] = None,
    source: str = "<array>",
) -> np.ndarray:
    """Return ``data`` (laid out as ``device_format``) in the framework ``original_shape``.

    Formats outside :data:`CONVERTIBLE_FORMATS` are reshaped, which needs equal
    element counts. An empty ``original_shape`` (not recorded) returns ``data`` unchanged.
    """
    original = tuple(int(v) for v in original_shape)
    if not original and data.size != 1:
        return data
    _check_shape(source, "original shape", original, data.dtype.itemsize)
    if device_format in ("NC1HWC0", "NDC1HWC0"):
        result = _to_original_c1hwc0(data, original, original_format, source, device_format == "NDC1HWC0")
    elif device_format == "FRACTAL_Z":
        result = _to_original_fractal_z(data, original, original_format, source)
    elif device_format == "FRACTAL_NZ":
        result = fractal_nz_to_nd(data, original, source)
    else:
        if _count(original) != data.size:
            raise _fail(source, "{} data of shape {} cannot be reshaped to original shape {}".format(
                device_format, data.shape, original))
        return data.reshape(original)
    if result.shape != original:  # defensive: every branch above must land exactly here
        raise _fail(source, "conversion from {} gave shape {}, expected {}".format(device_format, result.shape, original))
    return result


def from_original(
    data: np.ndarray, device_format: str, original_format: str = "ND", c0: int = 16, n0: int = 16
) -> np.ndarray:
    """Lay out framework ``data`` (in ``original_format``) as ``device_format``, zero padded.

    Formats outside :data:`CONVERTIBLE_FORMATS` return ``data`` unchanged. For the
    C1HWC0 and FRACTAL_Z layouts ``original_format`` must name the framework layout.
    """
    if device_format == "FRACTAL_NZ":
        return nd_to_fractal_nz(data, c0, n0)
    if device_format in ("NC1HWC0", "FRACTAL_Z"):
        if original_format not in _FROM_NCHW:
            raise OptionError("original_format", original_format, "{} needs one of {}".format(
                device_format, sorted(_FROM_NCHW)))
        nchw = data.transpose(_inverse(_FROM_NCHW[original_format]))
        return nchw_to_nc1hwc0(nchw, c0) if device_format == "NC1HWC0" else nchw_to_fractal_z(nchw, c0, n0)
    if device_format == "NDC1HWC0":
        if original_format not in _FROM_NCDHW:
            raise OptionError("original_format", original_format, "NDC1HWC0 needs one of {}".format(
                sorted(_FROM_NCDHW)))
        return ncdhw_to_ndc1hwc0(data.transpose(_inverse(_FROM_NCDHW[original_format])), c0)
    return data
