"""Which blocks and heads the embedding readings cover: auto keeps small models whole and narrows large ones."""

import pytest

from thinkalike.embedding.selection import MAX_BLOCKS, MAX_HEAD_PRODUCTS, select_blocks, select_heads


@pytest.mark.parametrize("n_blocks", [1, 4, MAX_BLOCKS])
def test_auto_keeps_a_small_model_whole(n_blocks):
    assert select_blocks(n_blocks, "auto") == list(range(n_blocks))
    assert select_heads(4, n_blocks, "auto") == [0, 1, 2, 3]


def test_auto_narrows_a_30_layer_16_head_model_to_evenly_spaced_blocks_and_first_heads():
    blocks = select_blocks(30, "auto")
    assert len(blocks) == MAX_BLOCKS and blocks[0] == 0 and blocks[-1] == 29
    gaps = [b - a for a, b in zip(blocks, blocks[1:])]
    assert max(gaps) - min(gaps) <= 1  # evenly spaced
    heads = select_heads(16, len(blocks), "auto")
    assert heads == list(range(MAX_HEAD_PRODUCTS // MAX_BLOCKS)) and len(blocks) * len(heads) <= MAX_HEAD_PRODUCTS


def test_explicit_selections_and_everything():
    assert select_blocks(30, None) == list(range(30))
    assert select_blocks(30, [29, 0, 0]) == [0, 29]
    assert select_heads(16, 30, None) == list(range(16))
    assert select_heads(16, 30, 3) == [0, 1, 2] and select_heads(2, 30, 3) == [0, 1]
    assert select_heads(16, 30, [5, 1]) == [1, 5]


def test_out_of_range_selections_name_the_setting():
    with pytest.raises(ValueError, match=r"embedding\.readings\.layers \(m\): blocks \[30\] outside 0 … 29"):
        select_blocks(30, [0, 30], what="embedding.readings.layers (m)")
    with pytest.raises(ValueError, match=r"heads: heads \[16\] outside 0 … 15"):
        select_heads(16, 2, [16])
    with pytest.raises(ValueError, match="is not 'auto'"):
        select_blocks(3, "all")
