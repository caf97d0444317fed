"""The fused LSTM and GRU cells, for nn.LSTM, nn.GRU, LSTMCell and GRUCell.

For any device but the cpu, torch's recurrent layers compute each time step
with ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` (and their
backward ops), which PyTorch has as CUDA kernels only.  Here they are the
cpu's cell arithmetic (``RNN.cpp``: sigmoid and tanh gates), computed on
the host aliases of the npu arguments.  The workspace a forward keeps for
its backward holds the gate activations (LSTM: input, forget, cell and
output gates; GRU: reset, update and new gates, the hidden state and the
hidden new-gate term), as CUDA's does.
"""

import torch

__all__ = ["HOST_KERNELS"]


def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = hidden_gates + input_gates
    if input_bias is not None:
        gates = gates + input_bias
    if hidden_bias is not None:
        gates = gates + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = (f * cx).add_(i * g)
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    d_cy = torch.zeros_like(cy) if grad_cy is None else grad_cy.clone()
    if grad_hy is None:
        d_o = torch.zeros_like(cy)
    else:
        d_o = grad_hy * tanh_cy
        d_cy.add_(grad_hy * o * (1 - tanh_cy * tanh_cy))
    grad_gates = torch.cat([d_cy * g * i * (1 - i), d_cy * cx * f * (1 - f),
                            d_cy * i * (1 - g * g), d_o * o * (1 - o)], 1)
    grad_cx = d_cy * f
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_cx, grad_bias


def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r = (hr + ir).sigmoid()
    z = (hi + ii).sigmoid()
    n = (in_ + hn * r).tanh()
    hy = (hx - n).mul_(z).add_(n)
    return hy, torch.cat([r, z, n, hx, hn], 1)


def _gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = workspace.chunk(5, 1)
    d_n = grad_hy * (1 - z)
    d_z = grad_hy * (hx - n)
    grad_hx = grad_hy * z
    d_in = d_n * (1 - n * n)
    d_r = d_in * hn * r * (1 - r)
    d_zg = d_z * z * (1 - z)
    grad_input_gates = torch.cat([d_r, d_zg, d_in], 1)
    grad_hidden_gates = torch.cat([d_r, d_zg, d_in * r], 1)
    if has_bias:
        return (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0),
                grad_hidden_gates.sum(0))
    return grad_input_gates, grad_hidden_gates, grad_hx, None, None


#: op name -> host function, run through the generic path (host aliases in,
#: npu results out).
HOST_KERNELS = {
    "_thnn_fused_lstm_cell": _lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": _lstm_cell_backward,
    "_thnn_fused_gru_cell": _gru_cell,
    "_thnn_fused_gru_cell_backward": _gru_cell_backward,
}
