#!/usr/bin/env python3
"""Generates what loadtest/vulnerabilities.sh measures: catalogue rows for 100,000 components
(Go modules, Debian packages, Alpine packages, Conan recipes, ten versions of each name) as CSV
for PostgreSQL's COPY, an OSV set sized to the real data of the four ecosystems, and 100 new
advisories for a refresh. Deterministic (a fixed seed).

  osv-fixture.py OUT_DIR go=ID apt=ID apk=ID conan=ID

Record counts (osv.dev, December 2026, rounded): Go 5,000; Debian 45,000 (Debian's advisories
name source packages, several releases each); Alpine 12,000; ConanCenter 200 (not an osv.dev
ecosystem: a private feed's size).
"""
import csv
import json
import os
import random
import sys

RECORDS = {"Go": 5000, "Debian": 45000, "Alpine": 12000, "ConanCenter": 200}
# (names, versions of each): 100,000 components in all.
SHAPE = {"go": (3000, 10), "apt": (3000, 10), "apk": (2000, 10), "conan": (2000, 10)}


def versions(fmt, n):
    return {
        "go": [f"v1.{i}.0" for i in range(n)],
        "apt": [f"1.{i}-1" for i in range(n)],
        "apk": [f"1.{i}-r0" for i in range(n)],
        "conan": [f"1.{i}" for i in range(n)],
    }[fmt]


def name(fmt, i):
    return {"go": f"example.com/mod{i:05d}", "apt": f"src{i:05d}", "apk": f"apkpkg{i:05d}", "conan": f"recipe{i:05d}"}[fmt]


def components(out, repos):
    with open(os.path.join(out, "components.csv"), "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        for fmt, (names, per) in SHAPE.items():
            for i in range(names):
                n = name(fmt, i)
                for v in versions(fmt, per):
                    if fmt == "go":
                        key, ns, nm = f"{n}@{v}", "example.com", n.split("/", 1)[1]
                    elif fmt == "apt":
                        nm = f"lib{n}"
                        key, ns = f"pool/main/{n[0]}/{n}/{nm}_{v}_amd64.deb", ""
                    elif fmt == "apk":
                        key, ns, nm = f"{n}-{v}", "", n
                    else:
                        key, ns, nm = f"{n}/{v}#rev{i}", "", n
                    w.writerow([repos[fmt], fmt, key, ns, nm, v, 1796000000000, "bench"])


def record(rng, eco, i, prefix):
    fmt = {"Go": "go", "Debian": "apt", "Alpine": "apk", "ConanCenter": "conan"}[eco]
    names, per = SHAPE[fmt]
    target = rng.randrange(names)
    pkg = name(fmt, target)
    fixed = versions(fmt, per)[rng.randrange(1, per)]
    ecosystem = {"Debian": "Debian:12", "Alpine": "Alpine:v3.20"}.get(eco, eco)
    kind = "SEMVER" if eco == "Go" else "ECOSYSTEM"
    fixed = fixed[1:] if eco == "Go" else fixed
    r = {
        "schema_version": "1.6.0",
        "id": f"{prefix}-{eco.upper()}-{i:06d}",
        "modified": "2026-11-01T00:00:00Z",
        "summary": f"Generated advisory {i} of {pkg}",
        "aliases": [f"CVE-2026-{i:06d}"],
        "affected": [{"package": {"ecosystem": ecosystem, "name": pkg},
                      "ranges": [{"type": kind, "events": [{"introduced": "0"}, {"fixed": fixed}]}]}],
    }
    if i % 3 == 0:
        r["severity"] = [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}]
    else:
        r["database_specific"] = {"severity": ["LOW", "MODERATE", "HIGH"][i % 3]}
    return r


def main():
    out = sys.argv[1]
    repos = dict(a.split("=", 1) for a in sys.argv[2:])
    components(out, repos)
    rng = random.Random(41)
    records = [record(rng, eco, i, "BENCH") for eco, n in RECORDS.items() for i in range(n)]
    with open(os.path.join(out, "osv.json"), "w") as f:
        json.dump(records, f)
    new = [record(rng, "Go", i, "NEW") for i in range(100)]
    with open(os.path.join(out, "osv-new.json"), "w") as f:
        json.dump(records + new, f)
    print(f"{sum(n * p for n, p in SHAPE.values())} components, {len(records)} records, 100 new")


main()
