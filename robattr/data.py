"""Datasets with pixels in [0, 1].

Every dataset yields ``(x, y)``: ``x`` a float32 tensor ``C x H x W`` in [0, 1] and ``y`` a
Python int. Normalization is a layer inside the models (fed by :func:`info`'s ``mean`` and
``std``), so every epsilon in the book is in pixel units.

Datasets (``split`` is ``"train"`` or ``"test"``; flowers102 and folders also ``"val"``):

``digits``         scikit-learn's 8x8 handwritten digits (1797 images, 10 classes), split
                   80/20, stratified, ``random_state=0``. Ships with scikit-learn: works offline.
``mnist``          MNIST 1x28x28 (60000/10000), via torchvision: ``<root>/MNIST/raw/``.
``fashion_mnist``  Fashion-MNIST 1x28x28 (60000/10000): ``<root>/FashionMNIST/raw/``.
``cifar10``        CIFAR-10 3x32x32 (50000/10000): ``<root>/cifar-10-batches-py/`` (the
                   original pickles), else an ImageFolder tree
                   ``<root>/cifar10-jpg/{train,test}/<class>/*.jpg``.
``flowers102``     Oxford 102 Flowers, resized and center-cropped to ``size`` (default 64):
                   ``<root>/flowers-102/``.
a folder path      ``torchvision.datasets.ImageFolder`` on ``<path>/<split>`` (or ``<path>`` when
                   it has no split folders), RGB, resized and center-cropped to ``size``
                   (default 224).

The JPEG copy of CIFAR-10 (``cifar10-jpg``) is decoded once, on first use, into a uint8
tensor cached under ``cache_dir()/"decoded"`` and keyed by its files' names, sizes and
modification times (:func:`decoded_folder`); it is then an in-memory dataset like the
others. Images of other ImageFolder trees are decoded on access. The order of a folder's
images is interleaved over classes (each class's first image, then each class's second, ...) so
that "the first n test images" are not all of one class. In-memory datasets keep the
original order.

The data root is the ``root`` argument, else ``$ROBATTR_DATA``, else
``robattr.utils.cache_dir() / "data"``. Nothing is downloaded unless ``download=True``;
missing files raise :class:`DatasetNotFoundError` with a one-line message that says
where the files were looked for.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import (BatchSampler, DataLoader, Dataset, RandomSampler,
                              SequentialSampler, Subset)

from robattr import context
from robattr.catalog import DATASETS
from robattr.utils import cache_dir, get_device

__all__ = [
    "DATASETS", "DatasetInfo", "DatasetNotFoundError", "InMemoryDataset", "FileDataset",
    "decoded_folder",
    "info", "load", "data_root", "as_tensors", "loader", "sample_images", "available",
]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck")
FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                   "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
DIGIT_CLASSES = tuple(str(d) for d in range(10))
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_CIFAR_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch", "batches.meta")
_FLOWERS_FILES = ("jpg/", "imagelabels.mat", "setid.mat")
_NATIVE_SIZE = {"digits": 8, "mnist": 28, "fashion_mnist": 28, "cifar10": 32}
_HINT = ("(set ROBATTR_DATA or pass root=...; with a network, `robattr data fetch NAME` "
         "or download=True)")


class DatasetNotFoundError(FileNotFoundError):
    """The files of a dataset are not where :func:`load` looked for them."""


@dataclass(frozen=True)
class DatasetInfo:
    """What a model needs to know about a dataset, without loading it."""

    name: str
    shape: tuple  # (C, H, W)
    num_classes: int
    classes: tuple
    mean: tuple  # per channel, on [0, 1] pixels
    std: tuple


# ----------------------------------------------------------------------------- datasets

class InMemoryDataset(Dataset):
    """Images held in memory as integers; ``x = images[i] / scale`` on access.

    Indexing with a list or tensor of indices returns a whole batch ``(X, y)`` at once,
    which :func:`loader` and :func:`as_tensors` use to skip the per-item loop.
    """

    def __init__(self, name: str, images: torch.Tensor, targets: torch.Tensor,
                 classes, scale: float = 255.0):
        self.name, self.classes, self.scale = name, tuple(classes), scale
        self.images = images  # N x C x H x W, uint8
        self.targets = targets.long()
        self.shape = tuple(images.shape[1:])
        self.num_classes = len(self.classes)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index):
        x = self.images[index].float().div_(self.scale)
        y = self.targets[index]
        return (x, int(y)) if y.ndim == 0 else (x, y)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, n={len(self)}, shape={self.shape})"


class FileDataset(Dataset):
    """Images decoded from files on access (a torchvision dataset ``base`` whose
    transform already returns float tensors in [0, 1])."""

    def __init__(self, name: str, base: Dataset, classes, shape):
        self.name, self.base, self.classes, self.shape = name, base, tuple(classes), tuple(shape)
        self.num_classes = len(self.classes)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index):
        x, y = self.base[index]
        return x, int(y)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, n={len(self)}, shape={self.shape})"


class _ToTensor:
    """PIL image or uint8 tensor -> float tensor in [0, 1], resized (short side) and
    center-cropped to ``size`` when given. A class, so DataLoader workers can pickle it."""

    def __init__(self, size: int | None):
        self.size = size

    def __call__(self, img):
        from torchvision.transforms import functional as F

        if not isinstance(img, torch.Tensor):
            img = F.pil_to_tensor(img)
        if self.size is not None:
            img = F.center_crop(F.resize(img, self.size, antialias=True), self.size)
        return img.float().div_(255).clamp_(0, 1)


def _read_rgb(path) -> torch.Tensor:
    """Decode an image file to a uint8 RGB tensor (torchvision.io; about 2x PIL's speed)."""
    from torchvision.io import ImageReadMode, decode_image

    return decode_image(path, mode=ImageReadMode.RGB)


def _interleave_classes(folder) -> None:
    """Reorder an ImageFolder's samples round-robin over its classes (first image of each
    class, then the second, ...), so that the first n items are not all of one class."""
    rank, keyed = {}, []
    for path, c in folder.samples:
        rank[c] = rank.get(c, -1) + 1
        keyed.append((rank[c], c, path))
    folder.samples = folder.imgs = [(path, c) for _, c, path in sorted(keyed)]
    folder.targets = [c for _, c in folder.samples]


# ----------------------------------------------------------------------------- info

def info(name: str, size: int | None = None) -> DatasetInfo:
    """Shape, classes and normalization constants of a dataset, without loading it
    (digits' mean/std are computed once from its training split; a folder is listed)."""
    if name == "digits":
        mean, std = _digits_stats()
        return DatasetInfo("digits", (1, 8, 8), 10, DIGIT_CLASSES, (mean,), (std,))
    if name == "mnist":
        return DatasetInfo("mnist", (1, 28, 28), 10, DIGIT_CLASSES, (0.1307,), (0.3081,))
    if name == "fashion_mnist":
        return DatasetInfo("fashion_mnist", (1, 28, 28), 10, FASHION_CLASSES,
                           (0.2860,), (0.3530,))
    if name == "cifar10":
        return DatasetInfo("cifar10", (3, 32, 32), 10, CIFAR10_CLASSES,
                           (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
    if name == "flowers102":
        from torchvision.datasets import Flowers102

        size = size or 64
        return DatasetInfo("flowers102", (3, size, size), 102, tuple(Flowers102.classes),
                           IMAGENET_MEAN, IMAGENET_STD)
    path = _folder(name)
    from torchvision.datasets.folder import find_classes

    sub = next((path / s for s in ("train", "val", "test") if (path / s).is_dir()), path)
    classes = tuple(find_classes(sub)[0])
    size = size or 224
    return DatasetInfo(str(name), (3, size, size), len(classes), classes,
                       IMAGENET_MEAN, IMAGENET_STD)


# ----------------------------------------------------------------------------- load

def load(name: str, split: str = "train", root=None, download: bool = False,
         size: int | None = None) -> Dataset:
    """Load one split of a dataset (see the module docstring for names and file layout).

    Items are ``(x, y)`` with ``x`` float32 ``C x H x W`` in [0, 1] and ``y`` an int; the
    result also has ``.name``, ``.classes``, ``.num_classes`` and ``.shape``.
    """
    if name not in DATASETS:
        path = _folder(name)
        _check_split(name, split, ("train", "val", "test"))
        return _load_folder(name, path, split, size or 224)
    splits = ("train", "val", "test") if name == "flowers102" else ("train", "test")
    _check_split(name, split, splits)
    if name == "flowers102":
        return _load_flowers102(split, data_root(root), download, size or 64)
    _check_size(name, size, _NATIVE_SIZE[name])
    if name == "digits":
        return _load_digits(split)
    if name == "cifar10":
        return _load_cifar10(split, data_root(root), download)
    return _load_mnist(name, split, data_root(root), download)


def data_root(root=None) -> Path:
    """Where datasets live: ``root``, else ``$ROBATTR_DATA``, else ``cache_dir()/"data"``."""
    if root is None:
        root = context.current().data or Path(cache_dir()) / "data"
    return Path(root).expanduser()


def _check_split(name, split, valid):
    if split not in valid:
        raise ValueError(f"split must be one of {', '.join(map(repr, valid))} for {name}, "
                         f"got {split!r}")


def _check_size(name, size, native):
    if size is not None and size != native:
        raise ValueError(f"{name} images are {native}x{native}; size={size} applies only to "
                         f"flowers102 and ImageFolder paths")


def _folder(name) -> Path:
    if isinstance(name, (str, os.PathLike)) and os.path.isdir(os.path.expanduser(name)):
        return Path(name).expanduser()
    raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(DATASETS)}, "
                     f"or the path of an existing ImageFolder directory")


def _not_found(name, folder, expected, extra=""):
    return DatasetNotFoundError(f"{name} not found in {folder}{extra}: expected "
                                f"{', '.join(expected)} {_HINT.replace('NAME', name)}")


@functools.lru_cache(maxsize=None)
def _digits_arrays():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = torch.from_numpy(digits.images.astype(np.uint8)).unsqueeze(1)  # 0..16
    targets = torch.from_numpy(digits.target).long()
    train, test = train_test_split(np.arange(len(targets)), test_size=0.2,
                                   stratify=digits.target, random_state=0)
    return images, targets, {"train": np.sort(train), "test": np.sort(test)}


@functools.lru_cache(maxsize=None)
def _digits_stats():
    images, _, idx = _digits_arrays()
    x = images[idx["train"]].double() / 16
    return round(x.mean().item(), 4), round(x.std(unbiased=False).item(), 4)


def _load_digits(split):
    images, targets, idx = _digits_arrays()
    i = torch.from_numpy(idx[split])
    return InMemoryDataset("digits", images[i], targets[i], DIGIT_CLASSES, scale=16.0)


def _load_mnist(name, split, root, download):
    from torchvision import datasets

    cls = datasets.MNIST if name == "mnist" else datasets.FashionMNIST
    raw = root / cls.__name__ / "raw"
    # torchvision reads the four uncompressed files and wants all of them.
    if not download and not all((raw / f).is_file() for f in _MNIST_FILES):
        raise _not_found(name, raw, _MNIST_FILES)
    base = _call_torchvision(name, raw, _MNIST_FILES, cls, str(root),
                             train=split == "train", download=download)
    classes = DIGIT_CLASSES if name == "mnist" else FASHION_CLASSES
    return InMemoryDataset(name, base.data.unsqueeze(1), base.targets, classes)


def _load_cifar10(split, root, download):
    from torchvision import datasets

    pickles, jpgs = root / "cifar-10-batches-py", root / "cifar10-jpg" / split
    if jpgs.is_dir() and not pickles.is_dir():
        # The JPEG ImageFolder copy (lossy); its alphabetic class order is CIFAR-10's.
        base = datasets.ImageFolder(str(jpgs), transform=_ToTensor(None), loader=_read_rgb)
        _interleave_classes(base)
        if tuple(base.classes) != CIFAR10_CLASSES:
            raise ValueError(f"{jpgs} has class folders {base.classes}, "
                             f"expected CIFAR-10's {list(CIFAR10_CLASSES)}")
        images, targets = decoded_folder(base, f"cifar10-jpg-{split}", (3, 32, 32))
        return InMemoryDataset("cifar10", images, targets, CIFAR10_CLASSES)
    if pickles.is_dir() or download:
        base = _call_torchvision("cifar10", pickles, _CIFAR_FILES, datasets.CIFAR10, str(root),
                                 train=split == "train", download=download)
        images = torch.from_numpy(base.data).permute(0, 3, 1, 2).contiguous()
        return InMemoryDataset("cifar10", images, torch.tensor(base.targets), base.classes)
    raise _not_found("cifar10", root, ["cifar-10-batches-py/{data_batch_1..5,test_batch,"
                                       "batches.meta}", f"or cifar10-jpg/{split}/<class>/*.jpg"])


def _load_flowers102(split, root, download, size):
    from torchvision import datasets

    folder = root / "flowers-102"
    present = (folder / "jpg").is_dir() and all(
        (folder / f).is_file() for f in _FLOWERS_FILES[1:])
    if not download and not present:
        raise _not_found("flowers102", folder, _FLOWERS_FILES)
    base = _call_torchvision("flowers102", folder, _FLOWERS_FILES, datasets.Flowers102,
                             str(root), split=split, download=download,
                             transform=_ToTensor(size))
    return FileDataset("flowers102", base, base.classes, (3, size, size))


def _load_folder(name, path, split, size):
    from torchvision.datasets import ImageFolder

    splits = [s for s in ("train", "val", "test") if (path / s).is_dir()]
    if splits and split not in splits:
        raise DatasetNotFoundError(f"{path / split} not found: {path} has split folders "
                                   f"{', '.join(splits)} only")
    base = ImageFolder(str(path / split if splits else path), transform=_ToTensor(size))
    _interleave_classes(base)
    return FileDataset(str(name), base, base.classes, (3, size, size))


def decoded_folder(base, name: str, shape) -> tuple[torch.Tensor, torch.Tensor]:
    """The images of an ImageFolder ``base`` (every one of ``shape``, read by
    :func:`_read_rgb`) as one uint8 tensor ``N x C x H x W`` and their targets, in the
    folder's sample order: decoded once and cached under ``cache_dir()/"decoded"``, keyed
    by the files' relative paths, sizes and modification times and the sample order (a
    changed, added or removed file makes a new key). Decoding 60,000 CIFAR-10 JPEGs takes
    about 20 s on one core; loading the cache well under a second."""
    import hashlib

    from tqdm.auto import tqdm

    root = Path(base.root)
    h = hashlib.sha256(repr(tuple(shape)).encode())
    for path, c in base.samples:
        st = os.stat(path)
        h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\0{c}\n"
                 .encode())
    cache = Path(cache_dir()) / "decoded" / f"{name}-{h.hexdigest()[:20]}.pt"
    if cache.is_file():
        try:
            stored = torch.load(cache, weights_only=True)
            if tuple(stored["images"].shape) == (len(base.samples), *shape):
                return stored["images"], stored["targets"]
        except Exception:                                 # unreadable (torch.load raises
            pass                                          # several types): decode again
    images = torch.empty((len(base.samples), *shape), dtype=torch.uint8)
    for i, (path, _) in enumerate(tqdm(base.samples, desc=f"decoding {name} (once)",
                                       unit="image", leave=False, disable=None)):  # no TTY: none
        img = _read_rgb(path)
        if tuple(img.shape) != tuple(shape):
            raise ValueError(f"{path} is {tuple(img.shape)}, expected {tuple(shape)}")
        images[i] = img
    targets = torch.tensor([c for _, c in base.samples], dtype=torch.long)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    torch.save({"images": images, "targets": targets}, tmp)
    os.replace(tmp, cache)                                # atomic: readers see all or nothing
    return images, targets


def _call_torchvision(name, folder, expected, cls, *args, **kwargs):
    """Build a torchvision dataset; turn its 'not found or corrupted' error into ours."""
    try:
        return cls(*args, **kwargs)
    except RuntimeError as e:
        if "not found" not in str(e) and "corrupted" not in str(e):
            raise
        raise _not_found(name, folder, expected, " (or a file fails its md5 check)") from e


# ----------------------------------------------------------------------------- batches

def _is_in_memory(dataset) -> bool:
    if isinstance(dataset, Subset):
        return _is_in_memory(dataset.dataset)
    return isinstance(dataset, InMemoryDataset)


def as_tensors(dataset: Dataset, n: int | None = None, device=None):
    """The first ``n`` items (all when ``None``) as ``(X, y)``: float32 ``N x C x H x W``
    and int64 ``N``. In-memory datasets (and Subsets of them) are sliced in one go."""
    n = len(dataset) if n is None else min(n, len(dataset))
    if _is_in_memory(dataset):
        X, y = dataset[list(range(n))]
    else:
        items = [dataset[i] for i in range(n)]
        X = torch.stack([x for x, _ in items]) if items else torch.empty(0)
        y = torch.tensor([int(t) for _, t in items], dtype=torch.long)
    if device is not None:
        device = get_device(device)
        X, y = X.to(device), y.to(device)
    return X, y


def loader(dataset: Dataset, batch_size: int = 128, shuffle: bool = False, seed: int = 0,
           num_workers: int = 0, drop_last: bool = False) -> DataLoader:
    """A DataLoader whose shuffling is fixed by ``seed``. In-memory datasets are read a
    batch at a time (one indexing call per batch instead of one per item)."""
    g = torch.Generator().manual_seed(seed)
    if not _is_in_memory(dataset):
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=g,
                          num_workers=num_workers, drop_last=drop_last)
    order = RandomSampler(dataset, generator=g) if shuffle else SequentialSampler(dataset)
    batches = BatchSampler(order, batch_size, drop_last)
    return DataLoader(dataset, sampler=batches, batch_size=None, generator=g,
                      num_workers=num_workers)


# ----------------------------------------------------------------------------- photos

def sample_images(size: int = 224):
    """A few natural photos for 224x224 demos: scikit-learn's ``china`` and ``flower`` and
    scikit-image's ``astronaut``, ``coffee``, ``chelsea``, ``rocket`` (those present
    offline). Returns ``(images, names)``: float ``N x 3 x size x size`` in [0, 1]."""
    from sklearn.datasets import load_sample_images
    from torchvision.transforms import functional as F

    sk = load_sample_images()
    photos = [(Path(f).stem, img) for f, img in zip(sk.filenames, sk.images)]
    try:
        import skimage.data as skdata
    except ImportError:
        skdata = None
    for name in ("astronaut", "coffee", "chelsea", "rocket") if skdata else ():
        try:
            photos.append((name, getattr(skdata, name)()))
        except (ImportError, OSError, KeyError, ValueError):  # not shipped, cannot fetch
            continue
    images = []
    for _, img in photos:
        x = torch.from_numpy(np.array(img[..., :3])).permute(2, 0, 1)  # a writable copy
        x = F.center_crop(F.resize(x, size, antialias=True), size)
        images.append(x.float().div_(255).clamp_(0, 1))
    return torch.stack(images), [name for name, _ in photos]


# ----------------------------------------------------------------------------- presence

def available(name, root=None) -> bool:
    """Whether the files :func:`load` reads for dataset ``name`` are present, without
    loading, checking or downloading anything: ``digits`` always (it ships with
    scikit-learn); ``mnist`` / ``fashion_mnist`` the four uncompressed IDX files under
    ``<root>/MNIST/raw`` / ``<root>/FashionMNIST/raw``; ``cifar10`` the pickles of
    ``<root>/cifar-10-batches-py`` (when that folder exists, as :func:`load` then reads
    it), else both ``<root>/cifar10-jpg/{train,test}`` folders;
    ``flowers102`` ``<root>/flowers-102/jpg/`` with ``imagelabels.mat`` and ``setid.mat``;
    any other name is an ImageFolder path, present when it is a folder. ``root`` as in
    :func:`data_root`. A file that is present but corrupt still counts (``load`` finds it)."""
    if name == "digits":
        return True
    if name not in DATASETS:
        return isinstance(name, (str, os.PathLike)) and os.path.isdir(os.path.expanduser(name))
    root = data_root(root)
    if name in ("mnist", "fashion_mnist"):
        raw = root / ("MNIST" if name == "mnist" else "FashionMNIST") / "raw"
        return all((raw / f).is_file() for f in _MNIST_FILES)
    if name == "cifar10":
        pickles = root / "cifar-10-batches-py"
        if pickles.is_dir():                           # load() then reads the pickles only
            return all((pickles / f).is_file() for f in _CIFAR_FILES)
        return all((root / "cifar10-jpg" / s).is_dir() for s in ("train", "test"))
    folder = root / "flowers-102"                      # flowers102
    return (folder / "jpg").is_dir() and all((folder / f).is_file() for f in _FLOWERS_FILES[1:])
