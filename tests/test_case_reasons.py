"""What a located case says, where the case test alone (fix or decline) would not notice a
wrong reason: the traced weight loads of conv-in-channels, the batch-to-batch channel change,
the attribute a device-mismatch diagnosis names."""

from __future__ import annotations

from dataclasses import replace

from repairbot.sources import Sources
from repairbot.types import Decline, Site
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
