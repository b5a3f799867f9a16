"""The task functions of the chapter: each takes a task (a dict of JSON values, with the run's
`device`) and returns a dict of JSON values; the notebook sweeps them through `Chapter.sweep`.
Below them, the task lists each sweep runs, built from the profile.

The numerics live in `implicit_bias.models.galu`; the MNIST / Fashion-MNIST data of Fig. 1 are
loaded here (`implicit_bias.core.data`), PCA-projected and kept in memory for the process.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from implicit_bias.core import data  # the foundation's loaders (data/raw, SHA-256 verified)
from implicit_bias.core.tasks import task
from implicit_bias.models.galu import (
    DEEP_MODELS,
    acs,
    cluster_model,
    galu_features,
    galu_predict,
    gate_values,
    improve_gates,
    least_squares,
    lemma1_monte_carlo,
    pca_project,
    random_regression,
    theorem1_monte_carlo,
    train_classifier,
    train_one_hidden,
)


def _device(task: dict) -> torch.device:
    return torch.device(task.get("device", "cpu"))


@task(uses_device=True)
def theorem1_task(task: dict) -> dict:
    """Theorem 1 for one draw of x, u ~ N(0, I_d): Monte Carlo over labels vs the formula."""
    g = torch.Generator().manual_seed(task["seed"])
    m, d, k = task["m"], task["d"], task["k"]
    X = torch.randn(m, d, generator=g, dtype=torch.float64).to(_device(task))
    U = torch.randn(d, k, generator=g, dtype=torch.float64).to(_device(task))
    out = theorem1_monte_carlo(X, U, task["gate"], task["n_labels"], g)
    # Points whose k gates are all closed have Phi(x) = 0 (0-1 gates only): they bound the rank.
    out["m_active"] = int((gate_values(X @ U, task["gate"]).sum(1) > 0).sum())
    return out


@task(uses_device=True)
def lemma1_task(task: dict) -> dict:
    """Lemma 1 Monte Carlo at one (d, m, sigma)."""
    return lemma1_monte_carlo(
        task["d"],
        task["m"],
        task["sigma"],
        task["beta_norm"],
        task["n_rep"],
        task["seed"],
        task.get("device", "cpu"),
    )


@task(uses_device=True)
def fig2_task(task: dict) -> dict:
    """Fig. 2 for one seed: memorizing N(0,1) labels with one hidden layer of k neurons.

    GaLU: closed form at each k and 2k, and after ``alg1_steps`` steps of Algorithm 1;
    ReLU: both layers trained by full-batch Adam (batched over the k grid with masks).
    """
    dev = _device(task)
    X, Y = random_regression(task["m"], task["d"], 1, task["seed"], dev)
    ks = [int(k) for k in task["k_grid"]]
    g = torch.Generator().manual_seed(task["seed"] + 1)
    galu = {}
    for k in sorted(set(ks) | {2 * k for k in ks}):
        U = torch.randn(task["d"], k, generator=g, dtype=torch.float64).to(dev)
        galu[k] = float(least_squares(galu_features(X, U, task["gate"]), Y[:, 0])[1])
    alg1 = [
        improve_gates(X, Y[:, 0], k, task["alg1_steps"], task["gate"], task["seed"] + 2)["losses"]
        for k in ks
    ]
    relu = train_one_hidden(
        X.expand(len(ks), -1, -1),
        Y.expand(len(ks), -1, -1),
        max(ks),
        "relu",
        [task["seed"] + 3] * len(ks),
        task["relu_steps"],
        task["relu_lr"],
        widths=ks,
    )["train_mse"]
    return {
        "k": ks,
        "galu": [galu[k] for k in ks],
        "galu_2k": [galu[2 * k] for k in ks],
        "galu_alg1": [a[-1] for a in alg1],
        "alg1_nonincreasing": all(b <= a for a1 in alg1 for a, b in zip(a1, a1[1:])),
        "relu": relu,
    }


@task(uses_device=True)
def fig3_task(task: dict) -> dict:
    """Fig. 3 / Fig. 4 for one seed: the cluster model at several noise levels.

    GaLU (0-1 gates, k random filters) is fitted in closed form on the MSE (the global optimum
    over the linear weights, i.e. the limit of long training) and, like ReLU, by full-batch Adam
    on both layers for ``relu_steps`` steps (batched over noise levels). Classification uses
    +-1 targets and the sign of the output. Errors: MSE (regression) or 0-1 error
    (classification) on the noisy labels of the train and test
    sets. Also returns the GaLU solution's squared l1 and l2 norms (Fig. 4).
    """
    dev = _device(task)
    reg = task["task"] == "regression"
    sets = [
        cluster_model(
            task["m"],
            task["m_test"],
            task["d"],
            task["n_clusters"],
            task["sigma_x"],
            task["task"],
            noise,
            task["seed"],
            dev,
        )
        for noise in task["noise"]
    ]

    def err(pred: torch.Tensor, y: torch.Tensor) -> float:
        if reg:
            return float(((pred - y) ** 2).mean())
        return float((torch.sign(pred) != y).double().mean())

    g = torch.Generator().manual_seed(task["seed"] + 1)
    U = torch.randn(task["d"], task["k"], generator=g, dtype=torch.float64).to(dev)
    out = {"noise": list(task["noise"])}
    rows = []
    for Xtr, ytr, Xte, yte in sets:
        w, _, _ = least_squares(galu_features(Xtr, U, "step"), ytr)
        rows.append(
            (
                err(galu_predict(Xtr, U, w), ytr),
                err(galu_predict(Xte, U, w), yte),
                float(w.abs().sum() ** 2),
                float((w**2).sum()),
                float(((galu_predict(Xtr, U, w) - ytr) ** 2).mean()),
                float(((galu_predict(Xte, U, w) - yte) ** 2).mean()),
            )
        )
    keys = [
        "galu_train",
        "galu_test",
        "galu_l1_sq",
        "galu_l2_sq",
        "galu_train_mse",
        "galu_test_mse",
    ]
    out.update({key: [r[i] for r in rows] for i, key in enumerate(keys)})
    if task.get("relu_steps", 0) > 0:
        Xtr = torch.stack([s[0] for s in sets])
        ytr = torch.stack([s[1] for s in sets])[..., None]
        Xte = torch.stack([s[2] for s in sets])
        yte = torch.stack([s[3] for s in sets])[..., None]
        for arch in ("relu", "galu"):
            res = train_one_hidden(
                Xtr,
                ytr,
                task["k"],
                arch,
                [task["seed"] + 2] * len(sets),
                task["relu_steps"],
                task["relu_lr"],
                X_test=Xte,
                Y_test=yte,
            )
            name = "relu" if arch == "relu" else "galu_adam"
            out[f"{name}_train"] = [err(res["train_pred"][i], ytr[i]) for i in range(len(sets))]
            out[f"{name}_test"] = [err(res["test_pred"][i], yte[i]) for i in range(len(sets))]
    return out


@task(uses_device=True)
def fig5_task(task: dict) -> dict:
    """Fig. 5 for one (d', seed): training MSE against k on N(0,1) targets in R^{d'}.

    GaLU by alternate convex search (``acs_iters`` rounds) and by Adam (both layers), ReLU by
    Adam (batched over the k grid with masks). The smallest k with MSE < threshold is read off
    these curves with ``first_below``.
    """
    dev = _device(task)
    X, Y = random_regression(task["m"], task["d"], task["d_out"], task["seed"], dev)
    ks = [int(k) for k in task["k_grid"]]
    g = torch.Generator().manual_seed(task["seed"] + 1)
    acs_losses = []
    for k in ks:
        U = torch.randn(task["d"], k, generator=g, dtype=torch.float64).to(dev)
        acs_losses.append(acs(X, Y, U, task["acs_iters"], "step", task["seed"] + 2)["losses"])
    B = len(ks)
    common = (X.expand(B, -1, -1), Y.expand(B, -1, -1), max(ks))
    adam = {
        arch: train_one_hidden(
            *common, arch, [task["seed"] + 3] * B, task["relu_steps"], task["relu_lr"], widths=ks
        )["train_mse"]
        for arch in ("relu", "galu")
    }
    return {
        "k": ks,
        "galu_acs": [a[-1] for a in acs_losses],
        "acs_nonincreasing": all(b <= a + 1e-12 for a1 in acs_losses for a, b in zip(a1, a1[1:])),
        "acs_last_round_change": max(a[-3] - a[-1] for a in acs_losses),
        "acs_rounds": [(len(a) - 1) // 2 for a in acs_losses],
        "galu_adam": adam["galu"],
        "relu": adam["relu"],
    }


@lru_cache(maxsize=4)
def _pca_data(dataset: str, n_train: int, n_test: int, seed: int, n_components: int):
    """Seeded subsets of a dataset's training and test images, PCA-projected (float32), kept in
    memory for the process: the runs of Fig. 1 at every width and seed share them."""
    load = {"mnist": data.load_mnist, "fashion_mnist": data.load_fashion_mnist}[dataset]
    Xtr, ytr = load("train")
    Xte, yte = load("test")
    itr = data.seeded_subset(len(ytr), n_train, seed) if n_train < len(ytr) else np.arange(len(ytr))
    ite = data.seeded_subset(len(yte), n_test, seed) if n_test < len(yte) else np.arange(len(yte))
    Ztr, Zte = pca_project(Xtr[itr].astype(np.float64), Xte[ite].astype(np.float64), n_components)
    return Ztr.astype(np.float32), ytr[itr], Zte.astype(np.float32), yte[ite]


@task(uses_device=True)
def fig1_task(task: dict) -> dict:
    """Fig. 1 for one (dataset, k, seed): the four two-hidden-layer models' test accuracy."""
    dev = _device(task)
    Ztr, ytr, Zte, yte = _pca_data(
        task["dataset"],
        task["n_train"],
        task["n_test"],
        task.get("data_seed", 0),
        task["pca_dim"],
    )
    tens = [torch.as_tensor(a).to(dev) for a in (Ztr, ytr, Zte, yte)]
    out = {}
    for model in task["models"]:
        r = train_classifier(
            *tens, task["k"], model, task["seed"], task["epochs"], task["lr"], task["batch_size"]
        )
        out[f"{model}_test_acc"] = r["test_acc"]
        out[f"{model}_train_acc"] = r["train_acc"]
    return out


# ----------------------------------------------------------------------------------------------
# Task lists of the sweeps, from the profile's parameters (`cfg`) and the run's device
# ----------------------------------------------------------------------------------------------


def fig1_tasks(cfg: dict, device: str) -> list[dict]:
    """One run per (dataset, width, seed); each trains the four models of Fig. 1."""
    return [
        {
            "dataset": ds,
            "k": k,
            "seed": s,
            "n_train": cfg["fig1_n_train"],
            "n_test": cfg["fig1_n_test"],
            "pca_dim": cfg["pca_dim"],
            "epochs": cfg["fig1_epochs"],
            "lr": cfg["fig1_lr"],
            "batch_size": cfg["fig1_batch_size"],
            "models": list(DEEP_MODELS),
            "device": device,
        }
        for ds in cfg["fig1_datasets"]
        for k in cfg["fig1_k"]
        for s in cfg["fig1_seeds"]
    ]


def theorem1_tasks(cfg: dict, device: str) -> list[dict]:
    """Monte Carlo cases (`kind` mc), then rank draws at the paper's widths (rank) and
    with few 0-1 gates (few)."""
    mc = [
        {
            "m": m,
            "d": d,
            "k": k,
            "gate": gate,
            "seed": s,
            "n_labels": cfg["thm1_n_labels"],
            "device": device,
            "kind": "mc",
        }
        for (m, d, k, gate) in cfg["thm1_cases"]
        for s in cfg["thm1_seeds"]
    ]
    rank = [
        {
            "m": m,
            "d": d,
            "k": k,
            "gate": gate,
            "seed": s,
            "n_labels": 1,
            "device": device,
            "kind": kind,
        }
        for kind, cases in (("rank", cfg["thm1_rank_cases"]), ("few", cfg["thm1_few_gate_cases"]))
        for (m, d, k) in cases
        for gate in (("step", "sigmoid") if kind == "rank" else ("step",))
        for s in range(cfg["thm1_rank_draws"])
    ]
    return mc + rank


def fig2_tasks(cfg: dict, device: str) -> list[dict]:
    """One run per seed, each over the whole width grid."""
    return [
        {
            "m": cfg["fig2_m"],
            "d": cfg["fig2_d"],
            "k_grid": cfg["fig2_k"],
            "seed": s,
            "gate": "step",
            "alg1_steps": cfg["fig2_alg1_steps"],
            "relu_steps": cfg["relu_steps"],
            "relu_lr": cfg["relu_lr"],
            "device": device,
        }
        for s in cfg["fig2_seeds"]
    ]


def fig3_tasks(cfg: dict, device: str) -> list[dict]:
    """One run per (regression or classification, seed), each over its noise levels."""
    base = {k: cfg[f"fig3_{k}"] for k in ("m", "m_test", "d", "n_clusters", "k", "sigma_x")}
    return [
        {
            **base,
            "task": task,
            "noise": cfg["fig3_sigma_y" if task == "regression" else "fig3_p"],
            "seed": s,
            "relu_steps": cfg["relu_steps"],
            "relu_lr": cfg["relu_lr"],
            "device": device,
        }
        for task in ("regression", "classification")
        for s in cfg["fig3_seeds"]
    ]


def fig4_tasks(cfg: dict, device: str) -> list[dict]:
    """Closed-form fits only (no Adam: `relu_steps` 0), run by `fig3_task`."""
    base = {k: cfg[f"fig3_{k}"] for k in ("m", "m_test", "d", "n_clusters", "k", "sigma_x")}
    return [
        {
            **base,
            "task": "regression",
            "noise": cfg["fig4_sigma_y"],
            "seed": s,
            "relu_steps": 0,
            "relu_lr": 0.0,
            "device": device,
        }
        for s in cfg["fig4_seeds"]
    ]


def lemma1_tasks(cfg: dict, device: str) -> list[dict]:
    """Both distributions, D_1,0 and D_sigma,beta, at each m = d + offset; m = d + 2
    gets its own (larger) number of repetitions."""
    d = cfg["lemma1_d"]
    tasks = []
    for m in (d + int(off) for off in cfg["lemma1_m_minus_d"]):
        n_rep = cfg["lemma1_n_rep_d_plus_2"] if m == d + 2 else cfg["lemma1_n_rep"]
        for dist, sigma, beta in (
            ("D_1,0", 1.0, 0.0),
            ("D_sigma,beta", cfg["lemma1_sigma_small"], 1.0),
        ):
            tasks.append(
                {
                    "d": d,
                    "m": m,
                    "sigma": sigma,
                    "beta_norm": beta,
                    "n_rep": n_rep,
                    "seed": cfg["lemma1_seed"],
                    "dist": dist,
                    "device": device,
                }
            )
    return tasks


def fig5_tasks(cfg: dict, device: str) -> list[dict]:
    """One run per (d', seed), each over the width grid of its d'."""
    return [
        {
            "m": cfg["fig5_m"],
            "d": cfg["fig5_d"],
            "d_out": int(dout),
            "k_grid": ks,
            "seed": s,
            "acs_iters": cfg["fig5_acs_iters"],
            "relu_steps": cfg["relu_steps"],
            "relu_lr": cfg["relu_lr"],
            "device": device,
        }
        for dout, ks in zip(cfg["fig5_dout"], cfg["fig5_k"])
        for s in cfg["fig5_seeds"]
    ]
