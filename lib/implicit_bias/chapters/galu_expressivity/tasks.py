"""The task functions of the chapter: each takes a task (a dict of JSON values, with the run's
`device`) and returns a dict of JSON values; the notebook sweeps them through `Chapter.sweep`.
Below them, the task lists each sweep runs, built from the profile.

The numerics live in `implicit_bias.models.galu`; the MNIST / Fashion-MNIST data of Fig. 1 are
loaded here (`implicit_bias.core.engine.data`), PCA-projected and kept in memory for the process.
"""

from __future__ import annotations

import time
from functools import lru_cache

import numpy as np
import torch

from implicit_bias.core.engine import data  # the foundation's loaders (data/raw, SHA-256 verified)
from implicit_bias.core.engine.tasks import task
from implicit_bias.models.galu import (
    DEEP_MODELS,
    cluster_model,
    cluster_model_levels,
    galu_features,
    gate_values,
    improve_gates,
    least_squares,
    least_squares_many,
    pca_project,
    random_regression,
    train_one_hidden,
    train_one_hidden_converged,
)
from implicit_bias.models.galu_classifiers import train_classifiers
from implicit_bias.models.galu_theory import (
    lemma1_monte_carlo,
    rank_upper_bound,
    theorem1_monte_carlo,
)
from implicit_bias.models.galu_widths import acs_widths, train_widths_converged


def _device(task: dict) -> torch.device:
    return torch.device(task.get("device", "cpu"))


@task(uses_device=True)
def theorem1_task(task: dict) -> dict:
    """Theorem 1 for one draw of x, u ~ N(0, I_d): Monte Carlo over labels vs the formula."""
    g = torch.Generator().manual_seed(task["seed"])
    m, d, k = task["m"], task["d"], task["k"]
    X = torch.randn(m, d, generator=g, dtype=torch.float64).to(_device(task))
    U = torch.randn(d, k, generator=g, dtype=torch.float64).to(_device(task))
    out = theorem1_monte_carlo(
        X, U, task["gate"], task["n_labels"], g, task.get("confirmatory_batches", 0)
    )
    # Points whose k gates are all closed have Phi(x) = 0 (0-1 gates only): they bound the rank.
    out["m_active"] = int((gate_values(X @ U, task["gate"]).sum(1) > 0).sum())
    # the bound that holds for every draw of 0-1 gates (sigmoid gates: min(m, kd))
    out["rank_bound"] = rank_upper_bound(X, U) if task["gate"] == "step" else out["min_m_kd"]
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
        confirmatory_batches=task.get("confirmatory_batches", 0),
    )


@task(uses_device=True)
def fig2_task(task: dict) -> dict:
    """Fig. 2 for one seed: memorizing N(0,1) labels with one hidden layer of k neurons.

    GaLU: closed form at each k and 2k, and after ``alg1_steps`` steps of Algorithm 1;
    ReLU: both layers trained by full-batch Adam to its stopping rule
    (``train_widths_converged``, each width at its own size: the networks
    ``train_one_hidden_converged`` trains batched over the k grid with masks), with whether each
    width converged (a run stopped by ``adam_max_steps`` is unconverged; the analysis leaves
    it out, so the task's exact GaLU fits stay evidence).
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
    relu = train_widths_converged(  # each width at its own size (the masked batch's networks)
        X,
        Y,
        ks,
        "relu",
        [task["seed"] + 3] * len(ks),
        task["adam_lr"],
        task["adam_window"],
        task["adam_tol"],
        task["adam_halvings"],
        task["adam_max_steps"],
    )
    return {
        "k": ks,
        "galu": [galu[k] for k in ks],
        "galu_2k": [galu[2 * k] for k in ks],
        "galu_alg1": [a[-1] for a in alg1],
        "alg1_nonincreasing": all(b <= a for a1 in alg1 for a, b in zip(a1, a1[1:])),
        "relu": relu["train_mse"],
        "relu_steps": relu["steps"],
        "relu_converged": relu["converged"],
    }


@task(uses_device=True)
def fig3_task(task: dict) -> dict:
    """Fig. 3 / Fig. 4 for one seed: the cluster model at several noise levels.

    GaLU (0-1 gates, k random filters) is fitted in closed form on the MSE (the global optimum
    over the linear weights, i.e. the limit of long training) and, like ReLU, by full-batch Adam
    on both layers for ``relu_steps`` steps (batched over noise levels). Classification uses
    +-1 targets and the sign of the output. Errors: MSE (regression) or 0-1 error
    (classification) on the noisy labels of the train and test
    sets, and (``*_test_clean``) on the clean labels ``b_i`` of the test points, the error the
    fit makes on the function it should learn. Also returns the GaLU solution's squared l1 and
    l2 norms (Fig. 4).
    """
    dev = _device(task)
    reg = task["task"] == "regression"
    keys = ("m", "m_test", "d", "n_clusters", "sigma_x", "task")
    # one draw of inputs for all noise levels (the draws do not depend on the level); the
    # level 0 appended last gives the clean labels of the same points
    levels = [*task["noise"], 0.0]
    Xtr, Ytr, Xte, Yte = cluster_model_levels(*(task[k] for k in keys), levels, task["seed"], dev)
    Ytr, Yte, clean = Ytr[:-1], Yte[:-1], Yte[-1]

    def err(pred: torch.Tensor, y: torch.Tensor) -> float:
        if reg:
            return float(((pred - y) ** 2).mean())
        return float((torch.sign(pred) != y).double().mean())

    g = torch.Generator().manual_seed(task["seed"] + 1)
    U = torch.randn(task["d"], task["k"], generator=g, dtype=torch.float64).to(dev)
    out = {"noise": list(task["noise"])}
    rows = []
    # the same features at every noise level: one SVD for all the closed-form fits
    Phi_tr, Phi_te = galu_features(Xtr, U, "step"), galu_features(Xte, U, "step")
    for (w, _, _), ytr, yte in zip(least_squares_many(Phi_tr, list(Ytr)), Ytr, Yte):
        pred_tr, pred_te = Phi_tr @ w, Phi_te @ w
        rows.append(
            (
                err(pred_tr, ytr),
                err(pred_te, yte),
                float(w.abs().sum() ** 2),
                float((w**2).sum()),
                float(((pred_tr - ytr) ** 2).mean()),
                float(((pred_te - yte) ** 2).mean()),
                err(pred_te, clean),
            )
        )
    keys = (
        "galu_train",
        "galu_test",
        "galu_l1_sq",
        "galu_l2_sq",
        "galu_train_mse",
        "galu_test_mse",
        "galu_test_clean",
    )
    out.update({key: [r[i] for r in rows] for i, key in enumerate(keys)})
    if task.get("relu_steps", 0) > 0:
        L = len(Ytr)
        Xtr, Xte = torch.stack([Xtr] * L), torch.stack([Xte] * L)
        ytr, yte = Ytr[..., None], Yte[..., None]
        for arch in ("relu", "galu"):
            res = train_one_hidden(
                Xtr,
                ytr,
                task["k"],
                arch,
                [task["seed"] + 2] * L,
                task["relu_steps"],
                task["relu_lr"],
                X_test=Xte,
                Y_test=yte,
            )
            name = "relu" if arch == "relu" else "galu_adam"
            out[f"{name}_train"] = [err(res["train_pred"][i], ytr[i]) for i in range(L)]
            out[f"{name}_test"] = [err(res["test_pred"][i], yte[i]) for i in range(L)]
            out[f"{name}_test_clean"] = [err(res["test_pred"][i], clean[:, None]) for i in range(L)]
    return out


@task(uses_device=True)
def fig4_task(task: dict) -> dict:
    """Fig. 4 for one seed: GaLU fits in the regression cluster model across noise levels.

    The centres, labels ``b_i``, inputs and gates are those of the seed; the label noise
    ``eps ~ N(0, sigma_y^2)`` of the train and test sets is drawn afresh for each ``sigma_y``
    (its own generator per (seed, noise level)), so that the points of Fig. 4 are independent
    draws, not one draw rescaled. GaLU (0-1 gates) in closed form, as in the paper's Fig. 4,
    and, for Sec. 4.2.1's remark on training both layers, by Adam on both layers to
    convergence (``train_one_hidden_converged``); the norms of the latter are those of its
    linear weights ``w_j = v_j W_j``. Returns per noise level the train and test MSE and the
    squared l1 and l2 norms of each fit.
    """
    dev = _device(task)
    keys = ("m", "m_test", "d", "n_clusters", "sigma_x")
    Xtr, btr, Xte, bte = cluster_model(
        *(task[k] for k in keys), "regression", 0.0, task["seed"], dev
    )
    g = torch.Generator().manual_seed(task["seed"] + 1)
    U = torch.randn(task["d"], task["k"], generator=g, dtype=torch.float64).to(dev)
    ytr, yte = [], []
    for i, sigma in enumerate(task["noise"]):
        gn = torch.Generator().manual_seed(10_000 * (task["seed"] + 1) + i)
        eps = torch.randn(len(btr) + len(bte), generator=gn, dtype=torch.float64).to(dev)
        ytr.append(btr + sigma * eps[: len(btr)])
        yte.append(bte + sigma * eps[len(btr) :])

    def mse(pred: torch.Tensor, y: torch.Tensor) -> float:
        return float(((pred - y) ** 2).mean())

    out: dict = {"noise": list(task["noise"])}
    rows = []
    # the same features at every noise level: one SVD for all the closed-form fits
    Phi_tr, Phi_te = galu_features(Xtr, U, "step"), galu_features(Xte, U, "step")
    for (w, _, _), a, b in zip(least_squares_many(Phi_tr, ytr), ytr, yte):
        pred_tr, pred_te = Phi_tr @ w, Phi_te @ w
        rows.append((mse(pred_tr, a), mse(pred_te, b), float(w.abs().sum() ** 2), float(w @ w)))
    for i, key in enumerate(("galu_train_mse", "galu_test_mse", "galu_l1_sq", "galu_l2_sq")):
        out[key] = [r[i] for r in rows]
    if task["adam_max_steps"] > 0:
        B = len(ytr)
        Ub = U.expand(B, -1, -1)
        res = train_one_hidden_converged(
            Xtr.expand(B, -1, -1),
            torch.stack(ytr)[..., None],
            task["k"],
            "galu",
            [task["seed"] + 2] * B,
            task["adam_lr"],
            task["adam_window"],
            task["adam_tol"],
            task["adam_halvings"],
            task["adam_max_steps"],
            U=Ub,
        )
        W, V = res["W"], res["V"]
        w_eff = (W * V[:, None, :, 0]).reshape(B, -1)  # w_j = v_j W_j, (B, d k)
        pred = (gate_values(Xte @ Ub, "step") * (Xte @ W)) @ V  # (B, m_test, 1)
        out["adam_train_mse"] = res["train_mse"]
        out["adam_test_mse"] = [mse(pred[i, :, 0], yte[i]) for i in range(B)]
        out["adam_l1_sq"] = (w_eff.abs().sum(1) ** 2).tolist()
        out["adam_l2_sq"] = (w_eff**2).sum(1).tolist()
        out["adam_steps"] = res["steps"]
        out["adam_converged"] = res["converged"]
        out["status"] = "ok" if all(res["converged"]) else "unconverged"
    return out


@task(uses_device=True)
def fig5_task(task: dict) -> dict:
    """Fig. 5 for one (d', seed): training MSE against k on N(0,1) targets in R^{d'}.

    Every fit runs to a stopping rule on its loss and reports whether it converged (a capped
    run is unconverged) and its cost. GaLU by alternate convex search (stop when a round gains
    less than ``acs_tol`` relative, at most ``acs_iters`` rounds; only for d' <= ``acs_dout_max``,
    its cost grows with (kd)^3 per round) and by Adam on both layers with the same gates; ReLU by
    Adam (both Adam fits: ``train_widths_converged``, each width at its own size, the same
    networks as ``train_one_hidden_converged`` batched over the k grid with masks).
    """
    dev = _device(task)
    d = task["d"]
    X, Y = random_regression(task["m"], d, task["d_out"], task["seed"], dev)
    ks = [int(k) for k in task["k_grid"]]
    g = torch.Generator().manual_seed(task["seed"] + 1)
    gates = [torch.randn(d, k, generator=g, dtype=torch.float64).to(dev) for k in ks]
    out: dict = {"k": ks}
    if task["d_out"] <= task["acs_dout_max"]:
        start = time.perf_counter()
        runs = [
            acs_widths(X, Y, U, task["acs_iters"], "step", task["seed"] + 2, tol=task["acs_tol"])
            for U in gates
        ]
        out["acs_seconds"] = time.perf_counter() - start
        out["galu_acs"] = [r["losses"][-1] for r in runs]
        out["acs_rounds"] = [r["rounds"] for r in runs]
        out["acs_converged"] = [r["converged"] for r in runs]
        out["acs_nonincreasing"] = all(
            b <= a + 1e-12 for r in runs for a, b in zip(r["losses"], r["losses"][1:])
        )
    for arch, name in (("galu", "galu_adam"), ("relu", "relu")):
        start = time.perf_counter()
        res = train_widths_converged(
            X,
            Y,
            ks,
            arch,
            [task["seed"] + 3] * len(ks),
            task["adam_lr"],
            task["adam_window"],
            task["adam_tol"],
            task["adam_halvings"],
            task["adam_max_steps"],
            U=gates if arch == "galu" else None,
        )
        out[f"{name}_seconds"] = time.perf_counter() - start
        out[name] = res["train_mse"]
        out[f"{name}_steps"] = res["steps"]
        out[f"{name}_converged"] = res["converged"]
    flags = out["galu_adam_converged"] + out["relu_converged"] + out.get("acs_converged", [])
    out["status"] = "ok" if all(flags) else "unconverged"
    return out


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
    # the four models share their seed: trained side by side, one batched step for all
    res = train_classifiers(
        *tens,
        task["k"],
        task["models"],
        task["seed"],
        task["epochs"],
        task["lr"],
        task["batch_size"],
    )
    out = {}
    for model, r in res.items():
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


def _confirmatory_batches(cfg: dict) -> dict:
    """The Monte Carlo batches a seed plan adds (Theorem 1's and Lemma 1's "seeds" are batches
    of one sample; `data/seed_plans`): only where the profile asks for them, so that the tasks
    of a profile without them keep their keys."""
    n = cfg.get("mc_confirmatory_batches", 0)
    return {"confirmatory_batches": n} if n else {}


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
            **_confirmatory_batches(cfg),
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
        for kind, cases in (
            ("rank", cfg["thm1_rank_cases"]),
            ("few", cfg["thm1_few_gate_cases"]),
            ("lowdim", cfg["thm1_low_dim_cases"]),
        )
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
            "adam_lr": cfg["relu_lr"],
            "adam_window": cfg["adam_window"],
            "adam_tol": cfg["adam_tol"],
            "adam_halvings": cfg["adam_halvings"],
            "adam_max_steps": cfg["adam_max_steps"],
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
    """One run per seed over the noise grid of Fig. 4, run by `fig4_task`."""
    base = {k: cfg[f"fig3_{k}"] for k in ("m", "m_test", "d", "n_clusters", "k", "sigma_x")}
    return [
        {
            **base,
            "noise": cfg["fig4_sigma_y"],
            "seed": s,
            "adam_lr": cfg["relu_lr"],
            "adam_window": cfg["adam_window"],
            "adam_tol": cfg["adam_tol"],
            "adam_halvings": cfg["adam_halvings"],
            "adam_max_steps": cfg["adam_max_steps"],
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
                    # independent draws for every task: its own seed
                    "seed": 1000 * cfg["lemma1_seed"] + len(tasks),
                    "dist": dist,
                    "device": device,
                    **_confirmatory_batches(cfg),
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
            "acs_tol": cfg["fig5_acs_tol"],
            "acs_dout_max": cfg["fig5_acs_dout_max"],
            "adam_lr": cfg["relu_lr"],
            "adam_window": cfg["adam_window"],
            "adam_tol": cfg["adam_tol"],
            "adam_halvings": cfg["adam_halvings"],
            "adam_max_steps": cfg["adam_max_steps"],
            "device": device,
        }
        for dout, ks in zip(cfg["fig5_dout"], cfg["fig5_k"])
        for s in cfg["fig5_seeds"]
    ]
