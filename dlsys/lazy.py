"""A package's names imported on first use (PEP 562), so that importing one module of a
package does not import the whole package: ``import dlsys.collectives.ring`` runs
``dlsys/collectives/__init__.py`` first, and that should not start the launcher, the
backends and the replay. Pure: the bottom layer, importable by all."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any


def lazy(package: str, **modules: Iterable[str]) -> tuple[Callable[[str], Any], list[str]]:
    """``__getattr__`` and ``__all__`` for ``package``, whose public names live in its
    submodules: ``lazy(__name__, launch=["launch", "LaunchResult"])`` imports
    ``package.launch`` when ``package.launch`` or ``package.LaunchResult`` is first asked for."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:  # Any: a type checker cannot see which name this is
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)  # asked once: later lookups find it directly
        return value

    if any(name == module for name, module in where.items()):
        sys.modules[package].__class__ = _Shadowed
    return __getattr__, list(where)


class _Shadowed(ModuleType):
    """A package that exports a name of one of its submodules (dlsys.comm's ``launch``, the
    function of dlsys/comm/launch.py): ``import package.launch`` binds the submodule as an
    attribute, and the exported name must win, as it did when the package imported it."""

    def __setattr__(self, name: str, value: object) -> None:
        if not (isinstance(value, ModuleType) and value.__name__ == f"{self.__name__}.{name}" and name in self.__all__):
            super().__setattr__(name, value)

    def __reduce__(self):  # pickled by name, as a plain module (cloudpickle sends programs that name it)
        return importlib.import_module, (self.__name__,)
