"""DyNet for peer_bench.py (whose docstring is the contract): one computation
graph per input, built anew for each sample as DyNet users write it (DyNet's
dynamic declaration), over weights.npz.

Variants: lstm: vanilla_lstm = dynet.VanillaLSTMBuilder transducing the
sentence; treelstm: recursive = Python recursion over the tree, one
expression per node. DyNet has no BERT baseline.

DyNet's wheels stop at Python 3.8 (scripts/install-peers.sh with
NIMBLE_PEERS_PYTHON_DYNET). Threads: DyNet's CPU backend computes on one
thread; a run asked for more records dynet_threads 1 and warns.
"""
import contextlib
import importlib.metadata
import sys

import numpy as np

from peer_bench import PeerError, Variant, import_framework, warn

dy = None  # dynet, imported by variants()


@contextlib.contextmanager
def variants(peer):
    global dy
    if peer.spec["model"] == "bert":
        raise PeerError("dynet has no BERT baseline (the talk measured DyNet on LSTM and "
                        "Tree-LSTM)")
    import_framework("dynet_config").set(autobatch=0, random_seed=1)  # before dynet loads
    dy = import_framework("dynet")
    configuration = {}
    if peer.spec["threads"] > 1:
        warn(f"dynet computes on one thread, not {peer.spec['threads']}")
        configuration["dynet_threads"] = 1
    build = {"lstm": lstm_variant, "treelstm": tree_variant}[peer.spec["model"]]
    name, forward = build(peer, dy.ParameterCollection())
    yield importlib.metadata.version("dyNET"), [Variant(name, forward,
                                                        configuration=configuration)]


def lstm_variant(peer, collection):
    w, sizes = peer.weights, peer.sizes
    hidden = sizes["hidden"]
    # DyNet's gates are (i, f, o, g), PyTorch's (i, f, g, o); its one bias is
    # the sum of PyTorch's two, and no forget bias is added on top.
    order = np.concatenate([np.arange(0, 2 * hidden), np.arange(3 * hidden, 4 * hidden),
                            np.arange(2 * hidden, 3 * hidden)])
    builder = dy.VanillaLSTMBuilder(sizes["layers"], sizes["input"], hidden, collection,
                                    forget_bias=0.0)
    for n, (w_x, w_h, bias) in enumerate(builder.get_parameters()):
        w_x.set_value(w[f"weight_ih_l{n}"][order])
        w_h.set_value(w[f"weight_hh_l{n}"][order])
        bias.set_value((w[f"bias_ih_l{n}"] + w[f"bias_hh_l{n}"])[order])

    def forward(i):
        dy.renew_cg()
        outputs = builder.initial_state().transduce([dy.inputTensor(x) for x in peer.samples[i]])
        return outputs[-1].npvalue().reshape(1, hidden)  # the top layer's last h

    return "vanilla_lstm", forward


def tree_variant(peer, collection):
    w, hidden = peer.weights, peer.sizes["hidden"]
    p = {name: collection.parameters_from_numpy(w[name])
         for name in ("leaf.weight", "leaf.bias", "node.weight", "node.bias")}
    # Recursion depth is the tree's height, at most its node count.
    deepest = max(len(sample[0]) for sample in peer.samples)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * deepest + 100))

    def gates(g, count):
        return [dy.pickrange(g, k * hidden, (k + 1) * hidden) for k in range(count)]

    def forward(i):
        dy.renew_cg()  # parameters join the new graph where an expression uses them
        left, right, leaf_row, leaves = peer.samples[i]

        def visit(n):
            if left[n] < 0:
                x = dy.inputTensor(leaves[leaf_row[n]])
                i_, o, u = gates(dy.affine_transform([p["leaf.bias"], p["leaf.weight"], x]), 3)
                c = dy.cmult(dy.logistic(i_), dy.tanh(u))
                return dy.cmult(dy.logistic(o), dy.tanh(c)), c
            h_l, c_l = visit(left[n])
            h_r, c_r = visit(right[n])
            both = dy.concatenate([h_l, h_r])
            i_, f_l, f_r, o, u = gates(dy.affine_transform([p["node.bias"], p["node.weight"],
                                                            both]), 5)
            c = (dy.cmult(dy.logistic(i_), dy.tanh(u)) + dy.cmult(dy.logistic(f_l), c_l)
                 + dy.cmult(dy.logistic(f_r), c_r))
            return dy.cmult(dy.logistic(o), dy.tanh(c)), c

        return visit(len(left) - 1)[0].npvalue().reshape(1, hidden)

    return "recursive", forward
