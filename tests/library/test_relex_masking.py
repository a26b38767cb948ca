"""RelEx's two maskings (issue 18): pixels in [0, 1] (robattr's default) and the normalised
input (004's released code), against direct computations written from the math."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn

from robattr import attributions as A
from robattr.attributions.relex import MASKINGS, input_normalization
from robattr.models import build

#: a 3-channel input whose normalisation is far from the identity, so the maskings differ
RGB = SimpleNamespace(shape=(3, 6, 6), num_classes=4, mean=(0.3, 0.5, 0.7), std=(0.2, 0.25, 0.4))
OPTS = dict(epochs=5, n_noisy=3, lr=0.1, momentum=0.9, lambda1=1e-3, lambda2=1.0, init=0.01)


def model_and_batch(seed: int = 0, info=RGB, arch: str = "cnn"):
    """A float64 softplus network (robattr's Normalize first), 2 images and their targets."""
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build(arch, info, "softplus", 3.0).double().eval()
    x = torch.rand((2,) + tuple(info.shape), generator=g, dtype=torch.float64)
    return model, x, torch.tensor([1, 3])


def direct_relex(net: nn.Module, u: torch.Tensor, t: torch.Tensor, *, seed: int, epochs: int,
                 n_noisy: int, lr: float, momentum: float, lambda1: float, lambda2: float,
                 init: float) -> torch.Tensor:
    """004's algorithm on the inputs ``u`` the network ``net`` takes, written from the math:
    ``m ~ U(0, init)``; each epoch ``n_noisy`` copies ``u + s n`` (``n ~ N(0, 1)``,
    ``s = 0.1 (max u - min u)`` per image), the mean over the copies of
    ``-log p_t(m (u + s n)) + lambda1 |m|_1 - lambda2 log(1 - p_t((1 - m)(u + s n)) + 1e-7)``,
    its gradient scaled to unit norm per image, one step of torch's momentum SGD, then the
    clamp to [0, 1]. The draws come in relex's order (the mask, then copy by copy)."""
    gen = torch.Generator().manual_seed(seed)
    m = (init * torch.rand(u.shape, generator=gen, dtype=u.dtype)).requires_grad_(True)
    opt = torch.optim.SGD([m], lr=lr, momentum=momentum)
    s = 0.1 * (u.flatten(1).amax(1) - u.flatten(1).amin(1))
    rows = torch.arange(u.shape[0])
    for _ in range(epochs):
        noise = [torch.randn(u.shape, generator=gen, dtype=u.dtype) for _ in range(n_noisy)]
        loss = 0.0
        for n in noise:
            un = u + s.view(-1, 1, 1, 1) * n
            keep = torch.softmax(net(m * un), 1)[rows, t]
            drop = torch.softmax(net((1 - m) * un), 1)[rows, t]
            per_image = (-torch.log(keep) + lambda1 * m.abs().flatten(1).sum(1)
                         - lambda2 * torch.log(1 - drop + 1e-7))
            loss = loss + per_image.sum() / n_noisy
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            m.grad /= m.grad.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
        opt.step()
        with torch.no_grad():
            m.clamp_(0, 1)
    return m.detach()


def normalized(model, x):
    """``(network after the Normalize layer, normalised images)``."""
    norm = model[0]
    return model[1:], (x - norm.mean) / norm.std


def test_normalized_masking_is_004s_algorithm_on_the_normalised_image():
    model, x, t = model_and_batch(1)
    got = A.relex(model, x, t, masking="normalized", seed=5, **OPTS)
    net, z = normalized(model, x)
    ref = direct_relex(net, z, t, seed=5, **OPTS)
    torch.testing.assert_close(got, ref, atol=1e-10, rtol=0)
    assert got.min() >= 0 and got.max() <= 1 and got.shape == x.shape


def test_pixel_masking_is_the_default_and_the_same_algorithm_on_pixels():
    model, x, t = model_and_batch(2)
    got = A.relex(model, x, t, seed=4, **OPTS)
    assert torch.equal(got, A.relex(model, x, t, masking="pixel", seed=4, **OPTS))
    ref = direct_relex(model, x, t, seed=4, **OPTS)
    torch.testing.assert_close(got, ref, atol=1e-10, rtol=0)


def test_pixel_masking_is_bit_unchanged():
    """The pixel masking before the ``masking`` argument existed, as an explicit formula:
    ``relex_loss`` without ``fill`` is ``m * x`` and ``(1 - m) * x`` bit for bit, and a
    stored mask of the pixel masking (computed with the code before this change, float64)."""
    model, x, t = model_and_batch(3)
    m = torch.rand(x.shape, generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    plain = A.relex_loss(model, m, x, t)
    keep = torch.log_softmax(model(m * x), 1)[torch.arange(2), t]
    drop = torch.softmax(model((1 - m) * x), 1)[torch.arange(2), t]
    formula = -keep + 1e-4 * m.flatten(1).sum(1) - torch.log(1 - drop + 1e-7)
    torch.testing.assert_close(plain, formula, atol=1e-14, rtol=0)
    # with fill = 0 the general form agrees with the plain one
    torch.testing.assert_close(A.relex_loss(model, m, x, t, fill=torch.zeros(1, 3, 1, 1,
                                                                            dtype=x.dtype)),
                               plain, atol=1e-14, rtol=0)
    # sum, sum of squares and a position-weighted sum of the default masks, stored from the
    # code before the masking argument existed (float64, CPU, AVX-512). The seeded model is
    # initialised in float32 and torch's vectorised float32 uniform_ differs from the scalar
    # one by an ulp: with ATEN_CPU_CAPABILITY=default (a CPU without AVX2) the weights, and
    # so these sums, move by 3e-8 relative. rel=1e-5 allows that; a real change (lambda1 or
    # lr off by 0.1 %, one epoch less, a draw out of order) moves them by 3e-4 or more
    mask = A.relex(model, x, t, seed=4, **OPTS)
    w = torch.arange(mask.numel(), dtype=mask.dtype) / mask.numel()
    got = [float(mask.sum()), float((mask ** 2).sum()), float((mask.flatten() * w).sum())]
    assert got == pytest.approx([5.615307037142436, 1.110755014149166, 2.5339708736286397],
                                rel=1e-5, abs=0)


def test_identity_normalisation_makes_the_maskings_equal():
    info = SimpleNamespace(**{**vars(RGB), "mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0)})
    model, x, t = model_and_batch(4, info)
    assert torch.equal(A.relex(model, x, t, masking="normalized", seed=1, **OPTS),
                       A.relex(model, x, t, masking="pixel", seed=1, **OPTS))


def test_the_maskings_differ_and_a_removed_pixel_is_the_mean():
    model, x, t = model_and_batch(5)
    a = A.relex(model, x, t, masking="pixel", seed=2, **OPTS)
    b = A.relex(model, x, t, masking="normalized", seed=2, **OPTS)
    assert (a - b).abs().max() > 1e-3
    # m = 0 feeds the dataset mean to the network (the mask's term), m = 1 the image itself
    mean, _ = input_normalization(model, x)
    zero, one = torch.zeros_like(x), torch.ones_like(x)
    at_mean = torch.log_softmax(model(mean.expand_as(x)), 1)[torch.arange(2), t]
    drop_x = torch.softmax(model(x), 1)[torch.arange(2), t]
    torch.testing.assert_close(A.relex_loss(model, zero, x, t, fill=mean),
                               -at_mean - torch.log(1 - drop_x + 1e-7), atol=1e-12, rtol=0)
    keep_x = torch.log_softmax(model(x), 1)[torch.arange(2), t]
    drop_mean = torch.softmax(model(mean.expand_as(x)), 1)[torch.arange(2), t]
    torch.testing.assert_close(A.relex_loss(model, one, x, t, fill=mean, lambda1=0.0),
                               -keep_x - torch.log(1 - drop_mean + 1e-7), atol=1e-12, rtol=0)


def test_normalisation_is_read_from_the_model_or_given():
    model, x, t = model_and_batch(6)
    mean, std = input_normalization(model, x)
    torch.testing.assert_close(mean.flatten(), torch.tensor(RGB.mean, dtype=x.dtype))
    torch.testing.assert_close(std.flatten(), torch.tensor(RGB.std, dtype=x.dtype))
    assert mean.shape == (1, 3, 1, 1)
    read = A.relex(model, x, t, masking="normalized", seed=0, epochs=2, n_noisy=2)
    given_ = A.relex(model, x, t, masking="normalized", norm=(model[0].mean, model[0].std),
                     seed=0, epochs=2, n_noisy=2)
    assert torch.equal(read, given_)
    # the layer keeps float32 statistics: the float64 values move the masks by rounding only
    typed = A.relex(model, x, t, masking="normalized", norm=(RGB.mean, RGB.std), seed=0,
                    epochs=2, n_noisy=2)
    torch.testing.assert_close(typed, read, atol=1e-6, rtol=0)
    # the network alone (no Normalize layer) with the statistics given: the same masks
    other = A.relex(model, x, t, masking="normalized", norm=((0.5,), (0.5,)), seed=0,
                    epochs=2, n_noisy=2)
    assert not torch.equal(read, other)


def test_resnet_and_snapshots_and_chunks_keep_working_in_the_normalized_masking():
    model, x, t = model_and_batch(7, arch="resnet20")
    one = A.relex(model, x, t, masking="normalized", seed=3, epochs=4, n_noisy=4, batch_size=2)
    big = A.relex(model, x, t, masking="normalized", seed=3, epochs=4, n_noisy=4, batch_size=64)
    torch.testing.assert_close(one, big, atol=1e-12, rtol=0)
    two, four = A.relex(model, x, t, masking="normalized", seed=3, epochs=4, n_noisy=4,
                        snapshots=(2, 4))
    torch.testing.assert_close(four, big, atol=1e-12, rtol=0)
    assert not torch.equal(two, four)


@pytest.mark.parametrize("kwargs, match", [
    (dict(masking="black"), "masking must be one of"),
    (dict(masking="normalized", norm=(0.5,)), "norm must be a"),
    (dict(masking="normalized", norm=((0.1, 0.2), (1.0, 1.0))), "1 or 3"),
    (dict(masking="normalized", norm=((0.1,), (0.0,))), "std must be > 0"),
])
def test_bad_maskings_are_refused(kwargs, match):
    model, x, t = model_and_batch(8)
    with pytest.raises(ValueError, match=match):
        A.relex(model, x, t, epochs=1, n_noisy=1, **kwargs)


def test_a_model_without_normalize_needs_the_statistics():
    model, x, t = model_and_batch(9)
    with pytest.raises(ValueError, match="no robattr.models.Normalize"):
        A.relex(model[1:], x, t, masking="normalized", epochs=1, n_noisy=1)
    assert A.relex(model[1:], x, t, masking="normalized", norm=(0.5, 0.25), epochs=1,
                   n_noisy=1, seed=0).shape == x.shape


@settings(max_examples=12, deadline=None)
@given(masking=st.sampled_from(MASKINGS), seed=st.integers(0, 2**16),
       lr=st.floats(0.01, 2.0), init=st.floats(0.0, 1.0), batch=st.booleans())
def test_masks_stay_in_the_unit_interval(masking, seed, lr, init, batch):
    model, x, t = model_and_batch(seed % 5)
    m = A.relex(model, x, t, masking=masking, seed=seed, lr=lr, init=init, batch=batch,
                epochs=3, n_noisy=2)
    assert m.shape == x.shape and bool(torch.isfinite(m).all())
    assert m.min() >= 0 and m.max() <= 1


# --------------------------------------------------------------------------- the chapter's helpers
def test_masking_view_is_the_normalized_masking():
    from robattr.chapters.lim2021 import masking_view

    model, x, t = model_and_batch(10)
    assert masking_view(model, x, "pixel") == (model, x)
    net, z = masking_view(model, x, "normalized")
    torch.testing.assert_close(net(z), model(x), atol=1e-12, rtol=0)
    torch.testing.assert_close(A.relex(net, z, t, seed=2, **OPTS),
                               A.relex(model, x, t, masking="normalized", seed=2, **OPTS),
                               atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="Normalize"):
        masking_view(model[1:], x, "normalized")
    with pytest.raises(ValueError, match="masking must be one of"):
        masking_view(model, x, "mean")


def test_masked_input_and_retrieval_follow_the_masking():
    from robattr.chapters.lim2021 import mask_scores, masked_input, masked_retrieval
    from robattr.metrics import class_retrieval

    model, x, t = model_and_batch(11)
    m = torch.rand(x.shape, generator=torch.Generator().manual_seed(1), dtype=x.dtype)
    mean = torch.tensor(RGB.mean, dtype=x.dtype).view(1, 3, 1, 1)
    assert torch.equal(masked_input(model, x, m, "pixel"), m * x)
    torch.testing.assert_close(masked_input(model, x, torch.zeros_like(x), "normalized"),
                               mean.expand_as(x), atol=1e-7, rtol=0)
    torch.testing.assert_close(masked_input(model, x, torch.ones_like(x), "normalized"), x)
    for masking in MASKINGS:
        with torch.no_grad():
            want = (model(masked_input(model, x, m, masking)).argmax(1) == t).to(x.dtype)
        assert torch.equal(masked_retrieval(model, x, m, t, masking), want)
    # the pixel masking keeps mask_scores exactly as before; the normalized one scores m on z
    scores = mask_scores(model, x, {"RelEx": m}, {"RelEx": m}, t, 5)
    assert torch.equal(scores[("retrieval", "RelEx")], class_retrieval(model, x, m, t, normalize=None))
    scores = mask_scores(model, x, {"RelEx": m}, {"RelEx": m}, t, 5, masking="normalized")
    assert torch.equal(scores[("retrieval", "RelEx")], masked_retrieval(model, x, m, t, "normalized"))


def test_compare_maskings_table_and_figure():
    import matplotlib

    matplotlib.use("Agg")
    from robattr.chapters.lim2021 import compare_maskings, masking_table, plot_maskings
    from robattr.metrics import cosine_similarity

    model, x, t = model_and_batch(12)
    cmp = compare_maskings(model, x, t, epochs=3, n_noisy=2, seed=0)
    assert list(cmp["masks"]) == list(MASKINGS)
    for masking, mask in cmp["masks"].items():
        assert torch.equal(mask, A.relex(model, x, t, epochs=3, n_noisy=2, seed=0, masking=masking))
    torch.testing.assert_close(cmp["cosine"], cosine_similarity(*cmp["masks"].values()))
    assert bool(((cmp["spearman"] >= -1) & (cmp["spearman"] <= 1)).all())
    table = masking_table(cmp)
    assert len(table) == 2 and list(table.columns[:2]) == ["cosine", "spearman"]
    assert table["cosine"].tolist() == pytest.approx(cmp["cosine"].tolist())
    fig = plot_maskings(x, cmp, n=5)
    assert len(fig.axes) == 3 * 2 + 1      # rows: image + 2 maskings, n capped at the batch; a bar
    matplotlib.pyplot.close(fig)


def test_chapter_model_loads_user_weights(tmp_path):
    from robattr import data
    from robattr.chapters.lim2021 import chapter_model

    model = build("cnn", "digits").eval()
    path = tmp_path / "cnn.pt"
    torch.save(model.state_dict(), path)
    got = chapter_model("digits", "cnn", weights=str(path), device="cpu", acc_images=50)
    x, y = data.as_tensors(data.load("digits", split="test"), 50)
    with torch.no_grad():
        torch.testing.assert_close(got(x), model(x))
        acc = float((model(x).argmax(1) == y).float().mean())
    assert got.zoo_meta["test_acc"] == pytest.approx(acc) and got.zoo_meta["acc_images"] == 50
    with pytest.raises(FileNotFoundError):
        chapter_model("digits", "cnn", weights=str(tmp_path / "missing.pt"), device="cpu")
