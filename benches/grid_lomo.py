#!/usr/bin/env python3
"""Chooses the candidate grid and the selection rule across machines, not on them.

Reads the fits of one `crossval --grid wide --dump-predictions DIR` run over several machines
and replays, for every configuration (a subset of the wide grid, with or without the
hardware-counter variants, and a selection rule), the nested selection that `train` would make:
for each held-out workload g, every candidate of the configuration is ranked by its inner
leave-one-workload-out MAPEs (fits without g and h, scored on h), and the winner's outer fit
(without g) is scored on g. That gives each configuration's `selected` MAPE per machine.

Leave-one-machine-out (LOMO) then judges the *choice of configuration* the way a user's unseen
node would: for each machine m, the configuration with the lowest mean selected MAPE on the other
machines is picked and scored on m. A configuration that only helps the machines it was tuned on
shows up as a LOMO figure worse than its per-machine one.

Run with:
    target/release/greenpipe-estimator crossval --traces ../shared/datasets/power/bsc \
        --report /tmp/cv-wide --always-train '^(Disk|Network)' --grid wide \
        --dump-predictions /tmp/preds-wide
    /tmp/skl/bin/python benches/grid_lomo.py /tmp/preds-wide
(numpy and pandas: the scikit-learn venv of crossval_sklearn.py has them.)
"""
import glob
import os
import sys

import numpy as np
import pandas as pd

HIST_BOOST = "gradient_boosting(trees=150;lr=0.05;depth=3)"
HIST_FOREST = "random_forest(trees=40;depth=8)"
EXACT_FOREST = "random_forest(trees=100;depth=full;exact)"
EXACT_BOOST = "gradient_boosting(trees=100;lr=0.1;depth=3;exact)"
CLASSIC = {
    "ols", "ridge(alpha=0.1)", "ridge(alpha=1)", "lasso(alpha=0.1)", "lasso(alpha=1)",
    "elastic_net(alpha=0.1;l1=0.5)", "polynomial_ridge(alpha=0.1)", "polynomial_ridge(alpha=1)",
    "knn(k=10)", "knn(k=50)", HIST_BOOST, "gradient_boosting(linear_base;trees=150;lr=0.05;depth=3)",
    HIST_FOREST, f"ensemble({HIST_FOREST}+{HIST_BOOST})",
    f"ensemble({HIST_FOREST}+{HIST_BOOST}+polynomial_ridge(alpha=0.1))",
}
FOREST_OLS = f"ensemble({EXACT_FOREST}+ols)"
FOREST_RIDGE = f"ensemble({EXACT_FOREST}+ridge(alpha=1))"
NEW = {EXACT_FOREST, EXACT_BOOST, f"ensemble({EXACT_FOREST}+{HIST_BOOST})", FOREST_OLS,
       FOREST_RIDGE}
LEAN = {"ols", "ridge(alpha=1)", "polynomial_ridge(alpha=0.1)", HIST_BOOST, EXACT_FOREST,
        f"ensemble({EXACT_FOREST}+{HIST_BOOST})"}

# name -> (base candidates, counter variants offered)
GRIDS = {
    "classic + variants (issue 6)": (CLASSIC, True),
    "classic": (CLASSIC, False),
    "wide + variants": (CLASSIC | NEW, True),
    "wide": (CLASSIC | NEW, False),
    "classic + exact forest + variants": (CLASSIC | {EXACT_FOREST}, True),
    "classic + exact forest": (CLASSIC | {EXACT_FOREST}, False),
    "lean + variants": (LEAN, True),
    "lean": (LEAN, False),
    "exact forest only (no selection)": ({EXACT_FOREST}, False),
    "forest + ols average only (no selection)": ({FOREST_OLS}, False),
    "forest + ridge average only (no selection)": ({FOREST_RIDGE}, False),
    "exact boosting only (no selection)": ({EXACT_BOOST}, False),
    "exact forest, boosting, averages": ({EXACT_FOREST, EXACT_BOOST, FOREST_OLS, FOREST_RIDGE},
                                         False),
}
# name -> (criterion over the inner per-workload MAPEs, fewest inner folds to trust it: below
# that the exact forest is taken without selection)
RULES = {
    "median": (lambda s: (np.median(s), np.mean(s)), 0),
    "mean": (lambda s: (np.mean(s), 0.0), 0),
    "median, forest below 6 folds": (lambda s: (np.median(s), np.mean(s)), 6),
    "median, forest below 8 folds": (lambda s: (np.median(s), np.mean(s)), 8),
}


def mape(p, y):
    return 100.0 * np.mean(np.abs(np.maximum(p, 0) - y) / y)


def load(prefix):
    rows = pd.read_csv(prefix + "__rows.csv")
    specs = open(prefix + "__specs.txt").read().splitlines()
    preds = pd.read_csv(prefix + "__predictions.csv")
    y = rows.power_watts.to_numpy()
    score = {}
    for (sp, scored, g), d in preds.groupby(["spec", "scored_groups", "group"]):
        score[(sp, frozenset(scored.split("+")), g)] = mape(d.predicted_watts.to_numpy(),
                                                            y[d.row.to_numpy()])
    return specs, score


def in_grid(label, grid):
    base, variants = grid
    name, _, counter = label.partition("[-")
    return name in base and (variants or not counter)


def selected(specs, score, grid, rule):
    rule, trust = rule
    cands = [i for i, s in enumerate(specs) if not s.startswith("baseline") and in_grid(s, grid)]
    if not cands:
        return float("nan")
    hold = sorted({g for (sp, sc, g) in score if len(sc) == 1 and sp == cands[0]})
    forest = specs.index(EXACT_FOREST) if EXACT_FOREST in specs else None
    out = []
    for g in hold:
        inner = [h for h in hold if h != g]

        def crit(c):
            return rule(np.array([score[(c, frozenset([g, h]), h)] for h in inner]))
        if len(inner) < trust and forest is not None:
            best = forest
        else:
            best = cands[0] if len(cands) == 1 else min(cands, key=crit)
        out.append(score[(best, frozenset([g]), g)])
    return float(np.mean(out))


def main():
    machines = {}
    for prefix in sorted(p[:-len("__rows.csv")]
                         for p in glob.glob(os.path.join(sys.argv[1], "*__rows.csv"))):
        machines[os.path.basename(prefix)] = load(prefix)
    names = list(machines)
    configs = [(g, r) for g in GRIDS for r in RULES]
    table = {(g, r): {m: selected(*machines[m], GRIDS[g], RULES[r]) for m in names}
             for g, r in configs}
    print(f"{'grid':36s} {'rule':6s} {'mean':>6s}  " + "  ".join(f"{m[:16]:>16s}" for m in names))
    for c in configs:
        per = table[c]
        print(f"{c[0]:36s} {c[1]:6s} {np.mean(list(per.values())):6.2f}  "
              + "  ".join(f"{per[m]:16.2f}" for m in names))
    # Leave one machine out: choose the configuration on the others, score it on the one left.
    lomo = []
    print("\nleave-one-machine-out (configuration chosen on the other machines):")
    for m in names:
        others = [o for o in names if o != m]
        best = min(configs, key=lambda c: np.mean([table[c][o] for o in others]))
        lomo.append(table[best][m])
        print(f"  {m}: chose {best[0]} / {best[1]} -> {table[best][m]:.2f} %")
    print(f"LOMO mean selected MAPE: {np.mean(lomo):.2f} %")
    # The same for rules only, with the grid held fixed (how much the rule choice transfers).
    for g in GRIDS:
        per = []
        for m in names:
            others = [o for o in names if o != m]
            r = min(RULES, key=lambda r: np.mean([table[(g, r)][o] for o in others]))
            per.append(table[(g, r)][m])
        print(f"  rule chosen across machines, grid {g}: LOMO {np.mean(per):.2f} %")


if __name__ == "__main__":
    main()
