"""`make app` installs the core and the `app` extra, nothing else (Makefile, pyproject.toml):
so everything the app's pages import must come with them. The app's imports are loaded in
a fresh interpreter where every installed package outside that set fails to import."""

import ast
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _needed(dist: str, extras: tuple[str, ...], seen: set[str]) -> None:
    """The distributions ``dist[extras]`` installs, into ``seen`` (normalised names)."""
    name = re.sub(r"[-_.]+", "-", dist).lower()
    if name in seen:
        return
    seen.add(name)
    for text in metadata.requires(dist) or []:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            try:
                _needed(req.name, tuple(req.extras), seen)
            except metadata.PackageNotFoundError:
                pass  # an optional dependency this platform does not install


def _blocked() -> set[str]:
    """Top-level import names of installed distributions `make app` would not install."""
    app: set[str] = set()
    _needed("dlsys", ("app",), app)
    names = set()
    for module, dists in metadata.packages_distributions().items():
        if module.isidentifier() and all(re.sub(r"[-_.]+", "-", d).lower() not in app for d in dists):
            names.add(module)
    return names


def _app_imports() -> list[str]:
    """Every import statement at module level of the app's files (what loading a page
    runs), but those of the app's own modules."""
    local = {p.stem for p in (ROOT / "app").rglob("*.py")} | {"views"}
    statements = set()
    for path in (ROOT / "app").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            if all(name.split(".")[0] not in local for name in names):
                statements.add(ast.unparse(node))
    return sorted(statements)


BLOCKER = """
import importlib.abc, sys
BLOCKED = set({blocked!r})
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}}: not installed by make app", name=name)
sys.meta_path.insert(0, Block())
for statement in {modules!r}:
    exec(statement)
"""


def test_the_app_extra_holds_every_package_the_app_imports():
    blocked, modules = _blocked(), _app_imports()
    assert "pytest" in blocked and "jupytext" in blocked and "streamlit" not in blocked  # the check can fail
    assert "from dlsys.grading import playground as pg" in modules  # the playground's sandbox among them
    run = subprocess.run(
        [sys.executable, "-c", BLOCKER.format(blocked=sorted(blocked), modules=modules)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-1500:]


def test_make_app_installs_the_app_extra_alone():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^app: \$\(APP_STAMP\)$", makefile, re.M)
    recipe = re.search(r"^\$\(APP_STAMP\):.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert re.findall(r'-e "\.\[([a-z,]+)\]"', recipe) == ["app"]
