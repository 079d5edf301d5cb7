"""A package's names imported on first use (PEP 562), so that importing one module of a
package does not import the whole package: ``import dlsys.collectives.ring`` runs
``dlsys/collectives/__init__.py`` first, and that should not start the launcher, the
backends and the replay. Pure: the bottom layer, importable by all."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from types import ModuleType


def lazy(package: str, **modules: Iterable[str]) -> tuple[Callable[[str], object], list[str]]:
    """``__getattr__`` and ``__all__`` for ``package``, whose public names live in its
    submodules: ``lazy(__name__, launch=["launch", "LaunchResult"])`` imports
    ``package.launch`` when ``package.launch`` or ``package.LaunchResult`` is first asked for."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)  # asked once: later lookups find it directly
        return value

    class Package(ModuleType):
        def __setattr__(self, name: str, value: object) -> None:
            # ``import package.launch`` binds the submodule as an attribute; where a name
            # it exports is the submodule's own (dlsys.comm.launch, the function), the name wins
            if not (name in where and isinstance(value, ModuleType)):
                super().__setattr__(name, value)

    sys.modules[package].__class__ = Package
    return __getattr__, list(where)
