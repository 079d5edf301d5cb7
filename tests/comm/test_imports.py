"""A student's first import is light (issue 34): importing a collective or a compressor
imports neither the launcher nor the backends. Counted, not timed (CI's clocks are noisy):
benchmarks/import_time.py prints the times."""

import subprocess
import sys

import pytest

COUNT = "import sys, {m}; print(*sorted(k for k in sys.modules if k == 'dlsys' or k.startswith('dlsys.')))"


def loaded(module: str) -> list[str]:
    """The dlsys modules a fresh interpreter has after ``import module``."""
    out = subprocess.run([sys.executable, "-c", COUNT.format(m=module)], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("module", ["dlsys.collectives.ring", "dlsys.compress.topk"])
def test_first_import_is_light(module):
    modules = loaded(module)
    assert len(modules) < 15, modules
    assert not any(m.startswith(("dlsys.comm.backends", "dlsys.comm.launch", "dlsys.comm.replay")) for m in modules)


def test_lazy_names_resolve():
    """The packages' names still import, from the module that defines them."""
    import dlsys
    from dlsys import collectives, comm, compress

    assert dlsys.launch is comm.launch and comm.launch.__module__ == "dlsys.comm.launch"
    assert (
        collectives.allreduce.__module__ == "dlsys.collectives.dispatch"
        and "ring" in collectives.ALGORITHMS["allreduce"]
    )
    assert compress.COMPRESSORS["topk"].__name__ == "TopKCompressor"
    with pytest.raises(AttributeError):
        comm.no_such_name


def test_a_submodule_does_not_shadow_its_name():
    """``import dlsys.comm.launch`` first (as a test or a backend may) leaves
    ``dlsys.comm.launch`` the function, as it was when the package imported it eagerly."""
    script = "import dlsys.comm.launch; from dlsys.comm import launch; print(callable(launch), type(launch).__name__)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "function"]
