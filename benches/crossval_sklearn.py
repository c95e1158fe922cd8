#!/usr/bin/env python3
"""The work of `greenpipe-estimator crossval` done with scikit-learn, for the speed bar.

Same traces, same canonical columns (every column that varies), same groups (web_serving* is one
workload), same leave-one-workload-out with --always-train workloads kept in training, same
candidate grid with the same hyperparameters, same nested selection (leave-one-workload-out inside
the training workloads, median rule, shared fits), same two baselines, run on the same 2 cores (joblib).

Run with:
    python3 -m venv /tmp/skl && /tmp/skl/bin/pip install scikit-learn pandas
    /tmp/skl/bin/python benches/crossval_sklearn.py ../shared/datasets/power/bsc/bsc-xeon-e5-2650 \
        --always-train '^(Disk|Network)'
It prints the wall time and the mean LOWO MAPE per model and of the nested selection.

With --plain it runs instead scikit-learn's plain leave-one-workload-out (no nested selection) of
four families with their default settings: CPU-utilisation-only linear regression, linear
regression on every feature, GradientBoostingRegressor() and RandomForestRegressor(): the
reference of the "whole crossval at least 3x faster" bar and of the per-machine comparison in
docs/training.md. Every machine directory given is run in turn:
    /tmp/skl/bin/python benches/crossval_sklearn.py --plain ../shared/datasets/power/bsc/* \
        --always-train '^(Disk|Network)'
"""
import argparse
import glob
import os
import re
import time

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin, clone
from sklearn.ensemble import (GradientBoostingRegressor, HistGradientBoostingRegressor,
                              RandomForestRegressor, VotingRegressor)
from sklearn.linear_model import ElasticNet, Lasso, LinearRegression, Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

FEATURES = ["cpu_seconds_per_second", "cpu_cycles_per_second", "cpu_instructions_per_second",
            "cache_misses_per_second", "page_cache_hits_per_second", "network_bytes_per_second",
            "disk_bytes_per_second", "memory_used_bytes", "cpu_frequency_hertz"]


def group_of(workload):
    return re.sub(r"_(run|series)\d+$", "", workload)


class RidgeMeanScaled(RegressorMixin, BaseEstimator):
    """Ridge with the penalty scaled like our elastic net: 1/(2n)|y-Xw|^2 + alpha/2 |w|^2."""

    def __init__(self, alpha=1.0, poly=False):
        self.alpha, self.poly = alpha, poly

    def fit(self, X, y):
        if self.poly:
            X = PolynomialFeatures(2, include_bias=False).fit_transform(X)
        self.m_ = Ridge(alpha=self.alpha * len(y)).fit(X, y)
        return self

    def predict(self, X):
        if self.poly:
            X = PolynomialFeatures(2, include_bias=False).fit_transform(X)
        return self.m_.predict(X)


class KnnSubsampled(RegressorMixin, BaseEstimator):
    """kNN on at most 2000 evenly spaced training rows, as ours stores."""

    def __init__(self, k=10):
        self.k = k

    def fit(self, X, y):
        stride = max(1, -(-len(y) // 2000))
        self.m_ = KNeighborsRegressor(n_neighbors=self.k).fit(X[::stride], y[::stride])
        return self

    def predict(self, X):
        return self.m_.predict(X)


class LinearBaseBoosting(RegressorMixin, BaseEstimator):
    """Ridge line, then histogram gradient boosting on its residuals."""

    def __init__(self, linear_base=False):
        self.linear_base = linear_base

    def fit(self, X, y):
        base = np.zeros(len(y))
        self.lin_ = None
        if self.linear_base:
            self.lin_ = RidgeMeanScaled(0.01).fit(X, y)
            base = self.lin_.predict(X)
        self.gb_ = HistGradientBoostingRegressor(
            max_iter=150, learning_rate=0.05, max_depth=3, min_samples_leaf=20, max_bins=64,
            early_stopping=False, random_state=7).fit(X, y - base)
        return self

    def predict(self, X):
        base = self.lin_.predict(X) if self.lin_ is not None else 0.0
        return base + self.gb_.predict(X)


def wide_extra():
    """The candidates `--grid wide` adds to the classic grid: scikit-learn's default forest and
    boosting, and the default forest's ensemble with the histogram boosting."""
    sc = StandardScaler
    return [
        ("random_forest(trees=100;depth=full;exact)",
         make_pipeline(sc(), RandomForestRegressor(random_state=7))),
        ("gradient_boosting(trees=100;lr=0.1;depth=3;exact)",
         make_pipeline(sc(), GradientBoostingRegressor(random_state=7))),
        ("ensemble(random_forest(trees=100;depth=full;exact)+gradient_boosting)",
         make_pipeline(sc(), VotingRegressor([("rf", RandomForestRegressor(random_state=7)),
                                              ("gb", LinearBaseBoosting(False))]))),
    ]


def grid(name):
    """greenpipe-estimator's `--grid NAME` (offline/models/mod.rs)."""
    if name == "classic":
        return candidates()
    if name == "wide":
        return candidates() + wide_extra()
    raise SystemExit(f"unknown grid {name}")


def candidates():
    sc = StandardScaler

    def forest():
        return RandomForestRegressor(n_estimators=40, max_depth=8, min_samples_leaf=5,
                                     max_features=1 / 3, random_state=7)

    return [
        ("ols", make_pipeline(sc(), LinearRegression())),
        ("ridge(alpha=0.1)", make_pipeline(sc(), RidgeMeanScaled(0.1))),
        ("ridge(alpha=1)", make_pipeline(sc(), RidgeMeanScaled(1.0))),
        ("lasso(alpha=0.1)", make_pipeline(sc(), Lasso(alpha=0.1, max_iter=5000, tol=1e-6))),
        ("lasso(alpha=1)", make_pipeline(sc(), Lasso(alpha=1.0, max_iter=5000, tol=1e-6))),
        ("elastic_net(alpha=0.1;l1=0.5)",
         make_pipeline(sc(), ElasticNet(alpha=0.1, l1_ratio=0.5, max_iter=5000, tol=1e-6))),
        ("polynomial_ridge(alpha=0.1)", make_pipeline(sc(), RidgeMeanScaled(0.1, poly=True))),
        ("polynomial_ridge(alpha=1)", make_pipeline(sc(), RidgeMeanScaled(1.0, poly=True))),
        ("knn(k=10)", make_pipeline(sc(), KnnSubsampled(10))),
        ("knn(k=50)", make_pipeline(sc(), KnnSubsampled(50))),
        ("gradient_boosting", make_pipeline(sc(), LinearBaseBoosting(False))),
        ("gradient_boosting(linear_base)", make_pipeline(sc(), LinearBaseBoosting(True))),
        ("random_forest(trees=40;depth=8)", make_pipeline(sc(), forest())),
        ("ensemble(forest+boosting)", make_pipeline(sc(), VotingRegressor(
            [("rf", forest()), ("gb", LinearBaseBoosting(False))]))),
        ("ensemble(forest+boosting+polynomial_ridge)", make_pipeline(sc(), VotingRegressor(
            [("rf", forest()), ("gb", LinearBaseBoosting(False)),
             ("poly", RidgeMeanScaled(0.1, poly=True))]))),
    ]


class Columns(BaseEstimator, TransformerMixin):
    """Keeps the columns `keep` (a tree model offered without one hardware counter)."""

    def __init__(self, keep=None):
        self.keep = keep

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X[:, self.keep]


COUNTERS = ["cpu_cycles_per_second", "cpu_instructions_per_second", "cache_misses_per_second"]


def counter_variants(cands, used):
    """greenpipe-estimator's evaluate::candidate_specs: every tree model again without each
    hardware counter the node has, labelled name[-column]."""
    out = []
    for name, model in cands:
        if not any(t in name for t in ("boosting", "forest", "ensemble")):
            continue
        for c in COUNTERS:
            if c in used:
                keep = [i for i, f in enumerate(used) if f != c]
                out.append((f"{name}[-{c}]", make_pipeline(Columns(keep), clone(model))))
    return out


def mape(y, p):
    return 100.0 * np.mean(np.abs((np.maximum(p, 0) - y) / y))


def folds(groups_sizes, k):
    k = min(k, len(groups_sizes))
    bins = [[0, []] for _ in range(k)]
    for g, n in sorted(groups_sizes.items(), key=lambda x: (-x[1], x[0])):
        b = min(bins, key=lambda b: (b[0], len(b[1])))
        b[0] += n
        b[1].append(g)
    return [b[1] for b in bins if b[1]]


def job(model, X, y, groups, train_groups, test_groups):
    tr = np.isin(groups, train_groups)
    m = clone(model).fit(X[tr], y[tr])
    return {g: mape(y[groups == g], m.predict(X[groups == g])) for g in test_groups}


def load(directory):
    frames = [pd.read_csv(f) for f in sorted(glob.glob(os.path.join(directory, "*.csv")))]
    df = pd.concat(frames).dropna(subset=["power_watts"])
    used = [f for f in FEATURES if df[f].notna().any() and df[f].nunique() > 1]
    return df.dropna(subset=used), used


def plain(directory, always_train):
    """Plain leave-one-workload-out of four default-settings families (no selection)."""
    df, used = load(directory)
    started = time.time()
    X, y = df[used].to_numpy(float), df["power_watts"].to_numpy(float)
    groups = df["workload"].map(group_of).to_numpy()
    names = list(dict.fromkeys(groups))
    holdable = [g for g in names if not (always_train and re.search(always_train, g))]
    cpu = used.index("cpu_seconds_per_second")
    families = [
        ("cpu_linear", LinearRegression(), [cpu]),
        ("linear", LinearRegression(), list(range(len(used)))),
        ("GradientBoostingRegressor()", GradientBoostingRegressor(random_state=0),
         list(range(len(used)))),
        ("RandomForestRegressor()", RandomForestRegressor(random_state=0),
         list(range(len(used)))),
    ]
    tasks = [(name, g) for name, _, _ in families for g in holdable]
    cols = {name: c for name, _, c in families}
    models = {name: m for name, m, _ in families}
    out = Parallel(n_jobs=2)(
        delayed(job)(models[name], X[:, cols[name]], y, groups, [x for x in names if x != g], [g])
        for name, g in tasks)
    elapsed = time.time() - started
    print(f"{os.path.basename(os.path.normpath(directory))}: plain LOWO of 4 families, "
          f"{len(tasks)} fits, wall {elapsed:.1f} s, features {used}")
    for name, _, _ in families:
        per = [r[g] for (n, g), r in zip(tasks, out) if n == name]
        print(f"  {name:32s} LOWO MAPE {np.mean(per):6.2f} %  "
              + " ".join(f"{g}={v:.1f}" for g, v in zip(holdable, per)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="+")
    ap.add_argument("--always-train", default=None)
    ap.add_argument("--stress-pattern", default="stress|cpu")
    ap.add_argument("--folds", type=int, default=None,
                    help="inner grouped k-fold (default: leave one workload out)")
    ap.add_argument("--skip-ensembles", action="store_true",
                    help="leave out the ensemble candidates (VotingRegressor refits its members, "
                         "greenpipe-estimator reuses them)")
    ap.add_argument("--no-counter-variants", action="store_true",
                    help="offer tree models on all features only, as "
                         "greenpipe-estimator crossval --no-counter-variants")
    ap.add_argument("--grid", default="classic", help="classic or wide, as greenpipe-estimator")
    ap.add_argument("--plain", action="store_true",
                    help="plain LOWO of four default-settings families instead (see above)")
    a = ap.parse_args()
    if a.plain:
        for d in a.dir:
            plain(d, a.always_train)
        return
    df, used = load(a.dir[0])
    started = time.time()
    X, y = df[used].to_numpy(float), df["power_watts"].to_numpy(float)
    groups = df["workload"].map(group_of).to_numpy()
    names = list(dict.fromkeys(groups))
    always = [g for g in names if a.always_train and re.search(a.always_train, g)]
    holdable = [g for g in names if g not in always]
    sizes = {g: int((groups == g).sum()) for g in names}
    cands = [c for c in grid(a.grid) if not (a.skip_ensembles and c[0].startswith("ensemble"))]
    if not a.no_counter_variants:
        cands += counter_variants(cands, used)
    specs = list(cands) + [("baseline_cpu_linear", "cpu")]
    stress = [g for g in names if re.search(a.stress_pattern, g)]
    if stress:
        specs.append(("baseline_stress_trained", "stress"))
    # One fit per (spec, training groups), scoring every group asked for: with
    # leave-one-workload-out inside, "without g then h" and "without h then g" are one fit,
    # exactly as greenpipe-estimator's plan shares them.
    plan = {}

    def request(si, train, test):
        key = (si, frozenset(train))
        plan.setdefault(key, set()).update(test)
        return key

    cpu = used.index("cpu_seconds_per_second")
    outer_keys, inner_keys = {}, {}
    for g in holdable:
        others = [x for x in names if x != g]
        for si, (name, model) in enumerate(specs):
            train = [x for x in others if x in stress] if model == "stress" else others
            outer_keys[(g, si)] = request(si, train, [g])
        pool = [x for x in holdable if x != g]
        for test in folds({x: sizes[x] for x in pool}, a.folds or len(pool)):
            train = [x for x in pool + always if x not in test]
            for si in range(len(cands)):
                inner_keys.setdefault((g, si), []).append((request(si, train, test), test))

    def make(si, train, test):
        name, model = specs[si]
        if model == "cpu":
            return delayed(job)(make_pipeline(StandardScaler(), LinearRegression()),
                                X[:, [cpu]], y, groups, list(train), sorted(test))
        if model == "stress":
            return delayed(job)(make_pipeline(StandardScaler(), LinearRegression()),
                                X, y, groups, list(train), sorted(test))
        return delayed(job)(model, X, y, groups, list(train), sorted(test))

    keys = list(plan)
    results = dict(zip(keys, Parallel(n_jobs=2)(make(si, tr, plan[(si, tr)]) for si, tr in keys)))
    elapsed = time.time() - started
    print(f"wall time {elapsed:.1f} s for {len(keys)} fits on {len(y)} rows, features {used}")
    outer = {k: results[v][k[0]] for k, v in outer_keys.items()}
    for si, (name, _) in enumerate(specs):
        print(f"{name:40s} LOWO MAPE {np.mean([outer[(g, si)] for g in holdable]):6.2f} %")
    sel = []
    for g in holdable:
        # The selection rule of greenpipe-estimator (offline/select.rs): lowest median
        # per-workload inner MAPE, ties to the lowest mean.
        def criterion(si):
            m = [results[key][h] for key, test in inner_keys[(g, si)] for h in test]
            return (np.median(m), np.mean(m))
        best = min(range(len(cands)), key=criterion)
        sel.append(outer[(g, best)])
        print(f"  held out {g}: selected {cands[best][0]} -> {outer[(g, best)]:.2f} %")
    print(f"{'selected':40s} LOWO MAPE {np.mean(sel):6.2f} %")


if __name__ == "__main__":
    main()
