"""BERT's MLM head on the masked positions only (`predictions=P`), as reference pre-training runs it."""
import pytest

from solver_plan.errors import InputError
from solver_plan.graph.resolve import resolve_model


def test_head_runs_on_the_gathered_positions():
    full = resolve_model("bert-base:batch=2,seq=128")
    masked = resolve_model("bert-base:batch=2,seq=128,predictions=20")
    split = masked.op("masked_positions")
    assert [t.shape for t in split.outputs] == [(2, 20, 768), (2, 108, 768)]
    transform = masked.op("mlm_head/transform")
    assert transform.outputs[0].shape == (2, 20, 768)
    # the encoder is unchanged; the head's FLOPs shrink by 20/128
    assert full.op("mlm_head/transform").flops * 20 / 128 == pytest.approx(transform.flops)
    assert full.total_params == masked.total_params


def test_predictions_equal_to_seq_or_zero_is_the_full_head():
    a = resolve_model("bert-base:batch=2,seq=64")
    b = resolve_model("bert-base:batch=2,seq=64,predictions=64")
    assert len(a) == len(b)


@pytest.mark.parametrize("value", ["-1", "129"])
def test_bad_predictions_is_an_input_error(value):
    with pytest.raises(InputError) as info:
        resolve_model(f"bert-base:batch=2,seq=128,predictions={value}")
    assert "predictions" in str(info.value)
