"""flash_attn.bert_padding (pure PyTorch in flash_attn too): removing the
padding of a batch for the varlen functions, and putting it back."""

import torch
import torch.nn.functional as F

__all__ = ["index_first_axis", "index_put_first_axis", "pad_input", "unpad_input"]


def index_first_axis(tensor, indices):
    """tensor[indices] along the first axis."""
    return tensor[indices]


def index_put_first_axis(values, indices, first_axis_dim):
    """A tensor of first_axis_dim rows, zero but for values at indices."""
    out = values.new_zeros((first_axis_dim,) + tuple(values.shape[1:]))
    return out.index_put((indices,), values)


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    """(batch, seqlen, ...) and a (batch, seqlen) mask of the tokens kept ->
    (the kept tokens (total, ...), their flat indices, cumulative sequence
    lengths (int32, batch + 1), the longest sequence, each sequence's
    length).  ``unused_mask``: tokens kept in the output but not counted in
    the lengths of the last result."""
    all_masks = attention_mask if unused_mask is None else attention_mask + unused_mask
    seqlens = all_masks.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(all_masks.flatten(), as_tuple=False).flatten()
    max_seqlen = int(seqlens.max().item()) if seqlens.numel() else 0
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape((-1,) + tuple(hidden_states.shape[2:]))
    return index_first_axis(flat, indices), indices, cu_seqlens, max_seqlen, used


def pad_input(hidden_states, indices, batch, seqlen):
    """The inverse of unpad_input: (total, ...) -> (batch, seqlen, ...),
    zeros where the padding was."""
    out = index_put_first_axis(hidden_states, indices, batch * seqlen)
    return out.reshape((batch, seqlen) + tuple(hidden_states.shape[1:]))
