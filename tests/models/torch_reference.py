#!/usr/bin/python3
"""PyTorch reference outputs for the model cross-checks of tests/models.

Loads the weights Nimble's builder used (an .npz named as the PyTorch
state_dict) into an implementation that shares no code with Nimble, runs it on
an input file and writes the output as .npy, once per --case (one process for
many cases, since importing torch takes seconds):

  torch_reference.py --model lstm --case W.npz x0.npy out0.npy [--case W2.npz x1.npy out1.npy ...]

Inputs per model:
  lstm      a (tokens, input) float32 .npy; output h_n[-1] of torch.nn.LSTM, (1, hidden).
  treelstm  an .npz with `left`, `right` (int32, post-order, -1 for a leaf) and
            `leaves` (leaves, input) float32; output the root's h, (1, hidden).
  bert      an .npz with `input_ids` and `token_type_ids` (1, tokens) int32 and
            `heads` (a scalar: the weights do not tell it); output the logits,
            (1, classes).

Each model is one function `run_<model>(weights, input_path) -> np.ndarray`,
registered in RUNNERS. Sizes and layer counts are read from the weights'
shapes. Run with Debian's /usr/bin/python3 (python3-torch, python3-numpy).
"""

import argparse
import re
import sys

import numpy as np
import torch


def load_npz(path):
    with np.load(path) as archive:
        return {name: archive[name] for name in archive.files}


def run_lstm(weights, input_path):
    """torch.nn.LSTM itself, with the state_dict taken as it is from the file."""
    layers = len([name for name in weights if re.fullmatch(r"weight_ih_l\d+", name)])
    hidden = weights["weight_hh_l0"].shape[1]
    input_size = weights["weight_ih_l0"].shape[1]
    lstm = torch.nn.LSTM(input_size, hidden, num_layers=layers)
    lstm.load_state_dict({name: torch.from_numpy(value) for name, value in weights.items()})
    xs = torch.from_numpy(np.load(input_path)).unsqueeze(1)  # (tokens, batch 1, input)
    with torch.no_grad():
        _, (h_n, _) = lstm(xs)
    return h_n[-1].numpy()


def run_treelstm(weights, input_path):
    """The binary Tree-LSTM of Tai et al. (2015), written out here from its
    equations: a leaf has gates i, o, u from its word vector; a node has
    i, f_l, f_r, o, u from [h_l, h_r]. Nodes come in post-order, so every
    child's state exists before its parent needs it."""
    tree = load_npz(input_path)
    leaf_w, leaf_b = (torch.from_numpy(weights[n]) for n in ("leaf.weight", "leaf.bias"))
    node_w, node_b = (torch.from_numpy(weights[n]) for n in ("node.weight", "node.bias"))
    leaves = torch.from_numpy(tree["leaves"])
    states = []
    next_leaf = 0
    with torch.no_grad():
        for left, right in zip(tree["left"].tolist(), tree["right"].tolist()):
            if left < 0:
                x = leaves[next_leaf : next_leaf + 1]
                next_leaf += 1
                i, o, u = torch.chunk(x @ leaf_w.T + leaf_b, 3, dim=1)
                c = torch.sigmoid(i) * torch.tanh(u)
            else:
                (h_l, c_l), (h_r, c_r) = states[left], states[right]
                gates = torch.cat([h_l, h_r], dim=1) @ node_w.T + node_b
                i, f_l, f_r, o, u = torch.chunk(gates, 5, dim=1)
                c = (torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_l) * c_l
                     + torch.sigmoid(f_r) * c_r)
            states.append((torch.sigmoid(o) * torch.tanh(c), c))
    return states[-1][0].numpy()


def run_bert(weights, input_path):
    """BERT (Devlin et al. 2019) written out here from its equations: the sum of
    word, position and token-type embeddings, layer-normed; per layer, post-LN
    multi-head self-attention and a GELU feed-forward block, each added to its
    input; a tanh pooler on the first token and a linear classifier. Computed in
    float64, so the reference carries no float32 rounding of its own."""
    inputs = load_npz(input_path)
    w = {name: torch.from_numpy(value).double() for name, value in weights.items()}
    ids = torch.from_numpy(inputs["input_ids"]).long()
    token_types = torch.from_numpy(inputs["token_type_ids"]).long()
    heads = int(inputs["heads"])
    layers = len([name for name in w if re.fullmatch(r"layers\.\d+\.ln1\.weight", name)])
    tokens, hidden = ids.shape[1], w["word.weight"].shape[1]
    head_size = hidden // heads

    def linear(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def layer_norm(x, name):
        mean = x.mean(dim=-1, keepdim=True)
        variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(variance + 1e-12) * w[name + ".weight"] + w[name + ".bias"]

    def split_heads(x):  # (tokens, hidden) -> (heads, tokens, head_size)
        return x.reshape(tokens, heads, head_size).permute(1, 0, 2)

    with torch.no_grad():
        x = w["word.weight"][ids[0]] + w["pos.weight"][:tokens] + w["tok_type.weight"][token_types[0]]
        x = layer_norm(x, "ln")
        for layer in range(layers):
            prefix = f"layers.{layer}."
            q, k, v = (split_heads(linear(x, prefix + "attn." + part)) for part in ("query", "key", "value"))
            probs = torch.softmax(q @ k.transpose(1, 2) / head_size**0.5, dim=-1)
            context = (probs @ v).permute(1, 0, 2).reshape(tokens, hidden)
            x = layer_norm(x + linear(context, prefix + "attn_out"), prefix + "ln1")
            inter = linear(x, prefix + "inter")
            inter = 0.5 * inter * (1 + torch.erf(inter / 2**0.5))
            x = layer_norm(x + linear(inter, prefix + "out"), prefix + "ln2")
        pooled = torch.tanh(linear(x[:1], "pooler"))
        return linear(pooled, "cls").numpy()


RUNNERS = {
    "lstm": run_lstm,
    "treelstm": run_treelstm,
    "bert": run_bert,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(RUNNERS))
    parser.add_argument(
        "--case", nargs=3, action="append", required=True,
        metavar=("WEIGHTS", "INPUT", "OUTPUT"),
        help="run the model with the .npz WEIGHTS on INPUT, write OUTPUT (.npy)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    weights_by_path = {}
    for weights_path, input_path, output_path in args.case:
        if weights_path not in weights_by_path:
            weights_by_path[weights_path] = load_npz(weights_path)
        output = RUNNERS[args.model](weights_by_path[weights_path], input_path)
        np.save(output_path, np.ascontiguousarray(output, dtype=np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
