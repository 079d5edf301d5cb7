import pytest

from dlsys.machine import profiles

# sum(p.numel() for p in torchvision.models.<name>().parameters()); GoogLeNet with
# aux_logits=False, Inception-v3 with its auxiliary classifier (the default).
TORCHVISION_PARAMS = {
    "alexnet": 61_100_840,
    "vgg19": 143_667_240,
    "resnet50": 25_557_032,
    "googlenet": 6_624_904,
    "inception_v3": 27_161_264,
}
# Forward GMACs per image, from torchvision's model documentation ("GFLOPS" column).
TORCHVISION_GMACS = {"alexnet": 0.71, "vgg19": 19.63, "resnet50": 4.09, "googlenet": 1.50, "inception_v3": 5.71}


@pytest.mark.parametrize("name", profiles.PROFILES)
def test_parameter_totals_match_torchvision_exactly(name):
    assert profiles.totals(name)[0] == TORCHVISION_PARAMS[name]


@pytest.mark.parametrize("name", profiles.PROFILES)
def test_forward_flops_agree_with_torchvision(name):
    gflops = profiles.totals(name)[1] / 1e9
    assert gflops == pytest.approx(2 * TORCHVISION_GMACS[name], rel=0.01)


@pytest.mark.parametrize("name", profiles.PROFILES)
def test_every_layer_is_named_once_and_has_work(name):
    layers = profiles.profile(name)
    assert len({layer.name for layer in layers}) == len(layers)
    assert all(layer.params > 0 and layer.fwd_flops > 0 for layer in layers)


def test_known_layers():
    alexnet = profiles.profile("alexnet")
    assert alexnet[0] == profiles.LayerProfile("features.0", 23_296, 55 * 55 * 64 * (2 * 363 + 1), 64)
    assert alexnet[-3].name == "classifier.1" and alexnet[-3].params == 9216 * 4096 + 4096
    resnet = profiles.profile("resnet50")
    assert len(resnet) == 54 and resnet[0].name == "conv1" and resnet[-1].name == "fc"
    assert sum(l.vectors for l in resnet) == 2 * 26_560 + 1000  # batch norm over 26,560 channels, fc's bias
    assert [l.name for l in profiles.profile("googlenet")][-2:] == ["inception5b.branch4.1", "fc"]
    assert [l.name for l in profiles.profile("vgg19")][-4:] == [
        "features.34",
        "classifier.0",
        "classifier.3",
        "classifier.6",
    ]


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="alexnet, vgg19, resnet50, googlenet, inception_v3"):
        profiles.profile("lenet")
