#!/usr/bin/env python3
"""Compares model-selection rules on the fits of one `crossval` run (nested, no peeking).

For each held-out workload g, every rule sees only the inner leave-one-workload-out
predictions (fits without g and h, scored on h) and picks a model (or a blend); the pick is
scored on g with the outer fit (without g). This is how offline/select.rs's median rule was
chosen.

Run with:
    target/release/greenpipe-estimator crossval --traces ../shared/datasets/power/bsc \
        --report /tmp/cv-bsc --always-train '^(Disk|Network)' --dump-predictions /tmp/preds
    /tmp/skl/bin/python benches/selection_rules.py /tmp/preds
(numpy, pandas and scipy: the scikit-learn venv of crossval_sklearn.py has them.)
"""
import glob
import os
import sys

import numpy as np
import pandas as pd
from scipy.optimize import nnls


def mape(p, y):
    return 100.0 * np.mean(np.abs(np.maximum(p, 0) - y) / y)


def load(prefix):
    rows = pd.read_csv(prefix + "__rows.csv")
    specs = open(prefix + "__specs.txt").read().splitlines()
    preds = pd.read_csv(prefix + "__predictions.csv")
    fits = {}
    for (sp, scored, g), d in preds.groupby(["spec", "scored_groups", "group"]):
        fits[(sp, frozenset(scored.split("+")), g)] = (d.row.to_numpy(), d.predicted_watts.to_numpy())
    return rows.power_watts.to_numpy(), specs, fits


def stack(inner_p, inner_y):
    """Non-negative weights summing to ~1, fitted on relative errors, each workload equal."""
    a = np.vstack([p / y[:, None] / np.sqrt(len(y)) for p, y in zip(inner_p, inner_y)])
    b = np.concatenate([np.ones(len(y)) / np.sqrt(len(y)) for y in inner_y])
    a = np.vstack([a, 100 * np.ones(a.shape[1])])
    return nnls(a, np.append(b, 100))[0]


def greedy(inner_p, inner_y, crit, steps=5):
    """Caruana-style ensemble selection with replacement on the inner predictions."""
    chosen = []
    def score(ens):
        return crit(np.array([mape(np.mean([p[:, c] for c in ens], 0), y)
                              for p, y in zip(inner_p, inner_y)]))
    for _ in range(steps):
        best = min(range(inner_p[0].shape[1]), key=lambda c: score(chosen + [c]))
        if chosen and score(chosen + [best]) >= score(chosen):
            break
        chosen.append(best)
    w = np.bincount(chosen, minlength=inner_p[0].shape[1]).astype(float)
    return w / w.sum()


RULES = {
    "mean": lambda s: s.mean(),
    "median (shipped)": lambda s: (np.median(s), s.mean()),
    "max": lambda s: s.max(),
    "mean + 0.5 max": lambda s: s.mean() + 0.5 * s.max(),
    "trimmed mean (drop worst)": lambda s: np.sort(s)[:-1].mean(),
    "rms": lambda s: np.sqrt((s ** 2).mean()),
}


def main():
    results = {}
    for prefix in sorted(p[:-len("__rows.csv")] for p in glob.glob(os.path.join(sys.argv[1], "*__rows.csv"))):
        y, specs, fits = load(prefix)
        node = os.path.basename(prefix)
        cands = [i for i, s in enumerate(specs) if not s.startswith("baseline")]
        hold = sorted({g for (sp, sc, g) in fits if len(sc) == 1 and sp in cands})
        per_rule = {}
        for g in hold:
            inner = [h for h in hold if h != g]
            inner_p = [np.column_stack([fits[(c, frozenset([g, h]), h)][1] for c in cands]) for h in inner]
            inner_y = [y[fits[(cands[0], frozenset([g, h]), h)][0]] for h in inner]
            rows_g = fits[(cands[0], frozenset([g]), g)][0]
            outer = np.column_stack([fits[(c, frozenset([g]), g)][1] for c in cands])
            s = np.array([[mape(p[:, k], yy) for p, yy in zip(inner_p, inner_y)] for k in range(len(cands))])
            for name, crit in RULES.items():
                k = min(range(len(cands)), key=lambda k: crit(s[k]))
                per_rule.setdefault(name, []).append(mape(outer[:, k], y[rows_g]))
            for name, w in [("stacking (NNLS)", stack(inner_p, inner_y)),
                            ("greedy ensemble, mean", greedy(inner_p, inner_y, np.mean)),
                            ("greedy ensemble, median", greedy(inner_p, inner_y, np.median))]:
                per_rule.setdefault(name, []).append(mape(outer @ w, y[rows_g]))
        results[node] = (hold, per_rule)
    nodes = list(results)
    print(f"{'rule':28s} {'mean':>6s}  " + "  ".join(f"{n[:16]:>16s}" for n in nodes) + "  worst workload per node")
    for rule in results[nodes[0]][1]:
        means = [np.mean(results[n][1][rule]) for n in nodes]
        worst = [max(zip(results[n][1][rule], results[n][0])) for n in nodes]
        print(f"{rule:28s} {np.mean(means):6.2f}  " + "  ".join(f"{m:16.2f}" for m in means)
              + "  " + ", ".join(f"{w} {v:.1f}" for v, w in worst))


if __name__ == "__main__":
    main()
