"""``packing: sentence``: a text's residual streams are those of the text run alone (causal models)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.language.test_packing_layouts import encoder_texts
from tests.models.conftest import make_encoder_tokenizer
from thinkalike.language.packing import pack_evaluation_sequences

N_CTX = 32  # the tiny checkpoints' position limit


def _streams(handle, arrays: dict[str, np.ndarray]) -> torch.Tensor:
    with torch.no_grad():
        return handle.residual_streams(torch.as_tensor(arrays["input_ids"]), torch.as_tensor(arrays["attention_mask"]))


def _alone(handle, token_ids: list[int]) -> torch.Tensor:
    ids = torch.tensor([token_ids])
    with torch.no_grad():
        return handle.residual_streams(ids, torch.ones_like(ids))[:, 0]


@pytest.mark.parametrize("model_type", ["gpt2", "llama"])
def test_each_text_of_the_sentence_layout_is_as_if_run_alone(model_type, loaded_handles):
    handle = loaded_handles[model_type]
    tokenizer = make_encoder_tokenizer()  # [CLS] text [SEP]: several texts share a packed row
    table = encoder_texts(12, seed=1)
    arrays, index = pack_evaluation_sequences(table, tokenizer, N_CTX, packing="sentence")
    packed_arrays, packed_index = pack_evaluation_sequences(table, tokenizer, N_CTX, packing="packed")
    streams, packed_streams = _streams(handle, arrays), _streams(handle, packed_arrays)
    later_in_a_row = 0
    for sentence_id, tokens in index.groupby("sentence_id", sort=False):
        alone = _alone(handle, tokens["token_id"].tolist())
        row, positions = int(tokens["sequence"].iloc[0]), tokens["position"].tolist()
        torch.testing.assert_close(streams[:, row, positions], alone, rtol=1e-5, atol=1e-5)
        packed = packed_index[packed_index["sentence_id"] == sentence_id]
        if packed["position"].iloc[0] > 0:  # packed after other texts: it sees them, so its streams differ
            later_in_a_row += 1
            got = packed_streams[:, int(packed["sequence"].iloc[0]), packed["position"].tolist()]
            assert (got[1:] - alone[1:]).abs().max() > 1e-3
    assert later_in_a_row > 0
