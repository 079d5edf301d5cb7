"""Large-batch training: the generated data set, the warm-up and layer-wise optimizers in
real runs, the loss landscape, the study (quick runs and the committed cache: its claims
and that a rerun reproduces it), its figures, and bad input."""

import json
from dataclasses import replace

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from dlsys.cli import main
from dlsys.experiments import large_batch as lb
from dlsys.experiments import train
from dlsys.learn import data, landscape, nn, optim
from dlsys.train import TrainConfig
from dlsys.viz import large_batch as lbviz


@pytest.fixture(scope="module")
def quick():
    return lb.large_batch_study(lb.QUICK, path=None)


@pytest.fixture(scope="module")
def cached():
    return lb.require_study()  # a missing or stale cache fails here, saying what to run


# --- the data set ---------------------------------------------------------------------------


def test_augmented_digits_is_deterministic_balanced_and_held_out():
    X_train, X_test, y_train, y_test = data.augmented_digits(2000, 500, seed=3)
    again = data.augmented_digits(2000, 500, seed=3)
    assert np.array_equal(X_train, again[0]) and np.array_equal(y_test, again[3])
    assert X_train.shape == (2000, 256) and X_test.shape == (500, 256) and X_train.dtype == np.float32
    assert 0.0 <= X_train.min() and X_train.max() <= 1.0
    assert set(np.unique(y_train)) == set(range(10)) and np.bincount(y_train).min() > 150
    assert not np.array_equal(X_train, data.augmented_digits(2000, 500, seed=4)[0])


def test_warp_with_no_deformation_is_bilinear_upsampling():
    image = np.random.default_rng(0).random((1, 8, 8)).astype(np.float32)
    same = data.warp_images(image, 8, max_rotation_deg=0, scale_range=(1, 1), max_shear=0, max_shift=0, noise=0)
    np.testing.assert_allclose(same, image, atol=1e-6)  # output pixel centres fall on input pixel centres
    twice = data.warp_images(image, 16, max_rotation_deg=0, scale_range=(1, 1), max_shear=0, max_shift=0, noise=0)
    # output pixel i sits at input coordinate i / 2 - 0.25: pixel (4, 4) at (1.75, 1.75), a
    # bilinear mix of input pixels 1 and 2 in each direction, weights 1/4 and 3/4
    I = image[0]
    expected = (I[1, 1] + 3 * I[1, 2] + 3 * I[2, 1] + 9 * I[2, 2]) / 16
    assert twice[0, 4, 4] == pytest.approx(expected, abs=1e-6)
    np.testing.assert_allclose(np.asarray(twice.shape), (1, 16, 16))


# --- optimizers and schedules in training ---------------------------------------------------


def test_lamb_guards_zero_norm_layers_and_exposes_trust_ratios():
    params, grads = np.array([0.0, 0.0, 3.0, 4.0]), np.array([1.0, -1.0, 0.5, 0.5])
    slices = [nn.ParamSlice(0, "a", 0, 2), nn.ParamSlice(0, "b", 2, 2)]
    opt = optim.LAMB(params, grads, 0.1, slices, weight_decay=0.0)
    opt.step()
    # first step: m_hat = g, v_hat = g^2, r = g / (|g| + eps) ~ sign(g); layer a has ||w|| = 0: ratio 1
    r = grads / (np.abs(grads) + 1e-6)
    assert opt.trust_ratios[0] == 1.0
    assert opt.trust_ratios[1] == pytest.approx(5.0 / np.linalg.norm(r[2:]))
    np.testing.assert_allclose(
        params, [-0.1 * r[0], -0.1 * r[1], *(np.array([3.0, 4.0]) - 0.1 * 5.0 / np.linalg.norm(r[2:]) * r[2:])]
    )


def test_warmup_schedule_of_a_run_is_goyals_closed_form():
    rows = lb.lr_schedules(lb.QUICK, 512)
    per_epoch = len([r for r in rows if r["rule"] == "linear" and r["epoch"] < 1])
    warm = [r["lr"] for r in rows if r["rule"] == "linear + warm-up"]
    k, eta, steps = 512 / lb.QUICK.base_batch, lb.QUICK.base_lr, lb.QUICK.warmup_epochs * per_epoch
    expected = [eta + (k * eta - eta) * min(i, steps) / steps for i in range(len(warm))]
    np.testing.assert_allclose(warm, expected, rtol=1e-12)
    assert all(r["lr"] == pytest.approx(eta * np.sqrt(k)) for r in rows if r["rule"] == "sqrt")
    assert {r["lr"] for r in rows if r["rule"] == "fixed"} == {eta}


def layer_run(backend):
    config = TrainConfig(
        hidden=(16, 16), epochs=2, batch_size=32, lr=2.0, optimizer="lars", warmup_epochs=1, weight_decay=1e-4
    )
    return train("allreduce", config, 2, backend=backend, evals_per_epoch=2, record_layers=True)


def test_lars_with_warmup_is_identical_on_threads_and_processes():
    threads, processes = layer_run("threads"), layer_run("processes")
    assert np.array_equal(threads["params"], processes["params"])
    assert threads["accuracy_curve"] == processes["accuracy_curve"] and len(threads["accuracy_curve"]) == 4
    assert threads["layers"] == processes["layers"]
    assert threads["virtual_time_s"] == processes["virtual_time_s"]


def test_recorded_layer_norms_and_trust_ratios_are_larss():
    record = layer_run("threads")
    first = [r for r in record["layers"] if r["step"] == 0]
    assert [r["tensor"] for r in first] == [
        "linear0.W",
        "linear0.b",
        "linear2.W",
        "linear2.b",
        "linear4.W",
        "linear4.b",
    ]
    for r in first:
        expected = 1.0 if r["w_norm"] == 0 else 0.001 * r["w_norm"] / (r["g_norm"] + 1e-4 * r["w_norm"])
        assert r["trust_ratio"] == pytest.approx(expected, rel=1e-5)


# --- the loss landscape ---------------------------------------------------------------------


def test_loss_along_line_hits_both_ends_and_restores_the_weights():
    model = nn.mlp([4, 5, 3], seed=0)
    w_a, w_b = model.params.copy(), nn.mlp([4, 5, 3], seed=1).params.copy()
    X, y = np.random.default_rng(0).normal(size=(20, 4)), np.arange(20) % 3
    losses = landscape.loss_along_line(model, w_a, w_b, X, y, [0.0, 0.5, 1.0])
    assert losses[0] == landscape.loss_at(model, w_a, X, y) and losses[2] == landscape.loss_at(model, w_b, X, y)
    assert losses[1] == pytest.approx(landscape.loss_at(model, (w_a + w_b) / 2, X, y))
    assert np.array_equal(model.params, w_a)


def test_sharpness_of_a_linear_model_grows_with_the_box_and_vanishes_with_it():
    model = nn.Sequential([nn.Linear(2, 2)], (2,), dtype=np.float64)
    X, y = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 1])
    w = np.array([5.0, -5.0, -5.0, 5.0, 0.0, 0.0])  # a confident, correct classifier
    small, large = (landscape.sharpness(model, w, X, y, eps, samples=50) for eps in (1e-3, 1.0))
    assert 0 <= small < large / 100
    with pytest.raises(ValueError, match="epsilon"):
        landscape.sharpness(model, w, X, y, epsilon=0.0)
    with pytest.raises(ValueError, match="samples"):
        landscape.sharpness(model, w, X, y, samples=0)


# --- the study --------------------------------------------------------------------------------


def test_quick_study_has_every_experiment(quick):
    batches, rules = lb.QUICK.batches, lb.RULES
    assert {(r["rule"], r["batch"]) for r in quick["sweep"]} == {(rule, b) for rule in rules for b in batches}
    assert {r["optimizer"] for r in quick["optimizers"]} == set(lb.OPTIMIZERS)
    assert len(quick["time_to_accuracy"]) == len(lb.QUICK.scaling_workers) * len(lb.QUICK.scaling_batches)
    assert len(quick["landscape"]["train_loss"]) == len(lb.QUICK.landscape_alphas)
    # every rule is the same run at the base batch
    assert len({r["test_accuracy"] for r in quick["sweep"] if r["batch"] == lb.QUICK.base_batch}) == 1


def test_cached_study_warmup_keeps_larger_batches_than_linear_alone(cached):
    tolerance = cached["study"]["tolerance"]
    warm = lb.largest_good_batch(cached["sweep"], "linear + warm-up", tolerance)
    assert warm > lb.largest_good_batch(cached["sweep"], "linear", tolerance)
    assert warm > lb.largest_good_batch(cached["sweep"], "fixed", tolerance)


def test_cached_study_lars_or_lamb_matches_sgd_with_warmup_at_the_largest_batch(cached):
    largest = max(cached["study"]["batches"])
    accuracy = {r["optimizer"]: r["test_accuracy"] for r in cached["optimizers"] if r["batch"] == largest}
    assert max(accuracy["lars"], accuracy["lamb"]) >= accuracy["sgd + warm-up"]


def test_cached_study_shows_layer_ratios_orders_of_magnitude_apart(cached):
    """You et al. 2017's observation, in the SGD run: once the biases have moved, one step's
    ||w|| / ||g|| spans more than two orders of magnitude across tensors."""
    rows = [
        r
        for r in cached["layers"]
        if r["optimizer"] == "sgd + warm-up" and 0 < r["w_norm"] < np.inf and 0 < r["g_norm"] < np.inf
    ]  # before it diverges
    spans = [
        max(ratios) / min(ratios)
        for step in {r["step"] for r in rows}
        if len(ratios := [r["w_norm"] / r["g_norm"] for r in rows if r["step"] == step]) > 1
    ]
    assert max(spans) > 100


def test_a_cold_quick_study_gives_what_the_cache_was_made_with(cached, quick):
    """The canary of CACHE_VERSION: the cache records the quick study's accuracies (seconds
    to rerun); if the code now gives others, its results changed under the same version."""
    assert lb.quick_check(quick) == cached["quick_check"], (
        "the training code no longer gives the results results/large_batch.json was made with: bump CACHE_VERSION "
        "in dlsys/experiments/large_batch.py and rerun `dlsys train --sweep batch --out results/large_batch.json`"
    )


def test_a_cache_of_another_version_is_refused_with_what_to_run(tmp_path, monkeypatch):
    path = tmp_path / "large_batch.json"
    with pytest.raises(
        ValueError, match="large_batch.json is missing: run `dlsys train --sweep batch --out results/large_batch.json`"
    ):
        lb.require_study(lb.QUICK, path)
    path.write_text(json.dumps({"study": lb._jsonable(lb.asdict(lb.QUICK)), "version": lb.CACHE_VERSION}))
    assert lb.cache_problem(lb.QUICK, path) is None
    monkeypatch.setattr(lb, "CACHE_VERSION", lb.CACHE_VERSION + 1)
    with pytest.raises(ValueError, match=r"made by CACHE_VERSION \d+ and the code is at \d+: .*rerun `dlsys train"):
        lb.require_study(lb.QUICK, path)
    assert lb.load_study(lb.QUICK, path) is None


def test_a_rerun_reproduces_a_cached_point(cached):
    """The cache is what the code computes: the cheapest run of the study, redone. Virtual
    times exactly; accuracies within half the study's own tolerance, since the weights come
    from matmuls summed in the order of the CPU's BLAS kernel and 8 epochs amplify those last
    bits until some test samples change class (up to 29 of 8,000, 0.4 %, mid-training between
    numpy's OpenBLAS kernels for x86; OPENBLAS_CORETYPE=Prescott, Sandybridge, Nehalem)."""
    study = lb.Study()
    largest = max(study.batches)
    row = next(r for r in cached["sweep"] if r["rule"] == "sqrt" and r["batch"] == largest)
    with threadpool_limits(1, user_api="blas"):  # as the study runs: BLAS threads would fight the ranks
        record = train(
            "allreduce",
            lb.rule_config(study, "sqrt", largest),
            study.workers,
            link=study.link,
            node=study.node,
            evals_per_epoch=study.evals_per_epoch,
        )
    got, want = record["accuracy_curve"], row["curve"]
    assert [(p["epoch"], p["time_s"]) for p in got] == [(p["epoch"], p["time_s"]) for p in want]
    np.testing.assert_allclose(
        [p["test_accuracy"] for p in got] + [record["test_accuracy"]],
        [p["test_accuracy"] for p in want] + [row["test_accuracy"]],
        rtol=0,
        atol=study.tolerance / 2,
    )


def test_figures_draw_every_part(quick):
    assert len(lbviz.accuracy_vs_batch(quick["sweep"], 0.01).data) == len(lb.RULES)
    assert len(lbviz.lr_schedules(lb.lr_schedules(lb.QUICK, 512), 512).data) == len(lb.RULES) + 2
    heat = lbviz.layer_ratio_heatmap(quick["layers"], "lars", "trust")
    assert np.asarray(heat.data[0].z).shape[0] == 6
    assert len(lbviz.loss_landscape(quick["landscape"]).data) == 4
    assert len(lbviz.time_to_accuracy(quick["time_to_accuracy"], 0.9).data) >= 2


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(batches=(8, 32, 4096)), r"batch must be an integer in 2\.\.1347"),
        (dict(batches=(8, 33)), "multiple of workers"),
        (dict(base_batch=16), "base_batch must be among"),
        (dict(large_batches=(1024,)), "large_batches must be among"),
        (dict(warmup_epochs=5), "warmup_epochs must be an integer in 0..epochs"),
        (dict(trust_coefficient=-0.001), "trust_coefficient must be > 0"),
        (dict(scaling_workers=(1, 10**6)), "every scaling_workers entry must be an integer in 1.."),
        (
            dict(scaling_batches=(8, 1000)),
            r"every scaling_batches entry \(with 2 workers\) must be an integer in 1..673",
        ),
    ],
)
def test_bad_studies_are_refused_before_any_run(change, message):
    with pytest.raises(ValueError, match=message):
        lb.run_study(replace(lb.QUICK, **change))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(warmup_epochs=11, epochs=10), "warm-up cannot be longer than training"),
        (dict(trust_coefficient=-1.0), "trust_coefficient must be > 0"),
        (dict(optimizer="adam"), "optimizer must be one of sgd, lars, lamb"),
        (dict(weight_decay=-0.1), "weight_decay must be >= 0"),
    ],
)
def test_bad_configs_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_batch_larger_than_the_data_set_names_the_range():
    with pytest.raises(ValueError, match=r"batch_size must be an integer in 1\.\.673 for 2 workers"):
        train("allreduce", TrainConfig(batch_size=1000), 2)


def test_cli_sweep_quick_prints_the_table_and_rejects_misplaced_options(capsys, tmp_path):
    assert main(["train", "--sweep", "batch", "--quick", "--out", str(tmp_path / "q.json")]) == 0
    out = capsys.readouterr().out
    assert "test accuracy at global batch" in out and "linear + warm-up" in out and "sharpness" in out
    assert lb.load_study(lb.QUICK, tmp_path / "q.json") is not None
    assert main(["train", "--quick"]) == 2
    assert "--quick and --out apply to --sweep batch only" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--trust-coefficient", "-0.001"], "--trust-coefficient"),
        (["--warmup-epochs", "3", "--epochs", "2"], "--warmup-epochs must be an integer in 0..2"),
        (["--optimizer", "adam"], "--optimizer"),
    ],
)
def test_cli_rejects_bad_large_batch_options_by_name(argv, message, capsys):
    assert main(["train", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_trains_with_lars_and_warmup(capsys):
    assert (
        main(
            [
                "train",
                "--optimizer",
                "lars",
                "--lr",
                "2",
                "--warmup-epochs",
                "1",
                "--epochs",
                "2",
                "--workers",
                "2",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["optimizer"] == "lars" and out["warmup_epochs"] == 1 and out["test_accuracy"] > 0.5


def test_the_full_sweep_writes_the_tracked_cache_only_when_told(monkeypatch):
    """Issue 28: ``train --sweep batch`` overwrote results/large_batch.json; now its record
    goes to out/ (untracked) unless --out names a file."""
    import dlsys.cli.train as cli_train

    paths = []

    def fake_study(study, path, **kwargs):
        paths.append(path)
        return lb.load_study(lb.Study(), lb.CACHE_PATH) or pytest.skip("no cache here")

    monkeypatch.setattr(cli_train.large_batch, "large_batch_study", fake_study)
    main(["train", "--sweep", "batch"])
    main(["train", "--sweep", "batch", "--out", str(lb.CACHE_PATH)])
    assert paths[0] == cli_train.DEFAULT_SWEEP_OUT and not str(lb.CACHE_PATH).endswith(paths[0])
    assert paths[1] == str(lb.CACHE_PATH)


def test_lr_schedules_from_a_records_sample_count_are_the_datasets():
    """The app passes the cached study's train_samples instead of making the dataset."""
    record = lb.require_study()
    assert lb.lr_schedules(lb.Study(), 1024, record["train_samples"]) == lb.lr_schedules(lb.Study(), 1024)
