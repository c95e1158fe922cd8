#!/usr/bin/env python3
"""scikit-learn's side of the forest- and boosting-parity check (offline/src/parity.rs).

greenpipe-estimator writes the node's rows as a matrix CSV: the feature columns (raw values, the
columns every other bench uses: each canonical column that varies), `power_watts`, and `fold`,
the fold whose held-out set the row is in (-1: always in training, the `--always-train`
workloads Disk and Network). The folds are those of `crossval_sklearn.py --plain`:
leave-one-workload-out over the holdable workload groups, or, for a node with one workload
(kepler-nx12), its contiguous time blocks. This script fits scikit-learn's default model on
every fold's training rows, scores the held-out ones with the MAPE of crossval_sklearn.py, and
prints one JSON object:

    {"sklearn": "1.9.1", "model": "rf", "mape": [per fold], "mape_by_seed": [[per fold]],
     "fit_cpu_seconds": [per fold]}

With --seeds N (default 1) the default model is fitted N times per fold, `random_state`
0..N-1: "mape_by_seed" holds one list of per-fold MAPEs per seed, "mape" the first (a forest's
MAPE moves with its bootstrap draws, so two forests are compared over several seeds of each).

Fits run on one core (n_jobs=1, the default) and are timed with process_time, so
fit_cpu_seconds is the one-core fit time that the Rust side compares its own with.

With --weights W.csv --fold K --predictions OUT.csv (model rf only) it instead fits fold K's
forest on the bootstrap weights in W.csv (one line per tree, one integer per training row of the
fold in row order: what greenpipe-estimator's forest drew), tree t as
DecisionTreeRegressor(random_state=t) with sample_weight = weights, exactly what
RandomForestRegressor does with its own draws, and writes the forest's prediction per held-out
row, and (second column) the same forest grown with other random_state values: with the same
bootstrap samples two forests differ only where a tie between inputs is broken by the random
input order of each node, and the second column measures how much that alone moves
scikit-learn's own predictions.

Run with (scripts/setup.sh installs the pinned scikit-learn into .venv):
    .venv/bin/python benches/forest_parity.py /tmp/matrix.csv --model rf
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import pandas as pd
import sklearn
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crossval_sklearn import mape  # noqa: E402  (the one MAPE of the benches)


def model(name, seed=0):
    if name == "rf":
        return RandomForestRegressor(random_state=seed)
    if name == "gbr":
        return GradientBoostingRegressor(random_state=seed)
    raise SystemExit(f"unknown model {name!r}; known: rf, gbr")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("matrix")
    ap.add_argument("--model", default="rf")
    ap.add_argument("--weights")
    ap.add_argument("--fold", type=int)
    ap.add_argument("--predictions")
    ap.add_argument("--seeds", type=int, default=1)
    a = ap.parse_args()
    if a.seeds < 1:
        raise SystemExit(f"--seeds {a.seeds}: at least 1")
    df = pd.read_csv(a.matrix)
    features = [c for c in df.columns if c not in ("power_watts", "fold")]
    X, y, fold = df[features].to_numpy(float), df["power_watts"].to_numpy(float), df["fold"]
    fold = fold.to_numpy(int)
    if a.weights:
        if a.model != "rf" or a.fold is None or not a.predictions:
            raise SystemExit("--weights needs --model rf, --fold and --predictions")
        tr, te = fold != a.fold, fold == a.fold
        weights = np.loadtxt(a.weights, delimiter=",", dtype=float, ndmin=2)
        if weights.shape[1] != tr.sum():
            raise SystemExit(f"{a.weights}: {weights.shape[1]} weights per tree, "
                             f"fold {a.fold} has {tr.sum()} training rows")
        # Twice, with other random input orders: the second forest is scikit-learn against
        # itself on the same draws, the noise floor of the tie rule.
        pred, again = np.zeros(te.sum()), np.zeros(te.sum())
        for t, w in enumerate(weights):
            for out, seed in ((pred, t), (again, 1000 + t)):
                tree = DecisionTreeRegressor(random_state=seed).fit(X[tr], y[tr], sample_weight=w)
                out += tree.predict(X[te])
        pd.DataFrame({"predicted_watts": pred / len(weights),
                      "other_seeds_watts": again / len(weights)}).to_csv(a.predictions,
                                                                         index=False)
        return
    by_seed, cpu = [[] for _ in range(a.seeds)], []
    for k in sorted(set(fold) - {-1}):
        tr, te = fold != k, fold == k
        for seed in range(a.seeds):
            started = time.process_time()
            m = model(a.model, seed).fit(X[tr], y[tr])
            if seed == 0:
                cpu.append(time.process_time() - started)
            by_seed[seed].append(mape(y[te], m.predict(X[te])))
    print(json.dumps({"sklearn": sklearn.__version__, "model": a.model, "mape": by_seed[0],
                      "mape_by_seed": by_seed, "fit_cpu_seconds": cpu}))


if __name__ == "__main__":
    main()
