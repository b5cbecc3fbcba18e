"""CIFAR-10 binary parsing (on small archives in the same format, written here) and the batched VGG-11."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest
import torch

from hetfl.data import cifar10
from hetfl.errors import DataUnavailableError
from hetfl.models.vgg import VGG11


def _records(n: int, rng) -> tuple[bytes, np.ndarray, np.ndarray]:
    y = rng.integers(0, 10, size=n).astype(np.uint8)
    x = rng.integers(0, 256, size=(n, 3, 32, 32)).astype(np.uint8)
    raw = b"".join(bytes([label]) + img.tobytes() for label, img in zip(y, x, strict=True))
    return raw, x, y


def _archive(path, parts: dict[str, bytes]):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in parts.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_parse_records_layout():
    rng = np.random.default_rng(0)
    raw, x, y = _records(3, rng)
    px, py = cifar10.parse_records(raw)
    assert px.shape == (3, 3, 32, 32) and np.array_equal(px, x) and np.array_equal(py, y)
    assert px[1, 2, 31, 0] == raw[cifar10.RECORD + 1 + 2 * 1024 + 31 * 32]  # blue plane, row 31, col 0
    with pytest.raises(ValueError, match="multiple of 3073"):
        cifar10.parse_records(raw[:-1])
    with pytest.raises(ValueError, match="labels"):
        cifar10.parse_records(bytes([10]) + raw[1 : cifar10.RECORD])


def test_archive_read_in_member_order_and_checksum(tmp_path):
    rng = np.random.default_rng(1)
    parts, xs, ys = {}, [], []
    for member in reversed(cifar10.MEMBERS):  # stored out of order: read in MEMBERS order
        raw, x, y = _records(2, rng)
        parts[member] = raw
    for member in cifar10.MEMBERS:
        x, y = cifar10.parse_records(parts[member])
        xs.append(x)
        ys.append(y)
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    path = raw_dir / cifar10.FILENAME
    _archive(path, parts)
    x, y = cifar10.read_archive(path)
    assert (
        x.shape == (12, 3, 32, 32)
        and np.array_equal(x, np.concatenate(xs))
        and np.array_equal(y, np.concatenate(ys))
    )
    from hetfl.data.download import sha256_file

    digest = sha256_file(path)
    assert (
        cifar10.fetch(raw_dir, url="http://127.0.0.1:9/none", sha256=digest) == path.resolve()
    )  # no network
    with pytest.raises(DataUnavailableError, match=cifar10.SHA256):  # the real checksum: refused
        cifar10.fetch(raw_dir, url="http://127.0.0.1:9/none")
    _archive(path, {cifar10.MEMBERS[0]: parts[cifar10.MEMBERS[0]]})
    with pytest.raises(ValueError, match="no member"):
        cifar10.read_archive(path)


@pytest.mark.parametrize("width", [8, 16])
def test_vgg11_batched_matches_its_module(width):
    model = VGG11((3, 32, 32), 10, width=width)
    assert model.convs == [width, 2 * width, 4 * width, 4 * width, 8 * width, 8 * width, 8 * width, 8 * width]
    g = torch.Generator().manual_seed(0)
    init = model.init(g, torch.float64)
    params = {
        k: torch.cat([v, v + 0.01 * torch.randn(v.shape, generator=g, dtype=v.dtype)])
        for k, v in init.items()
    }
    x = torch.randn(2, 3, 3, 32, 32, generator=g, dtype=torch.float64)
    logits = model.forward(params, x)
    assert logits.shape == (2, 10, 3)
    for c in range(2):
        module = model.reference_module().double()
        module.load_state_dict({k: v[c] for k, v in params.items()})
        torch.testing.assert_close(logits[c].T, module(x[c]), rtol=0, atol=1e-10)
    y = torch.randint(0, 10, (2, 3), generator=g)
    _, grads = model.loss_grads(params, x, y, None)
    module = model.reference_module().double()
    module.load_state_dict({k: v[1] for k, v in params.items()})
    loss = torch.nn.functional.cross_entropy(module(x[1]), y[1])
    ref = torch.autograd.grad(loss, list(module.parameters()))
    for (name, _), g_ref in zip(module.named_parameters(), ref, strict=True):
        torch.testing.assert_close(grads[name][1], g_ref, rtol=0, atol=1e-10)


def test_vgg11_full_size_and_bad_inputs():
    # VGG-11 for CIFAR-10, 9.75 M parameters (docs/papers/fedminimax.md §4.6)
    assert VGG11((3, 32, 32), 10).num_parameters() == 9_750_922
    with pytest.raises(ValueError, match="32x32"):
        VGG11((1, 28, 28), 10)
    with pytest.raises(ValueError, match="multiple of 8"):
        VGG11((3, 32, 32), 10, width=12)


def test_plugin_interface(tmp_path, monkeypatch):
    """The registry's plug-in functions: options, info without data, load from a verified archive."""
    spec = {"name": "cifar10", "normalize": "unit"}
    assert cifar10.CIFAR10.Options.names() == ["normalize"]
    info = cifar10.CIFAR10.info(spec)
    assert info.num_samples == 60_000 and info.sample_shape == (3, 32, 32) and info.num_classes == 10
    rng = np.random.default_rng(2)
    parts = {m: _records(1, rng)[0] for m in cifar10.MEMBERS}
    (tmp_path / "raw").mkdir()
    _archive(tmp_path / "raw" / cifar10.FILENAME, parts)
    from hetfl.data.download import sha256_file

    monkeypatch.setattr(cifar10, "SHA256", sha256_file(tmp_path / "raw" / cifar10.FILENAME))
    monkeypatch.setattr(cifar10.fetch, "__defaults__", (cifar10.URL, cifar10.SHA256))
    ds = cifar10.CIFAR10.load(spec, tmp_path)
    assert ds.x.shape == (6, 3, 32, 32) and 0.0 <= ds.x.min() and ds.x.max() <= 1.0
