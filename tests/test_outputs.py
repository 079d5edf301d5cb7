"""Outputs a user cannot lose: every output path refused before any work, every file written
whole or not at all (dlsys.outputs; issue 25, finding 7)."""

import errno
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from dlsys.cli import main
from dlsys.outputs import check_writable, write_atomic


@pytest.fixture
def read_only(tmp_path):
    """A folder nobody may write into: chmod for a user, a read-only tmpfs for root (who
    ignores permission bits)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True
    ).returncode:
        pytest.skip("root without mount: no read-only folder to test")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def full_disk_after(nbytes: int):
    """An os.fdopen whose file takes ``nbytes`` and then fails as a full disk does."""
    real = os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.f = real(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:nbytes])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "the temporary file")

    return Full


def test_a_full_disk_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text('{"score": 10}')
    monkeypatch.setattr(os, "fdopen", full_disk_after(5))
    with pytest.raises(OSError, match="No space"):
        write_atomic(path, json.dumps({"score": 0, "tests": ["x" * 1000]}))
    assert path.read_text() == '{"score": 10}' and os.listdir(tmp_path) == ["results.json"]


def test_write_atomic_replaces_whole_and_keeps_the_umask_mode(tmp_path):
    path = write_atomic(tmp_path / "a.json", "old")
    write_atomic(path, b"new")
    umask = os.umask(0)
    os.umask(umask)
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["a.json"]
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_full_disk_during_trace_keeps_the_old_trace_and_says_so(tmp_path, monkeypatch, capsys):
    trace = tmp_path / "t.json"
    trace.write_text("old trace")
    monkeypatch.setattr(os, "fdopen", full_disk_after(10))
    assert main(["simulate", "allreduce", "--ranks", "2", "--size", "1KiB", "--trace", str(trace)]) == 1
    assert "could not write" in capsys.readouterr().err
    assert trace.read_text() == "old trace" and os.listdir(tmp_path) == ["t.json"]


def test_check_writable_names_what_is_wrong(tmp_path, read_only):
    with pytest.raises(ValueError, match="does not exist"):
        check_writable(tmp_path / "missing" / "x.json")
    with pytest.raises(ValueError, match="is a directory"):
        check_writable(tmp_path)
    with pytest.raises(ValueError, match="not writable"):
        check_writable(read_only / "x.json")
    assert check_writable(tmp_path / "x.json") == tmp_path / "x.json" and os.listdir(tmp_path) == ["ro"]


# Every option that names a file or folder a command writes, in a command that would
# otherwise work for a long time (the sweep: minutes; grade: a minute).
WRITERS = [
    (["simulate", "allreduce", "--ranks", "64", "--size", "1GiB", "--trace"], "--trace", "file"),
    (["schedule", "--model", "vgg19", "--trace"], "--trace", "file"),
    (["train", "--epochs", "5", "--trace"], "--trace", "file"),
    (["train", "--sweep", "batch", "--out"], "--out", "file"),
    (["grade", "--json"], "--json", "file"),
    (["exercises", "gradescope", "hw1", "ring_allreduce", "-o"], "-o", "file"),
    (["exercises", "release"], "dir", "folder"),
    (["lessons", "build", "--out"], "--out", "folder"),
    (["train", "--epochs", "5", "--checkpoint"], "--checkpoint", "place"),
]


@pytest.mark.parametrize("args,flag,kind", WRITERS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
@pytest.mark.parametrize("where", ["missing folder", "read-only folder", "not the right kind"])
def test_every_output_path_is_refused_before_any_work(args, flag, kind, where, tmp_path, read_only, capsys):
    path = {
        "missing folder": tmp_path / "missing" / "sub" / "out.json",
        "read-only folder": read_only / ("out.json" if kind == "file" else "sub"),
        "not the right kind": {"file": tmp_path, "folder": Path(__file__), "place": Path(__file__) / "x"}[kind],
    }[where]
    before = sorted(Path(tmp_path).rglob("*"))
    start = time.monotonic()
    assert main([*args, str(path)]) == 2
    assert time.monotonic() - start < 5, "refused only after the work"
    error = capsys.readouterr().err.strip().splitlines()[-1]  # argparse's usage lines, then the one line
    assert f"error: {flag} must" in error and error.endswith(f"got {path}")
    assert sorted(Path(tmp_path).rglob("*")) == before, "wrote something"
