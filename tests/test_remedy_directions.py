"""A diagnosis's remedy is held to the standard of a fix (issue 28, item 3): it is stated only
where the traced facts prove its direction; otherwise the diagnosis names the two disagreeing
values and where each is written, and proposes nothing."""

from __future__ import annotations

import pytest

from repairbot.sources import Sources
from repairbot.types import Decline
from tests.support import pattern_cases
from tests.test_pattern_cases import _locate

CASES = {case.id: case for case in pattern_cases()}
NOTHING = "no change is proposed"


def _diagnosis(case_id: str) -> str:
    found = _locate(CASES[case_id], Sources())
    assert isinstance(found, Decline), f"{case_id}: {found}"
    assert found.diagnosis
    return found.diagnosis


def test_a_training_loop_without_a_dataloader_is_never_told_to_call_eval() -> None:
    diagnosis = _diagnosis("batchnorm-single-sample/decline_hand_loop_training")
    assert diagnosis.startswith("Train with batches of more than one sample")
    assert "train.py:16" in diagnosis
    assert "call model.eval()" not in diagnosis.lower()


def test_a_loop_that_neither_trains_nor_evaluates_gets_the_facts_alone() -> None:
    diagnosis = _diagnosis("batchnorm-single-sample/decline_loop_role_unknown")
    assert NOTHING in diagnosis and "train.py:11" in diagnosis and "train.py:8" in diagnosis
    assert "eval()" not in diagnosis and "drop_last" not in diagnosis


@pytest.mark.parametrize("case", ["decline_eval_loop_train_mode", "decline_single_inference"])
def test_eval_is_kept_where_the_code_proves_an_evaluation(case: str) -> None:
    assert "call model.eval() before" in _diagnosis(f"batchnorm-single-sample/{case}").lower()


def test_a_training_loop_with_a_batch_size_of_one_is_told_to_batch_more() -> None:
    diagnosis = _diagnosis("batchnorm-single-sample/decline_batch_size_one")
    assert diagnosis.startswith("Train with a batch size over 1") and "eval()" not in diagnosis


def test_a_changed_alphabet_names_both_sizes_and_proposes_nothing() -> None:
    diagnosis = _diagnosis("state-dict-size/decline_alphabet_changed")
    assert 'loaded at' in diagnosis and 'train.py:8 (torch.load("crnn.pth")) has 37' in diagnosis
    assert "the model has 11" in diagnosis and "model.py:8 as out_features `num_class`" in diagnosis
    assert "given `len(alphabet) + 1` at" in diagnosis and "(alphabet bound at" in diagnosis
    assert NOTHING in diagnosis
    assert "build the model with" not in diagnosis.lower() and "drop the keys" not in diagnosis


@pytest.mark.parametrize("case", sorted(c for c in CASES if c.startswith("state-dict-size/")))
def test_no_checkpoint_diagnosis_picks_a_side(case: str) -> None:
    diagnosis = _diagnosis(case)
    assert NOTHING in diagnosis and "has" in diagnosis
    assert "Two ways" not in diagnosis and "checkpoint's size" not in diagnosis


@pytest.mark.parametrize("case", ["decline_state_more_layers", "decline_num_layers"])
def test_layers_that_disagree_name_both_places(case: str) -> None:
    diagnosis = _diagnosis(f"rnn-hidden-shape/{case}")
    assert NOTHING in diagnosis and "num_layers `" in diagnosis and "h0 is made at" in diagnosis
    assert "num_layers=" not in diagnosis and "read them from the module" not in diagnosis


def test_the_state_with_more_layers_names_where_its_first_dimension_is_written() -> None:
    diagnosis = _diagnosis("rnn-hidden-shape/decline_state_more_layers")
    assert "1 in nn.LSTM built at" in diagnosis and "(num_layers `1`)" in diagnosis
    assert "2 in the state h0 (`2` at" in diagnosis and "train.py:14" in diagnosis


def test_an_extra_unsqueeze_is_named_and_its_removal_proven() -> None:
    diagnosis = _diagnosis("rnn-hidden-shape/decline_state_extra_unsqueeze")
    assert diagnosis.startswith("Remove the .unsqueeze(0) at") and "train.py:19" in diagnosis
    assert "(1, 4, 16)" in diagnosis and "h.unsqueeze(0)" not in diagnosis


def test_an_unsqueeze_whose_removal_is_not_proven_is_only_named() -> None:
    diagnosis = _diagnosis("rnn-hidden-shape/decline_state_unsqueeze_unproven")
    assert ".unsqueeze(0) adds one there" in diagnosis and "does not show" in diagnosis
    assert not diagnosis.startswith("Remove")


def test_a_one_layer_state_made_without_its_layers_dimension_keeps_the_unsqueeze() -> None:
    diagnosis = _diagnosis("rnn-hidden-shape/decline_2d_hidden")
    assert diagnosis.startswith("Give the state made at") and "`.unsqueeze(0)` on each of its tensors" in diagnosis
    assert "(1, 3, 16)" in diagnosis


def test_an_index_beyond_the_table_names_both_sides() -> None:
    diagnosis = _diagnosis("embedding-index/special_tokens_model_file")
    assert "has 8 rows (ids 0..7)" in diagnosis and "reach 9" in diagnosis and "model.py:8" in diagnosis
    assert NOTHING in diagnosis and "must be at least" not in diagnosis


def test_one_based_labels_are_not_answered_with_a_wider_head() -> None:
    diagnosis = _diagnosis("embedding-index/labels_one_based")
    assert "Linear(32, 4) at" in diagnosis and "got label 4" in diagnosis and NOTHING in diagnosis
    assert "needs out_features" not in diagnosis


def test_a_negative_id_keeps_its_remedy() -> None:
    assert _diagnosis("embedding-index/negative_padding_index").startswith("Map padding and unknown tokens")


def test_sequences_of_other_lengths_name_both_lengths() -> None:
    diagnosis = _diagnosis("batch-size-mismatch/sequence_targets_not_shifted")
    assert "covers 11 positions per sequence" in diagnosis and "12" in diagnosis and NOTHING in diagnosis
    assert "trim or pad" not in diagnosis


def test_losses_with_a_step_between_are_not_added() -> None:
    diagnosis = _diagnosis("backward-twice/gan_step_between")
    assert "runs between the two backward() calls" in diagnosis and "fake.detach()" in diagnosis
    assert "Add the losses" not in diagnosis and ").backward()`" not in diagnosis
    assert _diagnosis("backward-twice/two_losses_shared_encoder").startswith("Add the losses")


def test_a_flatten_of_the_models_own_input_names_both_sample_sizes() -> None:
    # colour images into a model written for grayscale digits: the data or the model may be
    # the wrong side, so neither `flatten(1)` nor a wider Linear is advised
    diagnosis = _diagnosis("batch-size-mismatch/decline_input_flattened_colour")
    assert NOTHING in diagnosis and "train.py:14" in diagnosis
    assert "3 x 784 = 2352 values" in diagnosis and "flattens it to 784" in diagnosis
    assert "flatten(1)" not in diagnosis and "in_features=" not in diagnosis


def test_a_flatten_after_the_models_own_layers_keeps_its_remedy() -> None:
    # the conv feature map is the model's own output: its hard-coded flatten is the wrong side
    diagnosis = _diagnosis("batch-size-mismatch/flatten_hardcoded_size")
    assert "Keep the batch dimension" in diagnosis and NOTHING not in diagnosis
