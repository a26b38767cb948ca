"""robattr.data: digits offline, and the torchvision formats on tiny files written here."""
from __future__ import annotations

import hashlib
import pickle
import socket
import struct

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import Subset

from robattr import data
from robattr.data import DATASETS, DatasetNotFoundError, as_tensors, info, load

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck"]


@pytest.fixture(autouse=True)
def isolated_roots(tmp_path, monkeypatch):
    """No test sees this machine's data or cache folders."""
    monkeypatch.delenv("ROBATTR_DATA", raising=False)
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("robattr.data tried to use the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


# ----------------------------------------------------------------------------- writers

def write_idx(path, array):
    """An IDX file as in the MNIST distribution: big-endian header, uint8 payload."""
    array = np.asarray(array, dtype=np.uint8)
    magic = {3: 2051, 1: 2049}[array.ndim]  # images / labels
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack(f">{1 + array.ndim}I", magic, *array.shape) + array.tobytes())


def write_mnist(root, folder, n_train=20, n_test=10, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        write_idx(root / folder / "raw" / f"{prefix}-images-idx3-ubyte", images)
        write_idx(root / folder / "raw" / f"{prefix}-labels-idx1-ubyte", labels)
        arrays[prefix] = images, labels
    return arrays


def write_cifar_pickles(root, n_per_batch=2, n_test=3, seed=0):
    """cifar-10-batches-py as torchvision reads it: dicts with 'data' (N x 3072 uint8,
    channel planes R, G, B) and 'labels'; batches.meta with 'label_names'."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = {}
    names = [(f"data_batch_{i}", n_per_batch) for i in range(1, 6)] + [("test_batch", n_test)]
    for name, n in names:
        entry = {"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
                 "labels": rng.integers(0, 10, size=n).tolist(), "batch_label": name}
        (folder / name).write_bytes(pickle.dumps(entry))
        batches[name] = entry
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": CIFAR10_CLASSES}))
    return batches


def md5(path):
    return hashlib.md5(path.read_bytes()).hexdigest()


def accept_our_cifar_files(monkeypatch, root):
    """torchvision pins the md5 of the real 31 MB CIFAR batches, which synthetic files
    cannot match. We register the md5 of the files this test wrote instead, so
    torchvision's own integrity check still runs, on these files."""
    from torchvision.datasets import CIFAR10

    folder = root / "cifar-10-batches-py"
    monkeypatch.setattr(CIFAR10, "train_list",
                        [[f"data_batch_{i}", md5(folder / f"data_batch_{i}")] for i in range(1, 6)])
    monkeypatch.setattr(CIFAR10, "test_list", [["test_batch", md5(folder / "test_batch")]])
    monkeypatch.setattr(CIFAR10, "meta", {"filename": "batches.meta", "key": "label_names",
                                          "md5": md5(folder / "batches.meta")})


def write_jpg(path, color, size=(32, 32)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path, quality=95)


def colour(c, i):
    return (20 * c + 10, 200 - 15 * c, 40 + 100 * i)


def one_line(err):
    return "\n" not in str(err.value)


# ----------------------------------------------------------------------------- digits

def test_digits_splits():
    from sklearn.datasets import load_digits

    train, test = load("digits", "train"), load("digits", "test")
    assert (len(train), len(test)) == (1437, 360)
    Xtr, ytr = as_tensors(train)
    Xte, yte = as_tensors(test)
    assert Xtr.shape == (1437, 1, 8, 8) and Xtr.dtype == torch.float32 and ytr.dtype == torch.int64
    assert 0 <= Xtr.min() and Xtr.max() <= 1 and Xtr.max() == 1
    assert set(ytr.tolist()) == set(yte.tolist()) == set(range(10))
    # Train and test partition the 1797 (image, label) rows of sklearn's data set.
    full = load_digits()
    rows = lambda X, y: sorted(map(tuple, np.c_[X.reshape(len(y), -1), y].tolist()))
    ours = rows(torch.cat([Xtr, Xte]).numpy() * 16, torch.cat([ytr, yte]).numpy())
    assert ours == rows(full.images, full.target)
    # Stratified: each class is about 20% test.
    assert all(30 <= n <= 42 for n in torch.bincount(yte).tolist())
    x, y = train[0]
    assert isinstance(y, int) and x.shape == (1, 8, 8) and x.dtype == torch.float32


def test_digits_deterministic():
    a = as_tensors(load("digits", "test"))
    data._digits_arrays.cache_clear()  # rebuild the split from scratch
    b = as_tensors(load("digits", "test"))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_digits_info_matches_load():
    ds, meta = load("digits"), info("digits")
    assert meta.shape == ds.shape == (1, 8, 8)
    assert meta.classes == ds.classes == tuple("0123456789")
    assert meta.num_classes == ds.num_classes == 10
    X, _ = as_tensors(ds)
    assert meta.mean[0] == pytest.approx(X.mean().item(), abs=1e-3)
    assert meta.std[0] == pytest.approx(X.std().item(), abs=1e-3)


def test_info_needs_no_files():
    for name in DATASETS:
        meta = info(name)
        assert meta.num_classes == len(meta.classes)
        assert len(meta.mean) == len(meta.std) == meta.shape[0]
    assert info("mnist").mean == (0.1307,) and info("cifar10").std == (0.2470, 0.2435, 0.2616)
    assert info("flowers102").shape == (3, 64, 64)
    assert info("flowers102", size=128).shape == (3, 128, 128)
    with pytest.raises(ValueError, match="ImageFolder"):
        info("imagenet")


# ----------------------------------------------------------------------------- MNIST

@pytest.mark.parametrize("name, folder", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_mnist_idx_round_trip(tmp_path, name, folder, no_network):
    arrays = write_mnist(tmp_path, folder)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = arrays[prefix]
        ds = load(name, split, root=tmp_path)
        assert len(ds) == len(labels) and ds.shape == (1, 28, 28) and ds.num_classes == 10
        assert ds.name == name and ds.classes == info(name).classes
        X, y = as_tensors(ds)
        assert X.dtype == torch.float32 and X.shape == (len(labels), 1, 28, 28)
        assert torch.equal(X, torch.from_numpy(images).unsqueeze(1).float() / 255)
        assert y.tolist() == labels.tolist()
        x, y0 = ds[3]
        assert torch.equal(x, X[3]) and y0 == int(labels[3]) and isinstance(y0, int)


def test_mnist_missing_is_one_line_error(tmp_path, no_network):
    with pytest.raises(DatasetNotFoundError) as err:
        load("mnist", root=tmp_path)
    assert isinstance(err.value, FileNotFoundError) and one_line(err)
    assert str(tmp_path / "MNIST" / "raw") in str(err.value)
    assert "train-images-idx3-ubyte" in str(err.value) and "ROBATTR_DATA" in str(err.value)


def test_mnist_needs_all_four_files(tmp_path, no_network):
    write_mnist(tmp_path, "MNIST")
    (tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte").unlink()
    with pytest.raises(DatasetNotFoundError, match="train-images-idx3-ubyte"):
        load("mnist", "test", root=tmp_path)


# ----------------------------------------------------------------------------- root

def test_data_root_order(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBATTR_DATA", str(tmp_path / "env"))
    assert data.data_root(tmp_path / "arg") == tmp_path / "arg"
    assert data.data_root() == tmp_path / "env"
    monkeypatch.delenv("ROBATTR_DATA")
    assert data.data_root() == tmp_path / "cache" / "data"


def test_load_follows_root_order(tmp_path, monkeypatch, no_network):
    write_mnist(tmp_path / "arg", "MNIST", n_train=5)
    write_mnist(tmp_path / "env", "MNIST", n_train=7)
    write_mnist(tmp_path / "cache" / "data", "MNIST", n_train=9)
    monkeypatch.setenv("ROBATTR_DATA", str(tmp_path / "env"))
    assert len(load("mnist", root=tmp_path / "arg")) == 5  # argument beats ROBATTR_DATA
    assert len(load("mnist")) == 7  # ROBATTR_DATA beats the cache
    monkeypatch.delenv("ROBATTR_DATA")
    assert len(load("mnist")) == 9
    monkeypatch.setenv("ROBATTR_DATA", str(tmp_path / "empty"))
    with pytest.raises(DatasetNotFoundError, match="empty"):
        load("mnist")


# ----------------------------------------------------------------------------- CIFAR-10

def test_cifar10_pickles(tmp_path, monkeypatch, no_network):
    batches = write_cifar_pickles(tmp_path)
    accept_our_cifar_files(monkeypatch, tmp_path)
    train, test = load("cifar10", "train", root=tmp_path), load("cifar10", "test", root=tmp_path)
    assert (len(train), len(test)) == (10, 3) and train.shape == (3, 32, 32)
    assert train.classes == tuple(CIFAR10_CLASSES)
    X, y = as_tensors(test)
    expected = batches["test_batch"]["data"].reshape(-1, 3, 32, 32)  # R, G, B planes
    assert torch.equal(X, torch.from_numpy(expected).float() / 255)
    assert y.tolist() == batches["test_batch"]["labels"]
    first = batches["data_batch_1"]
    x, label = train[1]
    assert torch.equal(x * 255, torch.from_numpy(first["data"][1].reshape(3, 32, 32)).float())
    assert label == first["labels"][1]


def test_cifar10_corrupt_pickles(tmp_path, no_network):
    write_cifar_pickles(tmp_path)  # torchvision's real md5 sums cannot match these
    with pytest.raises(DatasetNotFoundError, match="md5") as err:
        load("cifar10", root=tmp_path)
    assert one_line(err) and str(tmp_path / "cifar-10-batches-py") in str(err.value)


def test_cifar10_jpg_fallback(tmp_path, no_network):
    for split, n in (("train", 2), ("test", 1)):
        for c, cls in enumerate(CIFAR10_CLASSES):
            for i in range(n):
                write_jpg(tmp_path / "cifar10-jpg" / split / cls / f"{i:04d}.jpg", colour(c, i))
    train = load("cifar10", "train", root=tmp_path)
    assert len(train) == 20 and len(load("cifar10", "test", root=tmp_path)) == 10
    assert train.shape == (3, 32, 32) and train.classes == tuple(CIFAR10_CLASSES)
    X, y = as_tensors(train)
    assert X.shape == (20, 3, 32, 32) and X.dtype == torch.float32
    assert 0 <= X.min() and X.max() <= 1
    # Interleaved over classes: every class's image 0, then every class's image 1.
    assert y.tolist() == list(range(10)) * 2
    for k in (0, 13):
        c, i = k % 10, k // 10
        want = torch.tensor(colour(c, i), dtype=torch.float32).view(3, 1, 1) / 255
        assert (X[k] - want).abs().max() <= 3 / 255  # JPEG of a flat colour: near exact


def test_cifar10_jpg_wrong_classes(tmp_path):
    write_jpg(tmp_path / "cifar10-jpg" / "train" / "cats" / "0000.jpg", (1, 2, 3))
    with pytest.raises(ValueError, match="CIFAR-10"):
        load("cifar10", root=tmp_path)


def test_cifar10_missing(tmp_path, no_network):
    with pytest.raises(DatasetNotFoundError) as err:
        load("cifar10", "test", root=tmp_path)
    msg = str(err.value)
    assert one_line(err) and str(tmp_path) in msg
    assert "cifar-10-batches-py" in msg and "cifar10-jpg/test" in msg


# ----------------------------------------------------------------------------- Flowers102

def test_flowers102(tmp_path, monkeypatch, no_network):
    from scipy.io import savemat
    from torchvision.datasets import Flowers102

    folder = tmp_path / "flowers-102"
    for k in range(1, 8):
        write_jpg(folder / "jpg" / f"image_{k:05d}.jpg", colour(k, 0), size=(50, 40))
    savemat(folder / "imagelabels.mat", {"labels": np.array([[3, 1, 2, 3, 102, 1, 7]])})
    savemat(folder / "setid.mat", {"trnid": np.array([[1, 2, 3]]), "valid": np.array([[4, 5]]),
                                   "tstid": np.array([[6, 7]])})
    # (Each split needs >= 2 ids: torchvision's loadmat(squeeze_me=True) turns one into an int.)
    # As for CIFAR: register the md5 of the .mat files written here in place of the real ones.
    monkeypatch.setattr(Flowers102, "_file_dict", {
        "image": Flowers102._file_dict["image"],
        "label": ("imagelabels.mat", md5(folder / "imagelabels.mat")),
        "setid": ("setid.mat", md5(folder / "setid.mat"))})
    train = load("flowers102", root=tmp_path)
    X, y = as_tensors(train)
    assert X.shape == (3, 3, 64, 64) and y.tolist() == [2, 0, 1]
    assert train.num_classes == 102 and train.shape == (3, 64, 64) == info("flowers102").shape
    val = load("flowers102", "val", root=tmp_path, size=16)
    assert val.shape == (3, 16, 16) and val[1][0].shape == (3, 16, 16) and val[1][1] == 101
    assert as_tensors(load("flowers102", "test", root=tmp_path))[1].tolist() == [0, 6]


def test_flowers102_missing(tmp_path, no_network):
    with pytest.raises(DatasetNotFoundError, match="setid.mat") as err:
        load("flowers102", root=tmp_path)
    assert one_line(err) and str(tmp_path / "flowers-102") in str(err.value)


# ----------------------------------------------------------------------------- ImageFolder

def write_folder(root, classes=("cat", "dog"), n=2, size=(40, 30)):
    for c, cls in enumerate(classes):
        for i in range(n):
            write_jpg(root / cls / f"{i}.jpg", colour(c, i), size=size)


def test_image_folder_with_splits(tmp_path):
    write_folder(tmp_path / "pets" / "train", n=3)
    write_folder(tmp_path / "pets" / "test", n=1)
    path = str(tmp_path / "pets")
    train = load(path, "train", size=16)
    assert len(train) == 6 and len(load(path, "test", size=16)) == 2
    assert train.classes == ("cat", "dog") and train.shape == (3, 16, 16)
    X, y = as_tensors(train)
    assert X.shape == (6, 3, 16, 16) and y.tolist() == [0, 1, 0, 1, 0, 1]
    assert 0 <= X.min() and X.max() <= 1
    meta = info(path, size=16)
    assert (meta.classes, meta.shape, meta.num_classes) == (train.classes, train.shape, 2)
    assert load(path)[0][0].shape == info(path).shape == (3, 224, 224)
    with pytest.raises(DatasetNotFoundError, match="val"):
        load(path, "val")


def test_image_folder_without_splits(tmp_path):
    write_folder(tmp_path / "flat", classes=("a", "b", "c"), n=1, size=(20, 20))
    ds = load(str(tmp_path / "flat"), "test", size=8)
    assert len(ds) == 3 and ds.classes == ("a", "b", "c") and ds[2][0].shape == (3, 8, 8)


# ----------------------------------------------------------------------------- bad input

def test_bad_split_and_name(tmp_path):
    with pytest.raises(ValueError, match="'train', 'test'") as err:
        load("digits", "val")
    assert "'val'" in str(err.value)
    with pytest.raises(ValueError, match="'train', 'val', 'test'"):
        load("flowers102", "valid", root=tmp_path)
    with pytest.raises(ValueError) as err:
        load("imagenet")
    assert all(name in str(err.value) for name in DATASETS) and "ImageFolder" in str(err.value)
    with pytest.raises(ValueError, match="size"):
        load("digits", size=28)


# ----------------------------------------------------------------------------- batches

def test_as_tensors_fast_path_matches_items():
    ds = load("digits", "test")
    X, y = as_tensors(ds, n=50, device="cpu")
    assert torch.equal(X, torch.stack([ds[i][0] for i in range(50)]))
    assert y.tolist() == [ds[i][1] for i in range(50)]
    sub = Subset(ds, [5, 3, 1])
    Xs, ys = as_tensors(sub)
    assert torch.equal(Xs, X[[5, 3, 1]]) and torch.equal(ys, y[[5, 3, 1]])
    assert as_tensors(ds, n=10_000)[0].shape[0] == len(ds)


def test_loader_is_seeded():
    ds = load("digits", "test")
    order = lambda seed: torch.cat([yb for _, yb in data.loader(ds, 64, shuffle=True, seed=seed)])
    first = [xb for xb, _ in data.loader(ds, 64, shuffle=True, seed=1)][0]
    assert first.shape == (64, 1, 8, 8) and first.dtype == torch.float32
    assert torch.equal(order(1), order(1)) and not torch.equal(order(1), order(2))
    assert sorted(order(1).tolist()) == sorted(as_tensors(ds)[1].tolist())
    # The in-memory fast path draws the same order as a plain DataLoader of the same seed.
    plain = torch.utils.data.DataLoader(Subset(ds, range(len(ds))), batch_size=64, shuffle=True,
                                        generator=torch.Generator().manual_seed(1))
    assert torch.equal(torch.cat([yb for _, yb in plain]), order(1))
    assert torch.equal(torch.cat([yb for _, yb in data.loader(ds, 100)]), as_tensors(ds)[1])


# ----------------------------------------------------------------------------- photos

def test_sample_images():
    images, names = data.sample_images()
    assert images.ndim == 4 and images.shape[1:] == (3, 224, 224) and len(names) == len(images)
    assert images.dtype == torch.float32 and 0 <= images.min() and images.max() <= 1
    assert {"china", "flower"} <= set(names)
    assert data.sample_images(size=32)[0].shape[1:] == (3, 32, 32)


def test_cifar10_jpg_is_decoded_once_and_cached_by_its_files(tmp_path, monkeypatch):
    """The JPEG copy is decoded on first use into a cached uint8 tensor; a changed file
    makes a new key, an unreadable cache is decoded again."""
    import os

    from robattr import data

    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    for c, cls in enumerate(CIFAR10_CLASSES):
        write_jpg(tmp_path / "cifar10-jpg" / "train" / cls / "0000.jpg", colour(c, 0))
    first = load("cifar10", "train", root=tmp_path)
    assert isinstance(first, data.InMemoryDataset) and first.images.dtype == torch.uint8
    cached = sorted((tmp_path / "cache" / "decoded").glob("cifar10-jpg-train-*.pt"))
    assert len(cached) == 1
    calls = []
    monkeypatch.setattr(data, "_read_rgb", lambda p: calls.append(p))   # must not decode
    again = load("cifar10", "train", root=tmp_path)
    assert calls == [] and torch.equal(again.images, first.images)
    monkeypatch.undo()
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    changed = tmp_path / "cifar10-jpg" / "train" / CIFAR10_CLASSES[3] / "0000.jpg"
    write_jpg(changed, (250, 250, 250))
    os.utime(changed, ns=(1, 1))
    third = load("cifar10", "train", root=tmp_path)
    assert len(list((tmp_path / "cache" / "decoded").glob("*.pt"))) == 2
    assert int(third.images[3].float().mean()) > 240
    newest = max((tmp_path / "cache" / "decoded").glob("*.pt"), key=lambda p: p.stat().st_mtime)
    newest.write_bytes(b"not a tensor file")                    # unreadable: decoded again
    assert torch.equal(load("cifar10", "train", root=tmp_path).images, third.images)


def test_robattr_data_fetch_downloads_both_splits_and_lists(monkeypatch, tmp_path, capsys):
    """`robattr data fetch` is the command-line way to download=True (no network in the
    tests: the loader is replaced, the command's own work is checked)."""
    from robattr import data
    from robattr.book import cli

    calls = []

    def fake_load(name, split, root=None, download=False):
        calls.append((name, split, str(root), download))
        return [0] * 3

    monkeypatch.setattr(data, "load", fake_load)
    assert cli.main(["data", "fetch", "mnist", "cifar10", "--data-root", str(tmp_path)]) == 0
    assert calls == [(n, s, str(tmp_path), True) for n in ("mnist", "cifar10")
                     for s in ("train", "test")]
    assert cli.main(["data", "fetch", "imagenet"]) == 2
    assert "cannot fetch imagenet" in capsys.readouterr().err
    assert cli.main(["data", "list", "--data-root", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "digits" in listed and "mnist          missing" in listed
    with pytest.raises(DatasetNotFoundError, match="robattr data fetch mnist"):
        load("mnist", root=tmp_path)
