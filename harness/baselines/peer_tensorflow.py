"""TensorFlow for peer_bench.py (whose docstring is the contract): each model
over weights.npz in TensorFlow 2, in tf.function where the model allows it,
every function with a dynamic-length input signature (one trace serves every
sample).

Variants: lstm: keras_function = Keras' LSTM layers inside a tf.function;
treelstm: while_loop = a tf.function over the post-order arrays with
tf.while_loop and TensorArrays (TensorFlow Fold's successor: Fold needs
TensorFlow 1.x on Python <= 3.6), eager_recursive = Python recursion over the
tree in eager mode; bert: function = the model in tf ops inside a tf.function,
xla = the same with jit_compile=True. XLA takes the dynamic-length signature
but compiles a new program for each distinct length the first time it sees
it; the protocol's medians over passes leave those compilations out of the
figures once every length has run in a pass.

Threads: an intra-op pool of `threads`, inter-op 1 (set before the first op).
"""
import contextlib
import math
import os
import sys

import numpy as np

from peer_bench import Variant, import_framework

LAYER_NORM_EPS = 1e-12

tf = None  # tensorflow, imported by variants()


@contextlib.contextmanager
def variants(peer):
    global tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no INFO or WARNING logs from its C++
    tf = import_framework("tensorflow")
    tf.config.threading.set_intra_op_parallelism_threads(peer.spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    build = {"lstm": lstm_variants, "treelstm": tree_variants, "bert": bert_variants}
    yield tf.__version__, build[peer.spec["model"]](peer)


def lstm_variants(peer):
    keras = import_framework("keras")
    w, sizes = peer.weights, peer.sizes
    layers = []
    for n in range(sizes["layers"]):
        # Keras' gates are PyTorch's (i, f, g, o); its one bias is the sum of PyTorch's two.
        layer = keras.layers.LSTM(sizes["hidden"], return_sequences=n + 1 < sizes["layers"])
        layer.build((1, None, sizes["input"] if n == 0 else sizes["hidden"]))
        layer.set_weights([w[f"weight_ih_l{n}"].T, w[f"weight_hh_l{n}"].T,
                           w[f"bias_ih_l{n}"] + w[f"bias_hh_l{n}"]])
        layers.append(layer)

    @tf.function(input_signature=[tf.TensorSpec([None, sizes["input"]], tf.float32)])
    def lstm(x):
        y = x[None]  # a batch of one
        for layer in layers:
            y = layer(y)
        return y  # the top layer's last h, (1, hidden)

    xs = [tf.constant(x) for x in peer.samples]
    return [Variant("keras_function", lambda i: lstm(xs[i]))]


def tree_variants(peer):
    w, hidden = peer.weights, peer.sizes["hidden"]
    leaf_w, node_w = tf.constant(w["leaf.weight"].T), tf.constant(w["node.weight"].T)
    leaf_b, node_b = tf.constant(w["leaf.bias"]), tf.constant(w["node.bias"])

    def leaf(x):
        i, o, u = tf.split(tf.matmul(x, leaf_w) + leaf_b, 3, axis=1)
        c = tf.sigmoid(i) * tf.tanh(u)
        return tf.sigmoid(o) * tf.tanh(c), c

    def node(h_l, c_l, h_r, c_r):
        gates = tf.matmul(tf.concat([h_l, h_r], 1), node_w) + node_b
        i, f_l, f_r, o, u = tf.split(gates, 5, axis=1)
        c = tf.sigmoid(i) * tf.tanh(u) + tf.sigmoid(f_l) * c_l + tf.sigmoid(f_r) * c_r
        return tf.sigmoid(o) * tf.tanh(c), c

    index = tf.TensorSpec([None], tf.int32)

    @tf.function(input_signature=[index, index, index, tf.TensorSpec([None, None], tf.float32)])
    def while_loop(left, right, leaf_row, leaves):
        count = tf.shape(left)[0]
        state = [tf.TensorArray(tf.float32, size=count, element_shape=[1, hidden],
                                clear_after_read=False) for _ in range(2)]

        def step(n, hs, cs):
            h, c = tf.cond(left[n] < 0, lambda: leaf(leaves[leaf_row[n]][None]),
                           lambda: node(hs.read(left[n]), cs.read(left[n]),
                                        hs.read(right[n]), cs.read(right[n])))
            return n + 1, hs.write(n, h), cs.write(n, c)

        _, hs, _ = tf.while_loop(lambda n, hs, cs: n < count, step, [0, *state])
        return hs.read(count - 1)

    def recursive(left, right, leaf_row, leaves):
        def visit(n):
            if left[n] < 0:
                return leaf(leaves[leaf_row[n]:leaf_row[n] + 1])
            return node(*visit(left[n]), *visit(right[n]))

        return visit(len(left) - 1)[0]

    arrays = [tuple(tf.constant(np.asarray(part, np.int32)) for part in sample[:3])
              + (tf.constant(sample[3]),) for sample in peer.samples]
    eager = [sample[:3] + (tf.constant(sample[3]),) for sample in peer.samples]
    # Recursion depth is the tree's height, at most its node count.
    deepest = max(len(sample[0]) for sample in peer.samples)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * deepest + 100))
    return [Variant("while_loop", lambda i: while_loop(*arrays[i])),
            Variant("eager_recursive", lambda i: recursive(*eager[i]))]


def bert_variants(peer):
    w, sizes, heads = peer.weights, peer.sizes, peer.spec["heads"]
    hidden = sizes["hidden"]
    head_size = hidden // heads
    # Linear weights transposed once: x @ Wᵀ as PyTorch's F.linear.
    c = {name: tf.constant(value.T if name.endswith(".weight") and value.ndim == 2
                           and not name.startswith(("word", "pos", "tok_type")) else value)
         for name, value in w.items()}

    def linear(name, x):
        return tf.matmul(x, c[name + ".weight"]) + c[name + ".bias"]

    def layer_norm(name, x):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return ((x - mean) * tf.math.rsqrt(variance + LAYER_NORM_EPS) * c[name + ".weight"]
                + c[name + ".bias"])

    def bert(input_ids, token_type_ids):
        tokens = tf.shape(input_ids)[1]
        x = (tf.gather(c["word.weight"], input_ids[0]) + c["pos.weight"][:tokens]
             + tf.gather(c["tok_type.weight"], token_type_ids[0]))
        x = layer_norm("ln", x)

        def split_heads(y):  # (tokens, hidden) -> (heads, tokens, head_size)
            return tf.transpose(tf.reshape(y, [tokens, heads, head_size]), [1, 0, 2])

        for n in range(sizes["layers"]):
            p = f"layers.{n}."
            q, k, v = (split_heads(linear(f"{p}attn.{part}", x))
                       for part in ("query", "key", "value"))
            probs = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / math.sqrt(head_size))
            context = tf.reshape(tf.transpose(tf.matmul(probs, v), [1, 0, 2]), [tokens, hidden])
            x = layer_norm(p + "ln1", x + linear(p + "attn_out", context))
            feed_forward = linear(p + "out", tf.nn.gelu(linear(p + "inter", x), approximate=False))
            x = layer_norm(p + "ln2", x + feed_forward)
        return linear("cls", tf.tanh(linear("pooler", x[:1])))

    signature = [tf.TensorSpec([1, None], tf.int64)] * 2
    function = tf.function(bert, input_signature=signature)
    xla = tf.function(bert, input_signature=signature, jit_compile=True)
    inputs = [(tf.constant(ids), tf.constant(types)) for ids, types in peer.samples]
    return [Variant("function", lambda i: function(*inputs[i])),
            Variant("xla", lambda i: xla(*inputs[i]), configuration={"jit_compile": True})]
