"""What a located case says, where the case test alone (fix or decline) would not notice a
wrong reason: the traced weight loads of conv-in-channels, the batch-to-batch channel change,
the attribute a device-mismatch diagnosis names."""

from __future__ import annotations

from dataclasses import replace

from repairbot.edits import Site
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline
from tests.support import pattern_cases
from tests.test_pattern_cases import _evidence, _locate

CASES = {case.id: case for case in pattern_cases()}


def test_a_load_in_a_helper_of_another_file_is_traced() -> None:
    found = _locate(CASES["conv-in-channels/decline_loaded_in_helper"], Sources())
    assert isinstance(found, Decline)
    assert "Classifier.load_state_dict at" in found.reason and "checkpoints.py:7 filled conv1 weight (traced)" in found.reason


def test_a_partial_load_without_the_conv_does_not_stand_in_the_way() -> None:
    found = _locate(CASES["conv-in-channels/partial_load_without_conv"], Sources())
    assert isinstance(found, Site)
    assert found.rewrite.in_channels == 1  # type: ignore[attr-defined]


def test_without_the_probe_the_source_is_read() -> None:
    """Evidence from a run without the conv-history probe: the partial load reads as a load."""
    from patterns.conv_in_channels.pattern import ConvInChannels

    evidence = _evidence(CASES["conv-in-channels/partial_load_without_conv"])
    evidence = replace(evidence, probes=evidence.probes - {"conv-history"})
    assert evidence.failure is not None
    pattern = ConvInChannels()
    match = pattern.match(evidence.failure)
    assert match is not None
    found = pattern.locate(evidence.failure, match, evidence, Sources())
    assert isinstance(found, Decline) and "load_state_dict(state, strict=False)" in found.reason


def test_channels_that_change_between_batches_blame_the_data() -> None:
    found = _locate(CASES["conv-in-channels/decline_grayscale_among_rgb"], Sources())
    assert isinstance(found, Decline)
    assert "already taken 1 batch of 3 channels" in found.reason
    assert found.diagnosis is not None and "where the dataset loads each sample" in found.diagnosis


def test_the_device_diagnosis_names_the_tensor_attribute() -> None:
    found = _locate(CASES["device-mismatch/decline_tinyvit_cached_bias"], Sources())
    assert isinstance(found, Decline)
    assert found.diagnosis is not None and found.diagnosis.startswith("`self.ab` is a plain tensor attribute")
    found = _locate(CASES["device-mismatch/decline_attribute_tensor"], Sources())
    assert isinstance(found, Decline) and found.diagnosis is not None and "`self.scale`" in found.diagnosis


def test_colour_data_for_a_one_channel_layer_is_never_a_safe_fix() -> None:
    """A 1-channel layer given RGB batches: unsafe when nothing says 1 channel, declined (both
    values named, no remedy) when the project converts to grayscale or the layer is a filter."""
    from repairbot.types import Applicability

    found = _locate(CASES["conv-in-channels/rgb_data_one_channel_layer"], Sources())
    assert isinstance(found, Site) and found.applicability is Applicability.UNSAFE
    assert any("convert the images to grayscale" in note for note in found.notes)
    found = _locate(CASES["conv-in-channels/decline_grayscale_elsewhere"], Sources())
    assert isinstance(found, Decline) and "to_grayscale(colour[12:]) at" in found.reason
    assert found.diagnosis is not None and "takes 1 input channel and the data has 3" in found.diagnosis
    found = _locate(CASES["conv-in-channels/decline_single_channel_filter"], Sources())
    assert isinstance(found, Decline) and "a single-channel filter" in found.reason
    assert found.diagnosis is not None and "the run does not tell" in found.diagnosis


def test_a_default_is_passed_only_at_its_one_construction() -> None:
    found = _locate(CASES["conv-in-channels/default_channels_construction"], Sources())
    assert isinstance(found, Site) and found.rewrite.param == "channels"  # type: ignore[attr-defined]
    found = _locate(CASES["conv-in-channels/decline_default_two_constructions"], Sources())
    assert isinstance(found, Decline) and "the run built the layer 2 times" in found.reason
    found = _locate(CASES["conv-in-channels/decline_default_sizes_other_layer"], Sources())
    assert isinstance(found, Decline) and "also sizes self.decode = nn.Conv2d(16, channels, 3, padding=1)" in found.reason
    found = _locate(CASES["conv-in-channels/decline_in_channels_variable"], Sources())
    assert isinstance(found, Decline) and "more channels (16)" in found.reason


def test_a_rebound_module_name_never_names_the_class() -> None:
    found = _locate(CASES["weights-only/fix_module_name_rebound"], Sources())
    assert isinstance(found, Site) and "model.RNNModel," not in found.rewrite.context  # type: ignore[attr-defined]
    assert found.rewrite.inserted == ("from model import RNNModel",)  # type: ignore[attr-defined]
    found = _locate(CASES["weights-only/decline_module_rebound_class_name_taken"], Sources())
    assert isinstance(found, Decline) and "already uses the name RNNModel" in found.reason


def test_a_constructor_parameter_is_solved_at_the_one_construction() -> None:
    found = _locate(CASES["linear-in-features/construction_site_solved"], Sources())
    assert isinstance(found, Site)
    assert found.file.endswith("train.py") and found.applicability == Applicability.SAFE
    assert found.rewrite.code == "8"  # type: ignore[attr-defined]
    assert not any(alternative.file.endswith("modules.py") for alternative in found.alternatives)


def test_two_constructions_name_both_arguments() -> None:
    found = _locate(CASES["linear-in-features/decline_two_constructions"], Sources())
    assert isinstance(found, Decline)
    assert "built 2 times" in found.reason and "input_size = 6 at " in found.reason and "input_size = 8 at " in found.reason
    assert "train.py:10;" in found.reason and found.reason.count("train.py:11)") == 1
    assert found.diagnosis and "train.py:10 receives 18 features" in found.diagnosis


def test_a_config_attribute_copied_to_self_is_one_size_not_two() -> None:
    found = _locate(CASES["linear-in-features/config_dataclass_product"], Sources())
    assert isinstance(found, Site)
    assert found.rewrite.code == "config.block_size * config.n_embd"  # type: ignore[attr-defined]
    assert found.applicability == Applicability.SAFE


def test_an_unproven_configuration_size_names_where_it_is_written() -> None:
    found = _locate(CASES["linear-in-features/decline_config_unproven"], Sources())
    assert isinstance(found, Decline)
    assert found.diagnosis and "(6 x `config.n_embd`)" in found.diagnosis and "written at train.py:12" in found.diagnosis


def test_a_shared_constructor_parameter_is_unsafe_and_before_an_unnamed_factor() -> None:
    found = _locate(CASES["linear-in-features/construction_site_shared"], Sources())
    assert isinstance(found, Site)
    assert found.applicability == Applicability.UNSAFE and found.rewrite.code == "32"  # type: ignore[attr-defined]
    assert [a.rewrite.code for a in found.alternatives] == ["2 * hidden_size * 3"]  # type: ignore[attr-defined]
