"""Imports point down the layers (docs/architecture.md) and no module imports itself back
through a circle, counting imports inside functions too (a lazy import is still a circle)."""

import ast
from pathlib import Path

import dlsys

ROOT = Path(dlsys.__file__).parent

# Higher layers may import lower ones; equal layers may import each other if no circle forms.
LAYER = {
    "checks": 0,
    "machine": 0,
    "outputs": 0,
    "units": 0,
    "lazy": 0,
    "options": 0,
    "learn": 1,
    "compress": 1,
    "comm": 2,
    "collectives": 3,
    "train": 4,
    "ps": 4,
    "schedule": 4,
    "planner": 4,
    "viz": 5,
    "exercises": 5,
    "experiments": 5,
    "grading": 5,
    "course": 6,
    "cli": 6,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set) -> set:
    """The dlsys modules ``path`` imports (``from . import x`` counts x if it is a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dlsys")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if not target.startswith("dlsys"):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & modules
            found |= subs if subs else {target}
    return {m for m in found if m in modules and m != name}


def graph() -> dict:
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    return {m: imports_of(p, set(files)) for m, p in files.items()}


def top(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_every_top_level_module_has_a_layer():
    assert {top(m) for m in graph()} - {""} <= set(LAYER), "add the new module to LAYER (and docs/architecture.md)"


def test_imports_point_down_the_layers():
    up = [(m, d) for m, deps in graph().items() for d in deps if top(m) and top(d) and LAYER[top(d)] > LAYER[top(m)]]
    assert up == [], f"imports running up the layers: {up}"


def circles(g: dict) -> list:
    """Every back edge of a depth-first walk, as the circle it closes."""
    state, path, found = {}, [], []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for d in sorted(g[m]):
            if state.get(d) == "open":
                found.append(path[path.index(d) :] + [d])
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m)
    return found


def test_no_import_circles_between_modules():
    assert circles(graph()) == []


def test_no_import_circles_between_packages():
    """dlsys.ps importing dlsys.learn.task runs dlsys/train/__init__ first: a package
    is one node here."""
    packages = {}
    for m, deps in graph().items():
        packages.setdefault(top(m), set()).update(top(d) for d in deps if top(d) != top(m))
    assert circles(packages) == []


# A topic's experiment, figure, command and page share its name across these layers
# (experiments/schedule.py, viz/schedule.py, cli/schedule.py, app/views/schedule.py), and so do
# its claims and its docs' tables (course/reproduce/scheduling.py, course/tables/scheduling.py).
PRESENTATION = {
    "dlsys/experiments",
    "dlsys/viz",
    "dlsys/cli",
    "app/views",
    "dlsys/course/reproduce",
    "dlsys/course/tables",
}


def test_a_file_name_finds_one_thing():
    """Grepping by file name finds one module, or one topic: its model plus the experiment,
    figure, command and page that present it. No base.py, common.py or utils.py twice."""
    repo = ROOT.parent
    by_name = {}
    for path in [*ROOT.rglob("*.py"), *(repo / "app").rglob("*.py")]:
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(path.relative_to(repo))
    clashes = {
        name: [str(p) for p in paths]
        for name, paths in by_name.items()
        if sum(str(p.parent) not in PRESENTATION for p in paths) > 1
    }
    assert clashes == {}, clashes
