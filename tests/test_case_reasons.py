"""What a located case says, where the case test alone (fix or decline) would not notice a
wrong reason: the traced weight loads of conv-in-channels, the batch-to-batch channel change,
the attribute a device-mismatch diagnosis names."""

from __future__ import annotations

from dataclasses import replace

from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Site
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
