"""PyTorch for peer_bench.py (whose docstring is the contract): the eager model
and the fastest PyTorch form found for it, and the ONNX export the ONNX-based
peers (onnxruntime, openvino, tvm) run.

Variants: lstm: native = torch.nn.LSTM, mv_script = TorchScript with one GEMM
for X·W_ihᵀ per layer and one GEMV per token; treelstm: eager_recursive =
Python recursion over the tree, script_iter = the whole tree in TorchScript
over the post-order arrays; bert: eager = hand-written, nn_fastpath = the same
weights in nn.TransformerEncoder, whose inference fast path fuses each layer.

Threads: torch.set_num_threads(threads). PyTorch runs under inference_mode
with denormals flushed to zero.

Device cuda: the weights and models live on GPU 0 in float32 (TF32 off for
cuBLAS and cuDNN alike, as Nimble computes); each timed call copies its sample's
inputs to the GPU and its output back, so its time ends when the GPU is done,
as a Nimble run on --target nvidia copies in and out of @main.
"""
from __future__ import annotations  # the models' annotations name torch before it is imported

import contextlib
import math
import os
import sys
import warnings
from typing import List, Tuple

import numpy as np

import peer_bench as protocol
from peer_bench import PeerError, Variant, warn

# torch and torch.nn.functional, imported by import_torch() once peer_bench
# has put the thread settings in the environment: libgomp reads them when it
# is loaded.
torch = None
F = None

LAYER_NORM_EPS = 1e-12
ONNX_OPSET = 14


@contextlib.contextmanager
def variants(peer):
    """The eager model first, then the fastest, under inference_mode."""
    import_torch(peer.spec["threads"], peer.spec["device"])
    weights, sizes = peer.weights, peer.sizes
    with torch.inference_mode():
        yield torch.__version__, [Variant(name, forward) for name, forward in
                                  pytorch_variants(peer.spec, weights, sizes, peer.samples)]


# ----------------------------------------------------------------- imports and threads


def import_torch(threads=1, device="cpu"):
    global torch, F
    try:
        import torch as torch_module
        import torch.nn.functional as functional
    except ImportError:
        raise PeerError(f"torch is not importable from {sys.executable}",
                        protocol.EXIT_NOT_IMPORTABLE)
    torch, F = torch_module, functional
    torch.set_num_threads(threads)
    # numpy computes float limits on first use; with denormals flushed to zero
    # it would get the smallest subnormals wrong, so compute them first.
    np.finfo(np.float32), np.finfo(np.float64)
    torch.set_flush_denormal(True)
    if device == "cuda":
        if not torch.cuda.is_available():
            raise PeerError(f"no CUDA device: torch {torch.__version__} from {sys.executable} "
                            "sees none")
        # float32 as Nimble computes it: cuDNN's RNNs would otherwise round
        # their products to TF32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False



# ----------------------------------------------------------------- PyTorch models
# Functions of torch and F, which exist once import_torch() has run. Their
# annotations stay strings in Python (from __future__ import annotations);
# TorchScript reads them when it compiles lstm_gemv and tree_iter.


def lstm_gemv(x: torch.Tensor, w_ih: List[torch.Tensor], w_hh: List[torch.Tensor],
              bias: List[torch.Tensor]) -> torch.Tensor:
    """Layer by layer: the input projection of the whole sentence as one GEMM,
    then one GEMV (addmv) per token. nn.LSTM issues an M=1 GEMM per token, which
    Debian's OpenBLAS runs several times slower than a GEMV."""
    layer_input = x
    h = torch.zeros(0)  # TorchScript wants it defined before the loop
    for layer in range(len(w_ih)):
        input_gates = torch.addmm(bias[layer], layer_input, w_ih[layer].t())
        h = torch.zeros(w_hh[layer].size(1), device=x.device)
        c = torch.zeros(w_hh[layer].size(1), device=x.device)
        outputs: List[torch.Tensor] = []
        for t in range(input_gates.size(0)):
            i, f, g, o = torch.addmv(input_gates[t], w_hh[layer], h).chunk(4, 0)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outputs.append(h)
        layer_input = torch.stack(outputs, 0)
    return h.unsqueeze(0)


def tree_leaf(x: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(h, c) of a leaf from its input row x (1, input)."""
    i, o, u = F.linear(x, weight, bias).chunk(3, 1)
    c = torch.sigmoid(i) * torch.tanh(u)
    return torch.sigmoid(o) * torch.tanh(c), c


def tree_node(h_l: torch.Tensor, c_l: torch.Tensor, h_r: torch.Tensor, c_r: torch.Tensor,
              weight: torch.Tensor, bias: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(h, c) of a node from its children's."""
    i, f_l, f_r, o, u = F.linear(torch.cat([h_l, h_r], 1), weight, bias).chunk(5, 1)
    c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_l) * c_l + torch.sigmoid(f_r) * c_r
    return torch.sigmoid(o) * torch.tanh(c), c


def tree_iter(left: List[int], right: List[int], leaf_row: List[int], leaves: torch.Tensor,
              leaf_w: torch.Tensor, leaf_b: torch.Tensor, node_w: torch.Tensor,
              node_b: torch.Tensor) -> torch.Tensor:
    """The whole tree in one call: nodes in post-order, so a loop over them
    finds every child's state computed (no recursion for TorchScript to run)."""
    hs: List[torch.Tensor] = []
    cs: List[torch.Tensor] = []
    for n in range(len(left)):
        if left[n] < 0:
            h, c = tree_leaf(leaves[leaf_row[n]].unsqueeze(0), leaf_w, leaf_b)
        else:
            h, c = tree_node(hs[left[n]], cs[left[n]], hs[right[n]], cs[right[n]], node_w, node_b)
        hs.append(h)
        cs.append(c)
    return hs[-1]


def tree_recursive(left, right, leaf_row, leaves, w):
    """The usual eager Tree-LSTM: Python recursion from the root."""

    def visit(n):
        if left[n] < 0:
            return tree_leaf(leaves[leaf_row[n]:leaf_row[n] + 1], w["leaf.weight"], w["leaf.bias"])
        h_l, c_l = visit(left[n])
        h_r, c_r = visit(right[n])
        return tree_node(h_l, c_l, h_r, c_r, w["node.weight"], w["node.bias"])

    return visit(len(left) - 1)[0]


def linear(w, name, x):
    return F.linear(x, w[name + ".weight"], w[name + ".bias"])


# The BERT functions take the sizes as Python ints (from check_weights), not
# from tensor shapes: an ONNX trace records a shape as a computation, and
# F.layer_norm's shape or the attention scale must be constants there. Only
# the token count comes from the input, to keep the token axis dynamic.


def layer_norm(w, name, x, hidden):
    return F.layer_norm(x, (hidden,), w[name + ".weight"], w[name + ".bias"], LAYER_NORM_EPS)


def bert_embed(w, hidden, input_ids, token_type_ids):
    """(tokens, hidden): word + position + token type embeddings, layer-normed."""
    tokens = input_ids.size(1)
    x = (F.embedding(input_ids[0], w["word.weight"]) + w["pos.weight"][:tokens]
         + F.embedding(token_type_ids[0], w["tok_type.weight"]))
    return layer_norm(w, "ln", x, hidden)


def bert_classify(w, x):
    """Logits (1, classes) from the last layer's (tokens, hidden): a tanh pooler
    on the first token, then the classifier."""
    return linear(w, "cls", torch.tanh(linear(w, "pooler", x[:1])))


def bert_eager(w, sizes, heads, input_ids, token_type_ids):
    """Hand-written BERT, post-LN, as tests/models/torch_reference.py but in float32."""
    hidden, tokens = sizes["hidden"], input_ids.size(1)
    head_size = hidden // heads
    x = bert_embed(w, hidden, input_ids, token_type_ids)

    def split_heads(y):  # (tokens, hidden) -> (heads, tokens, head_size)
        return y.reshape(tokens, heads, head_size).transpose(0, 1)

    for n in range(sizes["layers"]):
        p = f"layers.{n}."
        q, k, v = (split_heads(linear(w, f"{p}attn.{part}", x))
                   for part in ("query", "key", "value"))
        probs = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(head_size), dim=-1)
        context = (probs @ v).transpose(0, 1).reshape(tokens, hidden)
        x = layer_norm(w, p + "ln1", x + linear(w, p + "attn_out", context), hidden)
        feed_forward = linear(w, p + "out", F.gelu(linear(w, p + "inter", x)))
        x = layer_norm(w, p + "ln2", x + feed_forward, hidden)
    return bert_classify(w, x)


def transformer_encoder(w, sizes, heads):
    """nn.TransformerEncoder holding BERT's layers. Its fast path (one fused
    _transformer_encoder_layer_fwd per layer) needs eval mode, no autograd,
    batch_first, relu or gelu ("gelu" is the erf GELU), equal LayerNorm eps and
    an even head count; norm_first=False is BERT's post-LN."""
    layer = torch.nn.TransformerEncoderLayer(
        sizes["hidden"], heads, sizes["ffn"], dropout=0.0, activation="gelu",
        batch_first=True, norm_first=False, layer_norm_eps=LAYER_NORM_EPS)
    encoder = torch.nn.TransformerEncoder(layer, sizes["layers"], enable_nested_tensor=False)
    with torch.no_grad():
        copy_bert_layers(w, encoder)
    return encoder.eval()


def copy_bert_layers(w, encoder):
    for n, mine in enumerate(encoder.layers):
        p = f"layers.{n}."
        for suffix in ("weight", "bias"):
            qkv = torch.cat([w[f"{p}attn.{part}.{suffix}"] for part in ("query", "key", "value")])
            getattr(mine.self_attn, f"in_proj_{suffix}").copy_(qkv)
            for module, name in ((mine.self_attn.out_proj, "attn_out"), (mine.linear1, "inter"),
                                 (mine.linear2, "out"), (mine.norm1, "ln1"), (mine.norm2, "ln2")):
                getattr(module, suffix).copy_(w[f"{p}{name}.{suffix}"])


def count_fast_path_layers(forward, sample):
    """How many encoder layers forward(sample) runs through the fused kernel."""
    fused = torch._transformer_encoder_layer_fwd
    calls = 0

    def counted(*args):
        nonlocal calls
        calls += 1
        return fused(*args)

    torch._transformer_encoder_layer_fwd = counted
    try:
        forward(sample)
    finally:
        torch._transformer_encoder_layer_fwd = fused
    return calls


def torch_weights(weights, device="cpu"):
    return {name: torch.from_numpy(value).to(device) for name, value in weights.items()}


def native_lstm(w, sizes):
    lstm = torch.nn.LSTM(sizes["input"], sizes["hidden"], num_layers=sizes["layers"],
                         device=next(iter(w.values())).device)
    lstm.load_state_dict(w)
    return lstm.eval()


def pytorch_variants(spec, weights, sizes, samples):
    """[(variant, forward(i) -> output tensor on the CPU)]: the eager model
    first, then the fastest. Samples stay on the CPU: each call copies its
    inputs to the model's device."""
    device = torch.device(spec["device"])
    w = torch_weights(weights, device)
    model = spec["model"]

    def on_device(forward, inputs):
        return lambda i: forward(*(x.to(device) for x in inputs[i])).cpu()

    if model == "lstm":
        xs = [(torch.from_numpy(x),) for x in samples]
        lstm = native_lstm(w, sizes)
        layers = range(sizes["layers"])
        w_ih = [w[f"weight_ih_l{n}"] for n in layers]
        w_hh = [w[f"weight_hh_l{n}"] for n in layers]
        # The two biases summed once, as an LSTM compiler would.
        bias = [w[f"bias_ih_l{n}"] + w[f"bias_hh_l{n}"] for n in layers]
        # Scripted, not frozen: torch.jit.freeze mis-compiled this loop in 1.13
        # (an index out of range on a later, shorter sentence).
        scripted = torch.jit.script(lstm_gemv)
        # (tokens, batch 1, input) for torch.nn.LSTM.
        return [("native", on_device(lambda x: lstm(x.unsqueeze(1))[1][0][-1], xs)),
                ("mv_script", on_device(lambda x: scripted(x, w_ih, w_hh, bias), xs))]
    if model == "treelstm":
        trees = [(l, r, rows, torch.from_numpy(leaves)) for l, r, rows, leaves in samples]
        # Recursion depth is the tree's height, at most its node count.
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * max(len(t[0]) for t in trees) + 100))
        scripted = torch.jit.script(tree_iter)
        cell = [w["leaf.weight"], w["leaf.bias"], w["node.weight"], w["node.bias"]]
        # Only the leaf vectors are tensors: the tree's shape stays in Python lists.
        return [("eager_recursive",
                 lambda i: tree_recursive(*trees[i][:3], trees[i][3].to(device), w).cpu()),
                ("script_iter",
                 lambda i: scripted(*trees[i][:3], trees[i][3].to(device), *cell).cpu())]
    inputs = [(torch.from_numpy(ids), torch.from_numpy(types)) for ids, types in samples]
    heads, layers = spec["heads"], sizes["layers"]
    encoder = transformer_encoder(w, sizes, heads).to(device)

    def fast_path(input_ids, token_type_ids):
        embedded = bert_embed(w, sizes["hidden"], input_ids, token_type_ids)
        return bert_classify(w, encoder(embedded.unsqueeze(0))[0])  # batch of 1

    fast_path_on_device = on_device(fast_path, inputs)
    fused = count_fast_path_layers(fast_path_on_device, 0)
    if fused != layers:
        warn(f"pytorch/nn_fastpath: {fused} of {layers} encoder layers took the fused fast path "
             f"(heads {heads}; it needs an even head count)")
    return [("eager", on_device(lambda ids, types: bert_eager(w, sizes, heads, ids, types), inputs)),
            ("nn_fastpath", fast_path_on_device)]


# ----------------------------------------------------------------- ONNX


def export(peer):
    """Writes the work directory's model.onnx: torch.nn.LSTM or the eager BERT,
    traced with a dynamic token axis (opset 14)."""
    import_torch()
    spec, weights, sizes = peer.spec, peer.weights, peer.sizes
    if spec["model"] == "lstm":
        lstm = native_lstm(torch_weights(weights), sizes)
        forward = lambda x: lstm(x)[1][0][-1]  # noqa: E731
        parts = lstm
        example = (torch.zeros(3, 1, sizes["input"]),)
        names, axes = ["x"], {"x": {0: "tokens"}}
    else:
        w = {name: torch.nn.Parameter(value, requires_grad=False)
             for name, value in torch_weights(weights).items()}
        forward = lambda ids, types: bert_eager(w, sizes, spec["heads"], ids, types)  # noqa: E731
        parts = torch.nn.ParameterList(w.values())
        length = min(4, w["pos.weight"].shape[0])
        example = tuple(torch.zeros(1, length, dtype=torch.long) for _ in range(2))
        names = ["input_ids", "token_type_ids"]
        axes = {name: {1: "tokens"} for name in names}

    class Exported(torch.nn.Module):
        """torch.onnx.export takes a module; the weights registered in it (the
        same tensor objects `forward` uses) become the graph's initializers."""

        def __init__(self):
            super().__init__()
            self.parts = parts

        def forward(self, *args):
            return forward(*args)

    path = os.path.join(peer.workdir, "model.onnx")
    partial = path + ".partial"  # never leave a half-written model.onnx behind
    # The exporter warns about LSTM batch sizes (ours is 1) and shape inference
    # of constants; the run's check against Nimble's outputs, on samples of
    # other lengths than the example's, is the test of the exported graph.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Exported().eval(), example, partial, input_names=names,
                          output_names=["output"], dynamic_axes=axes, opset_version=ONNX_OPSET)
    os.replace(partial, path)

