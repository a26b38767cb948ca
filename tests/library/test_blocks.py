"""robattr.blocks: a paper's per-dataset blocks run where their files are, the others are
skipped with one line that says what is missing; nothing is downloaded. Tiny fake data sets
are written to a temporary ROBATTR_DATA."""
from __future__ import annotations

import socket
import struct

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from robattr import blocks
from robattr.chapters.wangkong2023 import blocks as blocks78
from robattr.chapters.wangkong2025 import blocks as blocks567
from robattr.blocks import Block, eps_value, missing, select, torchvision_state_dict

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck"]


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An empty data root (ROBATTR_DATA) and cache; any network connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    data_root = tmp_path / "data"
    data_root.mkdir()
    monkeypatch.setenv("ROBATTR_DATA", str(data_root))
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    return data_root


def write_jpgs(folder, classes, n=1, size=8):
    rng = np.random.default_rng(0)
    for c in classes:
        (folder / c).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / c / f"{i}.jpg")


def write_mnist(folder, n=3):
    """The four IDX files torchvision's MNIST reader wants, with n random images each."""
    raw = folder / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix in ("train", "t10k"):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">4I", 2051, n, 28, 28) + images.tobytes())
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">2I", 2049, n) + labels.tobytes())


def test_present_blocks_are_kept_in_order_and_each_missing_one_gets_one_line(root, tmp_path):
    write_jpgs(root / "cifar10-jpg" / "train", CIFAR10_CLASSES, size=32)
    write_jpgs(root / "cifar10-jpg" / "test", CIFAR10_CLASSES, size=32)
    write_mnist(root / "MNIST")
    imagenet = tmp_path / "imagenet"
    write_jpgs(imagenet / "val", ["n01440764", "n01443537"], size=12)
    weights = tmp_path / "resnet50.pt"
    weights.write_bytes(b"x")
    wanted = [Block("CIFAR-10", "cifar10"),
              Block("Fashion-MNIST", "fashion_mnist"),
              Block("MNIST", "mnist"),
              Block("Flower", "flowers102", size=64),
              Block("ImageNet", str(imagenet), size=16, splits=("val",), weights=str(weights)),
              Block("ImageNet (no weights)", str(imagenet), size=16, splits=("val",), weights="",
                    what="a pretrained ResNet-50")]
    lines = []
    kept = select(wanted, echo=lines.append)
    assert [b.label for b in kept] == ["CIFAR-10", "MNIST", "ImageNet"]
    assert len(lines) == 3 and all("\n" not in line for line in lines)
    fashion, flower, no_weights = lines
    assert fashion.startswith("skipped Fashion-MNIST:") and str(root / "FashionMNIST" / "raw") in fashion
    assert flower.startswith("skipped Flower:") and str(root / "flowers-102") in flower
    assert "imagelabels.mat" in flower                      # says what to put there
    assert no_weights == "skipped ImageNet (no weights): no weights file given (a pretrained ResNet-50)"


def test_a_block_without_a_folder_or_with_a_wrong_one_is_skipped_not_an_error(root, tmp_path):
    assert missing(Block("ImageNet", "", splits=("val",), what="get it")) == \
        "skipped ImageNet: no data folder given (get it)"
    why = missing(Block("ImageNet", str(tmp_path / "nowhere"), splits=("val",)))
    assert why.startswith("skipped ImageNet:") and "nowhere" in why
    (tmp_path / "empty" / "val" / "a").mkdir(parents=True)          # class folders, no image
    why = missing(Block("Empty", str(tmp_path / "empty"), size=8, splits=("val",)))
    assert why.startswith("skipped Empty:") and "\n" not in why
    write_jpgs(tmp_path / "folder" / "train", ["a", "b"])
    why = missing(Block("Folder", str(tmp_path / "folder"), size=8, splits=("val",)))
    assert why.startswith("skipped Folder:") and "split folders train only" in why
    write_jpgs(root / "cifar10-jpg" / "test", CIFAR10_CLASSES, size=32)
    why = missing(Block("CIFAR-10", "cifar10", weights=str(tmp_path / "absent.pt")))
    assert why.startswith("skipped CIFAR-10:") and "train" in why   # the train split is missing
    assert missing(Block("CIFAR-10", "cifar10", splits=("test",))) is None
    why = missing(Block("CIFAR-10", "cifar10", splits=("test",), weights=str(tmp_path / "absent.pt")))
    assert why == f"skipped CIFAR-10: weights file not found: {tmp_path / 'absent.pt'}"


def test_select_is_silent_on_request_and_refuses_repeated_labels(root):
    assert select([Block("MNIST", "mnist")], echo=None) == []
    with pytest.raises(ValueError, match="distinct"):
        select([Block("MNIST", "mnist"), Block("MNIST", "digits")])
    assert select([Block("digits", "digits")], echo=None) == [Block("digits", "digits")]
    with pytest.raises(ValueError, match="splits"):
        Block("x", "digits", splits=("dev",))
    with pytest.raises(ValueError, match="label"):
        Block("", "digits")


@pytest.mark.parametrize("label, value", [("0.1", 0.1), ("4/255", 4 / 255), ("8/255", 8 / 255),
                                          (0.03, 0.03), (8, 8.0), (" 2 ", 2.0)])
def test_eps_value_reads_the_papers_labels(label, value):
    assert eps_value(label) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("bad", ["", "a", "1/0", "-0.1", "0", True, "4/2/1", "inf"])
def test_eps_value_refuses_what_is_not_a_budget(bad):
    with pytest.raises(ValueError, match="budget"):
        eps_value(bad)


@given(num=st.integers(1, 255), den=st.integers(1, 255))
def test_eps_value_of_a_fraction_is_the_quotient(num, den):
    assert eps_value(f"{num}/{den}") == num / den


def test_checkpoint_layouts_become_torchvision_keys():
    w = torch.ones(2)
    bare = {"conv1.weight": w, "fc.bias": w}
    assert torchvision_state_dict(bare).keys() == bare.keys()
    assert torchvision_state_dict({"state_dict": {"module.conv1.weight": w}}) == {"conv1.weight": w}
    madry = {"model": {"module.normalizer.new_mean": w, "module.model.conv1.weight": w,
                       "module.attacker.model.conv1.weight": 2 * w,
                       "module.attacker.normalizer.new_std": w, "module.model.fc.bias": w},
             "epoch": 3}
    out = torchvision_state_dict(madry)
    assert set(out) == {"conv1.weight", "fc.bias"} and out["conv1.weight"] is w
    with pytest.raises(ValueError, match="no state dict"):
        torchvision_state_dict({"epoch": 3})


def test_pretrained_loads_a_checkpoint_into_the_bare_network(tmp_path):
    from robattr.models import build

    info = dict(shape=(3, 32, 32), num_classes=4, mean=(0.5,) * 3, std=(0.25,) * 3)
    src = build("resnet18", info)
    sd = {f"module.model.{k}": v for k, v in src.net.state_dict().items()}
    sd["module.normalizer.new_mean"] = torch.zeros(3)
    torch.save({"model": sd, "epoch": 1}, tmp_path / "ckpt.pt")
    model = blocks.pretrained("resnet18", info, tmp_path / "ckpt.pt")
    x = torch.rand(2, 3, 32, 32)
    src.eval()
    assert not model.training and torch.allclose(model(x), src(x))
    with pytest.raises(ValueError, match="do not fit"):
        blocks.pretrained("resnet18", dict(info, num_classes=5), tmp_path / "ckpt.pt")
    with pytest.raises(FileNotFoundError):
        blocks.pretrained("resnet18", info, tmp_path / "absent.pt")


def test_wangkong2023_blocks_take_the_papers_budgets_and_fall_back_to_the_quick_run(root):
    lines = []
    runs = blocks78.table78_runs(["MNIST", "CIFAR-10"], dataset="digits", paper_dataset="MNIST",
                                   eps_l2=[0.1, 0.2], eps_linf=[0.01], ref_dim=784, echo=lines.append)
    assert len(runs) == 1 and runs[0]["dataset"] == "digits" and len(lines) == 3
    assert runs[0]["eps_l2"] == ["0.1", "0.2"] and runs[0]["eps_linf"] == ["0.01"]
    assert runs[0]["l2_scale"] == pytest.approx((64 / 784) ** 0.5)
    write_jpgs(root / "cifar10-jpg" / "test", CIFAR10_CLASSES, size=32)
    write_jpgs(root / "cifar10-jpg" / "train", CIFAR10_CLASSES, size=32)
    runs = blocks78.table78_runs(["MNIST", "CIFAR-10"], dataset="digits", paper_dataset="MNIST",
                                   eps_l2=[0.1], eps_linf=[0.01], ref_dim=784, echo=None)
    # App. D.2: CIFAR-10 at l2 0.2 and 0.3, l-inf 4/255 and 8/255, unscaled
    assert runs == [dict(label="CIFAR-10", dataset="cifar10", eps_l2=["0.2", "0.3"],
                         eps_linf=["4/255", "8/255"], l2_scale=1.0)]
    with pytest.raises(ValueError, match="unknown Tables 7-8 blocks"):
        blocks78.table78_runs(["Flower"], dataset="digits", paper_dataset="MNIST", eps_l2=[0.1],
                                eps_linf=[0.01], ref_dim=784)


def test_wangkong2025_blocks_name_their_table_and_imagenet_needs_its_weights(root, tmp_path):
    lines = []
    runs = blocks567.table567_runs(["MNIST", "CIFAR-10", "ImageNet"], dataset="digits",
                                    echo=lines.append)
    assert [r["dataset"] for r in runs] == ["digits"] and runs[0]["table"] == "wangkong2025_table5"
    assert [line.split(":")[0] for line in lines] == ["skipped MNIST", "skipped CIFAR-10",
                                                      "skipped ImageNet", "no block has its data here"]
    write_mnist(root / "MNIST")
    imagenet = tmp_path / "imagenet"
    write_jpgs(imagenet, ["n01440764"], size=12)
    (tmp_path / "r50.pt").write_bytes(b"x")
    runs = blocks567.table567_runs(["ImageNet", "MNIST"], dataset="digits", imagenet_dir=str(imagenet),
                                    imagenet_weights=str(tmp_path / "r50.pt"), echo=None)
    assert [(r["label"], r["table"]) for r in runs] == [("ImageNet", "wangkong2025_table7"),
                                                        ("MNIST", "wangkong2025_table5")]
    assert runs[0]["weights"] == str(tmp_path / "r50.pt") and runs[1]["weights"] is None
