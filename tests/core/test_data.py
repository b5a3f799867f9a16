import numpy as np
import pytest

from implicit_bias.core.engine import data
from implicit_bias.core.engine.data import DataError


def fake_dataset(root, dataset="mnist", n=3):
    """Write a tiny idx dataset and point the checksums at it."""
    folder = root / dataset
    folder.mkdir(parents=True)
    sums = {}
    for prefix, count in (("train", n), ("t10k", n - 1)):
        images = np.arange(count * 784, dtype=np.uint32).reshape(count, 784) % 256
        header = bytes([0, 0, 8, 3]) + count.to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
        (folder / f"{prefix}-images-idx3-ubyte").write_bytes(
            header + images.astype(np.uint8).tobytes()
        )
        labels = np.arange(count, dtype=np.uint8)
        (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(
            bytes([0, 0, 8, 1]) + count.to_bytes(4, "big") + labels.tobytes()
        )
    for path in folder.iterdir():
        sums[path.name] = data.sha256(path)
    return sums


@pytest.fixture
def tiny_mnist(tmp_path, monkeypatch):
    sums = fake_dataset(tmp_path)
    monkeypatch.setitem(data.CHECKSUMS, "mnist", sums)
    monkeypatch.setenv("IMPLICIT_BIAS_DATA", str(tmp_path))
    data._load.cache_clear()
    yield tmp_path
    data._load.cache_clear()


def test_load_parses_idx_to_floats(tiny_mnist):
    X, y = data.load_mnist("train")
    assert X.shape == (3, 784) and X.dtype == np.float32
    assert 0.0 <= X.min() and X.max() <= 1.0
    assert X[0, 1] == pytest.approx(1 / 255)
    assert y.tolist() == [0, 1, 2] and y.dtype == np.int64
    assert data.load_mnist("test")[0].shape == (2, 784)
    with pytest.raises(ValueError, match="split"):
        data.load_mnist("validation")


def test_corrupted_byte_is_detected(tiny_mnist):
    path = tiny_mnist / "mnist" / "train-images-idx3-ubyte"
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="corrupted.*make data"):
        data.load_mnist("train")


def test_missing_file_names_the_fix(tiny_mnist):
    (tiny_mnist / "mnist" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DataError, match="missing file.*make data"):
        data.verify("mnist")


def test_fetch_keeps_verified_copy(tiny_mnist, capsys):
    assert data.fetch("mnist") == tiny_mnist / "mnist"
    assert "present and verified" in capsys.readouterr().out


def test_install_rejects_wrong_hash(tiny_mnist, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train-images-idx3-ubyte").write_bytes(b"not mnist")
    with pytest.raises(DataError, match="does not match"):
        data._install_verified(
            "mnist", {"train-images-idx3-ubyte": src / "train-images-idx3-ubyte"}, tmp_path / "out"
        )


def test_unknown_dataset():
    with pytest.raises(ValueError, match="valid: mnist, fashion_mnist"):
        data.verify("cifar")


def test_binary_labels_and_subsets():
    y = np.array([0, 4, 5, 9, 3])
    assert data.binary_labels(y).tolist() == [-1, -1, 1, 1, -1]
    assert data.binary_labels(y, positive=[0]).tolist() == [1, -1, -1, -1, -1]
    a = data.seeded_subset(100, 10, seed=3)
    assert np.array_equal(a, data.seeded_subset(100, 10, seed=3))
    assert not np.array_equal(a, data.seeded_subset(100, 10, seed=4))
    b = data.seeded_subset(100, 20, seed=0, exclude=a)
    assert len(set(a) & set(b)) == 0 and len(set(b)) == 20
    with pytest.raises(ValueError):
        data.seeded_subset(10, 11, seed=0)


@pytest.mark.parametrize("dataset", data.DATASETS)
def test_real_datasets_verified(dataset):
    """The real files fetched by `make data` are complete and intact."""
    data.verify(dataset)
    X, y = (data.load_mnist if dataset == "mnist" else data.load_fashion_mnist)("test")
    assert X.shape == (10000, 784) and set(np.unique(y)) == set(range(10))
