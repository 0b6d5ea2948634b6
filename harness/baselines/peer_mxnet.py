"""MXNet for peer_bench.py (whose docstring is the contract): Gluon over
weights.npz, on the CPU context.

Variants: lstm: gluon = Gluon's rnn.LSTM imperative, gluon_hybrid = the same
block hybridized (one cached graph, static allocation; a new length re-infers
its shapes); bert: gluon_hybrid = BERT written as Gluon blocks (Dense,
LayerNorm, Embedding, batch_dot) over the same weights, hybridized.

Threads: MXNet's operators use OpenMP with OMP_NUM_THREADS (peer_bench sets
it to `threads`) and one engine worker thread (MXNET_CPU_WORKER_NTHREADS).
"""
import contextlib
import math
import os

from peer_bench import PeerError, Variant, import_framework

LAYER_NORM_EPS = 1e-12

mx = None  # mxnet, imported by variants()


@contextlib.contextmanager
def variants(peer):
    global mx
    os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
    mx = import_framework("mxnet")
    build = {"lstm": lstm_variants, "bert": bert_variants}
    if peer.spec["model"] not in build:
        raise PeerError("mxnet has no Tree-LSTM baseline (the paper measured MXNet on LSTM and "
                        "BERT)")
    yield mx.__version__, build[peer.spec["model"]](peer)


def set_parameters(block, values):
    """Gives each of the block's parameters its value, matched by the name
    without the block's prefix."""
    params = block.collect_params()
    for full_name, param in params.items():
        name = full_name[len(block.prefix):]
        if name not in values:
            raise PeerError(f"mxnet: no weights for Gluon parameter {full_name}")
        param.set_data(mx.nd.array(values[name]))


def lstm_variants(peer):
    w, sizes = peer.weights, peer.sizes
    found = []
    for name, hybrid in (("gluon", False), ("gluon_hybrid", True)):
        lstm = mx.gluon.rnn.LSTM(sizes["hidden"], num_layers=sizes["layers"], layout="TNC",
                                 input_size=sizes["input"])
        lstm.initialize(ctx=mx.cpu())
        # Gluon's gates are PyTorch's (i, f, g, o) and its names l{n}_{i2h,h2h}_{weight,bias}.
        set_parameters(lstm, {f"l{n}_{gluon}_{kind}": w[f"{kind}_{torch}_l{n}"]
                              for n in range(sizes["layers"])
                              for gluon, torch in (("i2h", "ih"), ("h2h", "hh"))
                              for kind in ("weight", "bias")})
        if hybrid:
            lstm.hybridize(static_alloc=True)
        xs = [mx.nd.array(x[:, None, :]) for x in peer.samples]  # (tokens, batch 1, input)
        begin = lstm.begin_state(batch_size=1)

        def forward(i, lstm=lstm, xs=xs, begin=begin):
            _, (h, _) = lstm(xs[i], begin)
            return h[-1].asnumpy()  # the top layer's last h, (1, hidden)

        found.append(Variant(name, forward))
    return found


def bert_variants(peer):
    w, sizes, heads = peer.weights, peer.sizes, peer.spec["heads"]
    nn = mx.gluon.nn
    hidden, layers = sizes["hidden"], sizes["layers"]
    head_size = hidden // heads

    class Bert(mx.gluon.HybridBlock):
        """Post-LN BERT, blocks named as weights.npz's modules ('.' -> '_')."""

        def __init__(self):
            super().__init__(prefix="bert_")
            self.parts = {}
            with self.name_scope():
                for name in ("word", "pos", "tok_type"):
                    table = w[name + ".weight"]
                    self.add(name, nn.Embedding(table.shape[0], table.shape[1]))
                linears = ["pooler", "cls"] + [f"layers.{n}.{part}" for n in range(layers)
                                               for part in ("attn.query", "attn.key", "attn.value",
                                                            "attn_out", "inter", "out")]
                for name in linears:
                    units, inputs = w[name + ".weight"].shape
                    self.add(name, nn.Dense(units, in_units=inputs, flatten=False))
                for name in ["ln"] + [f"layers.{n}.{ln}" for n in range(layers)
                                      for ln in ("ln1", "ln2")]:
                    self.add(name, nn.LayerNorm(epsilon=LAYER_NORM_EPS, in_channels=hidden))

        def add(self, name, block):
            self.parts[name] = block
            self.register_child(block, name.replace(".", "_"))

        def hybrid_forward(self, F, input_ids, token_type_ids):
            p = self.parts
            ids, types = input_ids.reshape((-1,)), token_type_ids.reshape((-1,))
            positions = F.contrib.arange_like(ids, axis=0)
            x = p["ln"](p["word"](ids) + p["pos"](positions) + p["tok_type"](types))

            def split_heads(y):  # (tokens, hidden) -> (heads, tokens, head_size)
                return y.reshape((-1, heads, head_size)).transpose((1, 0, 2))

            for n in range(layers):
                q, k, v = (split_heads(p[f"layers.{n}.attn.{part}"](x))
                           for part in ("query", "key", "value"))
                scores = F.batch_dot(q, k, transpose_b=True) / math.sqrt(head_size)
                context = F.batch_dot(F.softmax(scores, axis=-1), v)
                context = context.transpose((1, 0, 2)).reshape((-1, hidden))
                x = p[f"layers.{n}.ln1"](x + p[f"layers.{n}.attn_out"](context))
                inter = F.LeakyReLU(p[f"layers.{n}.inter"](x), act_type="gelu")  # erf GELU
                x = p[f"layers.{n}.ln2"](x + p[f"layers.{n}.out"](inter))
            first = F.slice_axis(x, axis=0, begin=0, end=1)
            return p["cls"](F.tanh(p["pooler"](first)))

    bert = Bert()
    bert.initialize(ctx=mx.cpu())
    values = {}
    for name, value in w.items():
        module, kind = name.rsplit(".", 1)
        block = bert.parts[module]
        if isinstance(block, nn.LayerNorm):  # LayerNorm's scale and shift
            kind = {"weight": "gamma", "bias": "beta"}[kind]
        values[block.prefix[len(bert.prefix):] + kind] = value
    set_parameters(bert, values)
    bert.hybridize(static_alloc=True)
    inputs = [(mx.nd.array(ids, dtype="int64"), mx.nd.array(types, dtype="int64"))
              for ids, types in peer.samples]
    return [Variant("gluon_hybrid", lambda i: bert(*inputs[i]).asnumpy())]
