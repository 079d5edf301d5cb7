"""The dlsys command line."""

import json
import subprocess
import sys

import pytest

from dlsys.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "dlsys.cli", *args], capture_output=True, text=True, timeout=120)


def test_simulate_json_has_the_required_fields(capsys):
    assert main(["simulate", "allreduce", "--algo", "ring", "--ranks", "4", "--size", "64KiB", "--link", "rdma-edr", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    for key in ("virtual_time_s", "closed_form_s", "textbook_form_s", "relative_error", "algbw_Bps", "busbw_Bps",
                "bytes_sent_per_rank", "wall_time_s"):
        assert key in record
    assert record["relative_error"] < 1e-9
    assert record["busbw_Bps"] == pytest.approx(record["algbw_Bps"] * 2 * 3 / 4)


def test_simulate_plain_output_is_a_table_with_units(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert main(["simulate", "broadcast", "--algo", "scatter_allgather", "--ranks", "4", "--size", "1MiB",
                 "--backend", "processes", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "virtual time" in out and "closed form" in out and "textbook form" in out and "B/s" in out and " s" in out
    assert json.loads(trace.read_text())["traceEvents"]


@pytest.mark.parametrize("args,match", [
    (["simulate", "allreduce", "--algo", "telepathy"], "valid: ring"),
    (["simulate", "allreduce", "--size", "-4"], "--size must be > 0 bytes, got -4"),
    (["simulate", "allreduce", "--size=-5MiB"], "--size must be > 0 bytes, got -5MiB"),
    (["simulate", "allreduce", "--size", "-5MiB"], "--size must be > 0 bytes, got -5MiB"),
    (["simulate", "allreduce", "--size", "0"], "--size must be > 0 bytes, got 0"),
    (["simulate", "allreduce", "--size", "lots"], "--size must be a size in bytes"),
    (["simulate", "allreduce", "--ranks", "0"], "--ranks must be an integer in 1..4096, got 0"),
    (["simulate", "allreduce", "--ranks", "100000"], "--ranks must be an integer in 1..4096, got 100000"),
    (["simulate", "allreduce", "--ranks", "two"], "--ranks must be an integer in 1..4096, got two"),
    (["simulate", "allreduce", "--link", "wifi"], "invalid choice"),
    (["train", "--workers", "0"], "--workers must be an integer in 1..4096, got 0"),
    (["train", "--straggler", "3"], "--straggler must be WORKER:FACTOR, got 3"),
    (["train", "--lr", "-1"], "--lr must be a number > 0, got -1"),
    (["bench", "emulate", "--ranks", "1"], "--ranks must be an integer in 2..4096, got 1"),
    (["simulate", "allreduce", "--max-memory", "0"], "--max-memory must be > 0 bytes, got 0"),
    (["simulate", "allreduce", "--ranks", "8", "--size", "1GiB", "--real"], "more than the memory budget 1 GiB"),
    (["simulate", "allgather", "--ranks", "4096", "--size", "1GiB", "--max-memory", "32MiB"], "even one real element"),
    (["simulate", "allreduce", "--ranks", "512", "--max-memory", "1MiB"], "even one real element per block"),
    (["simulate", "scatter", "--ranks", "6", "--size", "1GiB"], "use a multiple of 6 elements"),
    (["simulate", "allreduce", "--ranks", "64", "--backend", "processes"], "use fewer ranks or the threads backend"),
    (["bench", "allreduce", "--ranks", "64", "--size", "16MiB"], "the real data path cannot scale its buffers"),
    (["train", "--hidden", "4096", "4096", "4096", "--workers", "64"], "more than the memory budget 1 GiB"),
])
def test_bad_arguments_exit_2_with_a_clear_message(args, match):
    out = run(*args)
    assert out.returncode == 2
    assert match in out.stderr
    assert "Traceback" not in out.stderr


def test_simulate_reports_the_scale_it_used(capsys):
    assert main(["simulate", "allreduce", "--ranks", "8", "--size", "1GiB", "--max-memory", "1MiB"]) == 0
    out = capsys.readouterr().out
    assert "real buffers    8 x 32 KiB, each element stands for 32,768; about 1 MiB of the 1 MiB budget" in out
    assert main(["simulate", "allreduce", "--ranks", "4", "--size", "1KiB", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["scale"] == 1 and record["real_nbytes"] == 1024 and record["max_memory_bytes"] == 2**30


def test_presets_json_lists_numbers_and_sources(capsys):
    assert main(["presets", "--json"]) == 0
    presets = json.loads(capsys.readouterr().out)
    assert presets["links"]["tcp-10gbe"]["bandwidth_Bps"] == 1.25e9
    assert presets["links"]["rdma-edr"]["latency_s"] > 0
    assert "TaihuLight" in presets["nodes"]["sw26010"]["source"]
    assert main(["presets"]) == 0
    assert "rdma-hdr" in capsys.readouterr().out
