#!/usr/bin/env python3
"""Writes jobs.csv for `greenpipe-carbon replay`: a year (2022, UTC) of mixed work.

Deterministic (seeded Mersenne Twister, only `random()` draws, whose sequence Python keeps
stable across versions): `python3 gen_jobs.py > jobs.csv`.

* Batch jobs arrive as a Poisson process, 1.2 per hour on average with a daily cycle peaking at
  16:00 UTC (US business hours); 1-8 cores, 1-12 h. Deadline slack: 40 % tight (0-2 h),
  40 % a working day (8-16 h), 20 % two days (24-48 h). 30 % tolerate the red taint.
* 60 services start at random times, run 1-8 weeks on 2-4 cores; half tolerate red.
At this load the sample fleet (deploy/carbon/replay/fleet.toml, 120 cores) is about 40 % busy.
"""
import math
import random

START = 1640995200  # 2022-01-01T00:00:00Z
END = 1672531200    # 2023-01-01T00:00:00Z
rng = random.Random(2022)
rows = []

t = float(START)
while True:
    # Thinning of a rate-1.8/h process down to 1.2/h * (1 + 0.5 cos(...)).
    t += -math.log(1.0 - rng.random()) * 3600.0 / 1.8
    if t >= END:
        break
    hour = (t / 3600.0) % 24.0
    rate = 1.2 * (1.0 + 0.5 * math.cos(2.0 * math.pi * (hour - 16.0) / 24.0))
    if rng.random() * 1.8 > rate:
        continue
    arrival = int(t)
    cores = 1 + int(rng.random() * 8)
    minutes = 60 + int(rng.random() * 660)
    u = rng.random()
    if u < 0.4:
        slack = rng.random() * 2.0
    elif u < 0.8:
        slack = 8.0 + rng.random() * 8.0
    else:
        slack = 24.0 + rng.random() * 24.0
    deadline = arrival + minutes * 60 + int(slack * 3600)
    tolerates = "yes" if rng.random() < 0.3 else "no"
    rows.append((arrival, cores, f"{minutes}m", str(deadline), tolerates))

for _ in range(60):
    arrival = START + int(rng.random() * (END - START - 7 * 86400))
    cores = 2 + int(rng.random() * 3)
    hours = 24 * 7 * (1 + int(rng.random() * 8))
    tolerates = "yes" if rng.random() < 0.5 else "no"
    rows.append((arrival, cores, f"{hours}h", "none", tolerates))

rows.sort()
print("arrival,cores,duration,deadline,tolerates_red")
for r in rows:
    print(",".join(str(x) for x in r))
