#!/usr/bin/env python3
"""Writes the bundled virtual-machine profiles (estimator/models/profiles/vm*.json) from Cloud
Carbon Footprint's per-vCPU coefficients (estimator/models/sources/ccf-coefficients-aws-use.csv).

One profile per processor family that board detection names (exporter/src/board/cpu_family.rs),
and `vm` for a guest whose family has no figures: the median of those families' figures, as
Cloud Carbon Footprint does for an unknown microarchitecture. Each profile holds one vCPU's idle
and full-load power and is scaled by the estimator to the vCPUs of the node it predicts for.
    python3 scripts/vm-profiles.py      (run from anywhere; rewrites the files)
"""
import csv
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "estimator/models/sources/ccf-coefficients-aws-use.csv"
OUT = ROOT / "estimator/models/profiles"

# Profile slug -> the coefficients' architecture name.
FAMILIES = {
    "sandy-bridge": "Sandy Bridge",
    "ivy-bridge": "Ivy Bridge",
    "haswell": "Haswell",
    "broadwell": "Broadwell",
    "skylake": "Skylake",
    "cascade-lake": "Cascade Lake",
    "coffee-lake": "Coffee Lake",
    "ice-lake": "Ice Lake",
    "sapphire-rapids": "Sapphire Rapids",
    "emerald-rapids": "Emerald Rapids",
    "granite-rapids": "Granite Rapids",
    "epyc-gen1": "EPYC 1st Gen",
    "epyc-gen2": "EPYC 2nd Gen",
    "epyc-gen3": "EPYC 3rd Gen",
    "epyc-gen4": "EPYC 4th Gen",
    "epyc-gen5": "EPYC 5th Gen",
    # The coefficients give Graviton 2, 3, 3E and 4 (Neoverse N1, V1, V2) EPYC 2nd Gen's figures.
    "arm-neoverse": "Graviton2",
}

CITATION = (
    "Cloud Carbon Footprint usage coefficients for AWS (github.com/cloud-carbon-footprint/"
    "ccf-coefficients, output/coefficients-aws-use.csv at b0032d928c78, Apache-2.0; copy in "
    "estimator/models/sources): mean idle and full-load watts per hardware thread of the "
    "SPECpower_ssj2008 results for the family"
)


def profile(slug, idle, full, what):
    name = f"uncalibrated-{slug}"
    return {
        "schema_version": 1,
        "models": [
            {
                "name": name,
                "selector": {"default": True},
                "features": [],
                "regressor": {
                    "kind": "utilisation_interpolation",
                    "cpus": 1.0,
                    "max_watts": round(full, 4),
                    "scale_to_node_cpus": True,
                },
                "idle_power_watts": round(idle, 4),
                "attribution_weights": [
                    {"feature": "cpu_seconds_per_second", "watts_per_unit": round(full - idle, 4)}
                ],
                "scores": {},
                "source": (
                    f"Uncalibrated: never fitted to this node. A virtual machine's guest: {what}, "
                    f"{idle:.2f} W idle and {full:.2f} W at full load per vCPU, scaled by the "
                    f"estimator to the node's vCPUs (greenpipe_node_cpus). {CITATION}. This is "
                    "the guest's share of its host's CPU power by vCPU count, not a measurement: "
                    "it leaves out memory, storage, network and the data centre's overhead. "
                    "attribution weight = (max - idle) W per CPU-second. Written by "
                    "scripts/vm-profiles.py."
                ),
            }
        ],
    }


def main():
    with SOURCE.open() as f:
        rows = {r["Architecture"]: (float(r["Min Watts"]), float(r["Max Watts"])) for r in csv.DictReader(f)}
    written = []
    for slug, arch in FAMILIES.items():
        idle, full = rows[arch]
        written.append((f"vm-{slug}", profile(f"vm-{slug}", idle, full, f"processor family {arch}")))
    idles = [rows[a][0] for a in FAMILIES.values()]
    fulls = [rows[a][1] for a in FAMILIES.values()]
    idle, full = statistics.median(idles), statistics.median(fulls)
    what = (
        f"processor family unknown, the median of the {len(FAMILIES)} families' figures "
        f"(idle {min(idles):.2f}-{max(idles):.2f} W, full load {min(fulls):.2f}-{max(fulls):.2f} W "
        "per vCPU across them)"
    )
    written.append(("vm", profile("vm", idle, full, what)))
    for name, doc in written:
        (OUT / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    print("\n".join(f"{n}: idle {d['models'][0]['idle_power_watts']} W, max "
                    f"{d['models'][0]['regressor']['max_watts']} W per vCPU" for n, d in written))


if __name__ == "__main__":
    main()
