"""Unit tests for implicit_bias.models.galu_classifiers: the four Fig. 1 models trained as one
batched program against ``galu.train_classifier``, one model at a time (the oracle)."""

from __future__ import annotations

import pytest
import torch

from implicit_bias.models import galu
from implicit_bias.models.galu_classifiers import train_classifiers

torch.set_num_threads(1)


def _data(dtype, n=300, n_test=80, d=6, classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n + n_test, d, generator=g, dtype=dtype)
    y = (X[:, :2].sum(1) > 0).long() + 2 * (X[:, 2] * X[:, 3] > 0).long()  # 4 classes
    assert int(y.max()) + 1 == classes
    return X[:n], y[:n], X[n:], y[n:]


def _oracle(monkeypatch, data, k, model, seed, epochs, lr, batch_size):
    """train_classifier's accuracies and its logits on the test set (its last forward)."""
    seen = {}

    class Recording(galu.DeepNet):
        def forward(self, x):
            seen["logits"] = super().forward(x)
            return seen["logits"]

    monkeypatch.setattr(galu, "DeepNet", Recording)
    out = galu.train_classifier(*data, k, model, seed, epochs, lr, batch_size)
    monkeypatch.undo()
    return out, seen["logits"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_batched_models_equal_one_at_a_time(monkeypatch, dtype):
    # same initialization, mini-batches (a last batch of 300 % 64 = 44), loss and Adam steps
    # as train_classifier: test logits equal to round-off (float64: 1e-10; float32: 1e-3 after
    # 45 steps), hence the same accuracies; a model order other than DEEP_MODELS' is kept
    data = _data(dtype)
    models = ["relu_readout", "linear", "galu0", "relu"]
    new = train_classifiers(*data, 8, models, 3, 10, 0.01, 64, test_logits=True)
    assert list(new) == models
    for model in models:
        old, logits = _oracle(monkeypatch, data, 8, model, 3, 10, 0.01, 64)
        tol = 1e-10 if dtype == torch.float64 else 1e-3
        torch.testing.assert_close(new[model]["test_logits"], logits, rtol=tol, atol=tol)
        assert new[model]["test_acc"] == old["test_acc"], model
        assert new[model]["train_acc"] == old["train_acc"], model


def test_batched_models_subsets_and_unknown_model():
    # a model's run does not depend on which others train beside it (float64: to round-off)
    data = _data(torch.float64, seed=1)
    every = train_classifiers(*data, 5, list(galu.DEEP_MODELS), 0, 3, 0.02, 50, test_logits=True)
    for model in galu.DEEP_MODELS:
        alone = train_classifiers(*data, 5, [model], 0, 3, 0.02, 50, test_logits=True)
        torch.testing.assert_close(
            alone[model]["test_logits"], every[model]["test_logits"], rtol=1e-10, atol=1e-10
        )
    with pytest.raises(ValueError, match="unknown model"):
        train_classifiers(*data, 5, ["tanh"], 0, 1)
