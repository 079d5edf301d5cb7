"""The suite is laid out like the package: tests/comm/ holds dlsys.comm's tests, and so on;
the tests of the whole house (layers, golden traces, the README) stay here. A test module is
imported by its file name, unique across tests/, so a test may use another's helpers
(test_app.py lints its figures with test_figure_lint's): every folder of tests/ is on the
import path, and golden/ too (make_golden)."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
for folder in sorted(p for p in HERE.iterdir() if p.is_dir() and p.name not in ("exercises", "__pycache__")):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
