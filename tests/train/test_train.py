"""Data-parallel (all-reduce, local SGD) and model-parallel training: equivalences with
single-process SGD, accuracy on digits, checkpoints, communication volume, bad input."""

import json
from dataclasses import replace

import numpy as np
import pytest

import dlsys
from dlsys.experiments import train
from dlsys.learn import optim
from dlsys.train import STRATEGIES, DistributedOptimizer, TrainConfig, broadcast_parameters, build_model, split_stages

F64 = TrainConfig(epochs=2, batch_size=8, dtype="float64")


def close(a, b, rtol=1e-6):
    return np.max(np.abs(a - b)) <= rtol * np.max(np.abs(b))


def single_process(config: TrainConfig, workers: int) -> np.ndarray:
    """The reference: one process, batch workers * b."""
    return train("allreduce", replace(config, batch_size=workers * config.batch_size), 1)["params"]


def test_allreduce_p_workers_equal_one_process_with_p_times_the_batch():
    got = train("allreduce", F64, 4)["params"]
    assert close(got, single_process(F64, 4))
    assert not np.array_equal(got, build_model(F64).params)  # it did train


def test_model_parallel_pipeline_equals_one_process():
    got = train("model-parallel", F64, 4, micro_batches=3)["params"]
    assert close(got, single_process(F64, 4))


def test_local_sgd_with_period_1_is_synchronous_sgd():
    assert close(train("local-sgd", F64, 4, period=1)["params"], train("allreduce", F64, 4)["params"])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_reaches_95_percent_on_digits_with_4_workers(strategy):
    record = train(strategy, TrainConfig(epochs=10), 4)
    assert record["test_accuracy"] >= 0.95, record["test_accuracy"]
    assert record["virtual_time_s"] > 0 and record["bytes_moved"] > 0


def test_communicating_less_often_moves_fewer_bytes_in_less_time():
    config = TrainConfig(epochs=2)
    every_step = train("allreduce", config, 4)
    local = train("local-sgd", config, 4, period=4)
    bigger_batch = train("allreduce", replace(config, batch_size=128), 4)
    assert local["bytes_moved"] < every_step["bytes_moved"] / 3
    assert local["virtual_time_s"] < every_step["virtual_time_s"]
    assert bigger_batch["bytes_moved"] < every_step["bytes_moved"] / 3
    assert bigger_batch["virtual_time_s"] < every_step["virtual_time_s"]


def test_checkpoint_and_resume_are_bit_identical(tmp_path):
    config = TrainConfig(epochs=3)
    straight = train("allreduce", config, 4)["params"]
    path = tmp_path / "ckpt.npz"
    train("allreduce", replace(config, epochs=1), 4, checkpoint=path)
    with np.load(path) as ckpt:
        assert int(ckpt["step"]) == 10  # 1347 samples // (4 * 32) steps per epoch
    resumed = train("allreduce", config, 4, resume=path)["params"]
    assert np.array_equal(resumed, straight)


def test_horovod_programming_model_keeps_every_copy_identical():
    """A user program: broadcast rank 0's weights, wrap SGD, train on rank-local data."""

    def program(comm):
        model = build_model(replace(F64, seed=comm.rank))  # different initial weights per rank
        broadcast_parameters(comm, model.params)
        opt = DistributedOptimizer(optim.SGD(model.params, model.grads, lr=0.1), comm)
        for _ in range(3):
            model.grads[...] = comm.rng.standard_normal(model.grads.size)
            opt.step()
        return model.params

    values = dlsys.launch(program, 3, "threads").values
    assert all(np.array_equal(v, values[0]) for v in values)


def test_pipeline_stages_balance_flops_and_report_the_bubble():
    model = build_model(TrainConfig())
    assert split_stages(model, 4) == [(0, 1), (1, 3), (3, 4), (4, 5)]
    record = train("model-parallel", TrainConfig(epochs=1), 4, micro_batches=4)
    assert record["bubble_fraction"] == pytest.approx(3 / 7)
    assert all(m.label.startswith(("activation", "gather")) for m in record["result"].trace.messages)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"strategy": "gossip"}, "strategy must be one of"),
        ({"workers": 0}, "workers must be"),
        ({"workers": 100}, "exceeds the 1347 training samples"),
        ({"strategy": "model-parallel", "workers": 6}, "stages <= layers"),
        ({"straggler": (4, 2.0)}, "straggler worker"),
        ({"strategy": "allreduce", "fail": (0, 1)}, "parameter-server"),
        ({"strategy": "local-sgd", "period": 0}, "period must be"),
    ],
)
def test_bad_input_is_rejected_before_any_rank_starts(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train(**{"config": TrainConfig(epochs=1), **kwargs})


class Launched(Exception):
    """Raised in place of starting the ranks: everything before the launch accepted the call."""


def option_values(tmp_path) -> dict:
    """A value every registry option accepts, as a train() keyword (or the TrainConfig field) and as flags."""
    from dlsys.machine.storage import IOModel
    from dlsys.train import Compression

    return {
        "servers": (2, ["--servers", "2"]),
        "staleness": (3, ["--staleness", "3"]),
        "period": (2, ["--period", "2"]),
        "micro_batches": (2, ["--micro-batches", "2"]),
        "fail": ((1, 3), ["--fail", "1:3"]),
        "checkpoint": (tmp_path, ["--checkpoint", str(tmp_path)]),
        "resume": (tmp_path, ["--resume", str(tmp_path)]),
        "evals_per_epoch": (2, None),
        "record_layers": (True, None),
        "compression": (Compression("topk"), ["--compress", "topk"]),
        "io": (IOModel(batch_size=TrainConfig().batch_size), ["--storage", "hdd"]),
        "optimizer": ("lars", ["--optimizer", "lars"]),
        "warmup_epochs": (1, ["--warmup-epochs", "1"]),
    }


def test_every_registry_option_is_taken_by_the_strategies_listing_it_and_refused_by_name_elsewhere(
    tmp_path, monkeypatch
):
    from dlsys.experiments import training
    from dlsys.train.strategies import CONFIG_OPTIONS, OPTIONS

    def launch(program, ranks, backend, **kwargs):
        raise Launched(program, kwargs["kwargs"], kwargs["args"][0])

    monkeypatch.setattr(training, "launch", launch)
    values = option_values(tmp_path)
    assert values.keys() == OPTIONS.keys() | set(CONFIG_OPTIONS)
    config = TrainConfig(epochs=2)
    for name, strategy in STRATEGIES.items():
        for option, (value, _) in values.items():
            call = (
                {"config": replace(config, **{option: value})}
                if option in CONFIG_OPTIONS
                else {"config": config, option: value}
            )
            if option not in strategy.options:
                with pytest.raises(ValueError, match=f"^{option} is not an option of {name}; it is modelled for "):
                    train(name, workers=4, **call)
                continue
            with pytest.raises(Launched) as launched:
                train(name, workers=4, **call)
            program, kwargs, got = launched.value.args
            assert program is strategy.program
            assert (getattr(got, option) if option in CONFIG_OPTIONS else kwargs[option]) == value


def test_every_registry_option_on_the_command_line(tmp_path, monkeypatch, capsys):
    from dlsys.cli import main
    from dlsys.cli import train as cli_train

    def fake_train(strategy, config, workers, **kwargs):
        raise Launched(strategy)

    monkeypatch.setattr(cli_train, "train", fake_train)
    for name, strategy in STRATEGIES.items():
        for option, (_, flags) in option_values(tmp_path).items():
            if flags is None:  # not a flag of `dlsys train`
                continue
            assert flags[0] in cli_train.STRATEGY_OPTIONS[option].flag
            argv = ["train", "--strategy", name, "--epochs", "2", *flags]
            if option not in strategy.options:
                assert main(argv) == 2
                assert f"{cli_train.STRATEGY_OPTIONS[option].flag}: need --strategy " in capsys.readouterr().err
                continue
            with pytest.raises(Launched):
                main(argv)
    assert main(["train", "--strategy", "allreduce", "--staleness", "3"]) == 2
    assert "--staleness: need --strategy ps-ssp, got allreduce" in capsys.readouterr().err


def test_the_command_line_offers_the_registrys_strategies():
    from dlsys.cli import build_parser

    parser = build_parser("train")
    command = next(a for a in parser._subparsers._group_actions[0].choices.values())
    strategy = next(a for a in command._actions if a.dest == "strategy")
    assert strategy.choices == list(STRATEGIES)


def test_bad_config_names_the_argument():
    with pytest.raises(ValueError, match="model must be one of"):
        TrainConfig(model="resnet")
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=0)


def test_cli_train_json(capsys):
    from dlsys.cli import main

    assert main(["train", "--strategy", "local-sgd", "--epochs", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"test_accuracy", "virtual_time_s", "bytes_moved", "max_staleness"} <= out.keys()
    assert main(["train", "--strategy", "ps-asp", "--epochs", "1", "--straggler", "3:4"]) == 0
    text = capsys.readouterr().out
    assert "test accuracy" in text and "staleness histogram" in text and " ms " in text and " MB " in text


def test_training_page_runs_every_tab():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"), default_timeout=120)
    at.run()
    at.switch_page("views/training.py").run()
    for tab, settings in (
        ("Who waits: BSP, SSP, ASP", {"train_straggler": 8.0, "train_staleness": 0}),
        ("Push and pull", {"train_pp_servers": 3, "train_pp_consistency": "ps-asp"}),
        ("Data vs model parallel", {"train_micro": 16, "train_period": 1}),
    ):
        at.session_state["train_view"] = tab
        for key, value in settings.items():
            at.session_state[key] = value
        at.run()
        assert not at.exception and not at.error, tab
        assert len(at.get("plotly_chart")) + len(at.get("component_instance")) >= 2, tab  # animations: the player


def test_every_strategy_option_with_a_range_refuses_bad_input_naming_its_flag_and_range(capsys):
    """Each integer option, declared once (dlsys.train.strategies), below and above its range:
    refused on the command line by its flag, and by train() by its name."""
    from dlsys.cli import main
    from dlsys.train.strategies import CONFIG_OPTIONS, OPTIONS, taking

    for option in [*OPTIONS.values(), *CONFIG_OPTIONS.values()]:
        if option.kind != "integer":
            continue
        strategy = taking(option.name)[0]
        for bad in (option.low - 1, option.high + 1):
            assert main(["train", "--strategy", strategy, option.flag, str(int(bad))]) == 2
            err = capsys.readouterr().err
            assert f"{option.flag} must be an integer in {option.low}..{option.high}, got {int(bad)}" in err
        if option.name in OPTIONS:
            with pytest.raises(ValueError, match=f"^{option.name} must be an integer in {option.low}.."):
                train(strategy, TrainConfig(epochs=1), workers=2, **{option.name: int(option.low) - 1})


def test_names_in_any_case_on_the_command_line(monkeypatch):
    from dlsys.cli import build_parser

    args = build_parser("train").parse_args(
        [
            "train",
            "--strategy",
            "PS-SSP",
            "--model",
            "MLP",
            "--node",
            "V100",
            "--link",
            "RDMA-EDR",
            "--compress",
            "TopK",
        ]
    )
    assert (args.strategy, args.model, args.node, args.link, args.compress) == (
        "ps-ssp",
        "mlp",
        "v100",
        "rdma-edr",
        "topk",
    )
    assert build_parser("train").parse_args(["train", "--link", "10 Gb/s"]).link == "10 Gb/s"
