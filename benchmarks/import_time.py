"""A student's first import is light (issue 34): importing a collective or a compressor
imports neither the launcher nor the backends.

    .venv/bin/python benchmarks/import_time.py          # best of 5 fresh interpreters each
    .venv/bin/python benchmarks/import_time.py --json   # one JSON line

For each module, a fresh ``python -X importtime -c "import <module>"``: the cumulative time
of the import, numpy's share of it (every module here needs numpy, and on a busy machine it
dominates), and the ``dlsys`` modules the import loads (tests/comm/test_imports.py holds the
counts; time is too noisy to test). Target: under 0.3 s and 15 modules.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

MODULES = ("dlsys.collectives.ring", "dlsys.compress.topk")
TARGET_S, TARGET_MODULES = 0.3, 15
COUNT = "import sys, {m}; print(sum(1 for k in sys.modules if k == 'dlsys' or k.startswith('dlsys.')))"


def import_times(module: str) -> tuple[float, float]:
    """(the import's cumulative seconds, numpy's) in a fresh interpreter."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
    ).stderr
    cumulative = {}
    for line in err.splitlines()[1:]:  # "import time: self [us] | cumulative | imported package"
        _, cumulative_us, name = line.split("|")
        cumulative[name.strip()] = int(cumulative_us) / 1e6
    return cumulative[module], cumulative.get("numpy", 0.0)


def dlsys_modules(module: str) -> int:
    """How many ``dlsys`` modules importing ``module`` loads."""
    out = subprocess.run([sys.executable, "-c", COUNT.format(m=module)], capture_output=True, text=True, check=True)
    return int(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh interpreters per module (the best counts)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args()
    rows = []
    for module in MODULES:
        total_s, numpy_s = min(import_times(module) for _ in range(args.repeat))
        rows.append({"module": module, "import_s": total_s, "numpy_s": numpy_s, "modules": dlsys_modules(module)})
    if args.json:
        print(json.dumps(rows))
        return
    print(
        f"{'module':<26} {'import':>8} {'numpy':>8} {'dlsys modules':>14}   (target < {TARGET_S} s, < {TARGET_MODULES})"
    )
    for row in rows:
        print(f"{row['module']:<26} {row['import_s']:>7.3f}s {row['numpy_s']:>7.3f}s {row['modules']:>14}")


if __name__ == "__main__":
    main()
