"""Peer baselines for `nimble-bench baseline`: the same model, weights and samples
as a Nimble run, measured in PyTorch or ONNX Runtime with Nimble's protocol.

The C++ side writes a work directory D, runs this script as a child process and
records the JSON lines it prints. Two commands:

  /usr/bin/python3 peer_bench.py export --workdir D   # writes D/model.onnx (lstm, bert)
  PYTHON peer_bench.py run --workdir D                # prints one JSON line per variant

`run` needs the interpreter that has the framework named in spec.json: torch
for pytorch, onnxruntime for onnxruntime (numpy in both). torch is imported
only by the code that needs it, onnxruntime only by the ONNX Runtime run, so
each command works in an interpreter that lacks the other framework.

Work directory (written by the caller)
  spec.json     {"model": "lstm" | "treelstm" | "bert",
                 "framework": "pytorch" | "onnxruntime",
                 "threads": int >= 1, "warmup": int >= 0, "repeat": int >= 1,
                 "heads": int >= 1 (bert only: the weights do not tell it),
                 "check": K (1 <= K <= samples: leading samples with expected outputs),
                 "rtol": float, "atol": float,
                 "variants": [names] (optional: time only these; default all),
                 "device": "cpu" | "cuda" (optional, default cpu; cuda: pytorch only,
                           the model on GPU 0)}
  weights.npz   float32 tensors named as the PyTorch state_dict; sizes and layer
                counts are read from their shapes.
                  lstm      weight_ih_l{n}, weight_hh_l{n}, bias_ih_l{n}, bias_hh_l{n}
                            (torch.nn.LSTM; gates i, f, g, o)
                  treelstm  leaf.weight (3H, I), leaf.bias: gates i, o, u of a leaf;
                            node.weight (5H, 2H), node.bias: gates i, f_l, f_r, o, u
                            of a node from [h_left, h_right] (binary Tree-LSTM)
                  bert      word.weight, pos.weight, tok_type.weight, ln.{weight,bias},
                            layers.{n}.attn.{query,key,value}, layers.{n}.attn_out,
                            layers.{n}.ln1, layers.{n}.inter, layers.{n}.out,
                            layers.{n}.ln2 (each .weight and .bias), pooler, cls
                            (post-LN, erf GELU, LayerNorm eps 1e-12)
  samples.npz   per sample i in 0..N-1:
                  lstm      s{i}_x (tokens, input) float32
                  treelstm  s{i}_left, s{i}_right int32, one entry per node in
                            post-order (children before parents, root last;
                            -1, -1 for a leaf); s{i}_leaves (leaves, input)
                            float32, the j-th leaf in that order taking row j
                  bert      s{i}_input_ids, s{i}_token_type_ids (1, L) int32
                and `tokens` int64 (N,): what µs/token divides by, per sample.
  expected.npz  s{i} float32 for i < K: Nimble's output for sample i
                (lstm: the top layer's last h (1, H); treelstm: the root's h
                (1, H); bert: the logits (1, classes)).
  model.onnx    written by `export` (ONNX, opset 14, dynamic sequence axis).

Variants: pytorch times the eager model and the fastest PyTorch form found for
it (lstm: native = torch.nn.LSTM, mv_script = TorchScript with one GEMM for
X·W_ihᵀ per layer and one GEMV per token; treelstm: eager_recursive = Python
recursion over the tree, script_iter = the whole tree in TorchScript over the
post-order arrays; bert: eager = hand-written, nn_fastpath = the same weights
in nn.TransformerEncoder, whose inference fast path fuses each layer).
onnxruntime times one variant, onnxruntime, running model.onnx.

Protocol (as Nimble's): every variant's outputs on the first K samples must
match expected.npz (np.allclose with rtol, atol) before any variant is timed.
Then `warmup` untimed single-sample runs cycling over the samples, then
`repeat` timed passes over all samples, each sample timed on its own.

Output: one line per variant on stdout, nothing else:
  {"framework": ..., "variant": ..., "version": the framework's __version__,
   "omp_wait_policy": OMP_WAIT_POLICY as the run had it,
   "figures": {"us_per_token": the median pass's time / total tokens (µs),
               "latency_mean", "latency_p50", "latency_p90", "latency_p99":
                   over samples of each sample's median over passes (µs,
                   nearest-rank percentiles),
               "sentences": N, "tokens": total tokens,
               "max_abs_error": the largest |output - expected| of the check}}
Exit status: 0; 1 with one line on stderr for a bad work directory, an
output mismatch or a framework error; 3 when the framework is not importable
from this interpreter. Warnings (also one line each) go to stderr.

Threads: torch.set_num_threads(threads), or ONNX Runtime's intra-op pool of
`threads` with inter-op 1, sequential execution and all graph optimisations.
Unless the caller's environment sets them, OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS are set to `threads` and OMP_WAIT_POLICY to PASSIVE
before numpy or torch is loaded. PyTorch runs under inference_mode with
denormals flushed to zero.

Device cuda: the weights and models live on GPU 0 in float32 (TF32 off for
cuBLAS and cuDNN alike, as Nimble computes); each timed call copies its sample's
inputs to the GPU and its output back, so its time ends when the GPU is done,
as a Nimble run on --target nvidia copies in and out of @main.
"""
from __future__ import annotations  # the models' annotations name torch before it is imported

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
import warnings
from typing import List, Tuple

# numpy, torch and torch.nn.functional, imported by main() and import_torch()
# once the thread settings are in the environment: OpenBLAS (under numpy and
# torch) and libgomp (under torch) read them when they are loaded.
np = None
torch = None
F = None

MODELS = ("lstm", "treelstm", "bert")
FRAMEWORKS = ("pytorch", "onnxruntime")
DEVICES = ("cpu", "cuda")
LAYER_NORM_EPS = 1e-12
ONNX_OPSET = 14
EXIT_ERROR = 1
EXIT_NOT_IMPORTABLE = 3
NO_ONNX_TREELSTM = "ONNX Runtime has no Tree-LSTM baseline: the model recurses over a tree"


class PeerError(Exception):
    """A failure reported as one line on stderr with exit status `status`."""

    def __init__(self, message, status=EXIT_ERROR):
        super().__init__(message)
        self.status = status


# ----------------------------------------------------------------- work directory


def read_spec(workdir):
    path = os.path.join(workdir, "spec.json")
    try:
        with open(path) as f:
            spec = json.load(f)
    except OSError as e:
        raise PeerError(f"cannot read {path}: {e.strerror}")
    except ValueError as e:
        raise PeerError(f"{path} is not JSON: {e}")
    if not isinstance(spec, dict):
        raise PeerError(f"{path}: expected a JSON object")

    def field(name, kind, minimum):
        value = spec.get(name)
        # bool is an int in Python; a JSON true is no thread count.
        if isinstance(value, bool) or not isinstance(value, kind):
            what = "an integer" if kind is int else "a number"
            raise PeerError(f"{path}: '{name}' is missing or not {what}")
        if value < minimum:
            raise PeerError(f"{path}: '{name}' is {value}, must be at least {minimum}")
        return value

    if spec.get("model") not in MODELS:
        raise PeerError(f"{path}: 'model' must be one of {', '.join(MODELS)}")
    if spec.get("framework") not in FRAMEWORKS:
        raise PeerError(f"{path}: 'framework' must be one of {', '.join(FRAMEWORKS)}")
    spec.setdefault("device", "cpu")
    if spec["device"] not in DEVICES:
        raise PeerError(f"{path}: 'device' must be one of {', '.join(DEVICES)}")
    if spec["device"] == "cuda" and spec["framework"] != "pytorch":
        raise PeerError(f"{path}: device cuda is for the pytorch framework")
    for name in ("threads", "repeat", "check"):
        field(name, int, 1)
    field("warmup", int, 0)
    for name in ("rtol", "atol"):
        spec[name] = float(field(name, (int, float), 0))
    if spec["model"] == "bert":
        field("heads", int, 1)
    wanted = spec.get("variants")
    if wanted is not None and (not isinstance(wanted, list) or not wanted or
                               not all(isinstance(name, str) for name in wanted)):
        raise PeerError(f"{path}: 'variants' must be a non-empty list of names")
    return spec


def chosen_variants(spec, variants):
    """The variants spec.json asks for, in the framework's order; PeerError for
    a name the framework does not have for this model."""
    wanted = spec.get("variants")
    if wanted is None:
        return variants
    names = [name for name, _ in variants]
    for name in wanted:
        if name not in names:
            raise PeerError(f"{spec['framework']} has no variant '{name}' for {spec['model']} "
                            f"(it has {', '.join(names)})")
    return [(name, forward) for name, forward in variants if name in wanted]


def load_npz(workdir, name):
    path = os.path.join(workdir, name)
    try:
        with np.load(path) as archive:
            return {key: archive[key] for key in archive.files}
    except OSError as e:
        raise PeerError(f"cannot read {path}: {e.strerror or e}")
    except ValueError as e:
        raise PeerError(f"{path} is not an .npz archive: {e}")


def take(arrays, file, key, dtype=None, ndim=None):
    """arrays[key], with an error naming the file and key when it is absent or malformed."""
    if key not in arrays:
        raise PeerError(f"{file}: missing '{key}'")
    value = arrays[key]
    if dtype is not None and value.dtype != dtype:
        raise PeerError(f"{file}: '{key}' is {value.dtype}, expected {np.dtype(dtype)}")
    if ndim is not None and value.ndim != ndim:
        raise PeerError(f"{file}: '{key}' has shape {value.shape}, expected {ndim} dimensions")
    return value


def check_weights(model, weights):
    """Names and shapes the model needs; returns the sizes read from them."""
    file = "weights.npz"

    def need(key, shape):
        value = take(weights, file, key, np.float32)
        if value.shape != shape:
            raise PeerError(f"{file}: '{key}' has shape {value.shape}, expected {shape}")

    if model == "lstm":
        hidden = take(weights, file, "weight_hh_l0", np.float32, 2).shape[1]
        inputs = take(weights, file, "weight_ih_l0", np.float32, 2).shape[1]
        layers = 0
        while f"weight_ih_l{layers}" in weights:
            layers += 1
        for n in range(layers):
            need(f"weight_ih_l{n}", (4 * hidden, inputs if n == 0 else hidden))
            need(f"weight_hh_l{n}", (4 * hidden, hidden))
            need(f"bias_ih_l{n}", (4 * hidden,))
            need(f"bias_hh_l{n}", (4 * hidden,))
        return {"layers": layers, "hidden": hidden, "input": inputs}
    if model == "treelstm":
        leaf = take(weights, file, "leaf.weight", np.float32, 2)
        hidden = leaf.shape[0] // 3
        need("leaf.weight", (3 * hidden, leaf.shape[1]))
        need("leaf.bias", (3 * hidden,))
        need("node.weight", (5 * hidden, 2 * hidden))
        need("node.bias", (5 * hidden,))
        return {"hidden": hidden}
    hidden = take(weights, file, "word.weight", np.float32, 2).shape[1]
    ffn = take(weights, file, "layers.0.inter.weight", np.float32, 2).shape[0]
    layers = 0
    while f"layers.{layers}.ln1.weight" in weights:
        layers += 1
    rows = {name: take(weights, file, name + ".weight", np.float32, 2).shape[0]
            for name in ("pos", "tok_type", "cls")}
    need("pos.weight", (rows["pos"], hidden))
    need("tok_type.weight", (rows["tok_type"], hidden))
    linears = {"pooler": (hidden, hidden), "cls": (rows["cls"], hidden)}
    for n in range(layers):
        for part in ("attn.query", "attn.key", "attn.value", "attn_out"):
            linears[f"layers.{n}.{part}"] = (hidden, hidden)
        linears[f"layers.{n}.inter"] = (ffn, hidden)
        linears[f"layers.{n}.out"] = (hidden, ffn)
    for name, shape in linears.items():
        need(name + ".weight", shape)
        need(name + ".bias", shape[:1])
    for name in ["ln"] + [f"layers.{n}.{ln}" for n in range(layers) for ln in ("ln1", "ln2")]:
        need(name + ".weight", (hidden,))
        need(name + ".bias", (hidden,))
    return {"layers": layers, "hidden": hidden, "ffn": ffn}


def check_heads(spec, sizes):
    if spec["model"] == "bert" and sizes["hidden"] % spec["heads"]:
        raise PeerError(f"spec.json: 'heads' {spec['heads']} does not divide the hidden size "
                        f"{sizes['hidden']} of weights.npz")


def load_samples(workdir, model):
    """The samples as numpy arrays, in the form both frameworks take, and their tokens."""
    arrays = load_npz(workdir, "samples.npz")
    file = "samples.npz"
    tokens = take(arrays, file, "tokens", np.int64, 1)
    if len(tokens) == 0 or (tokens <= 0).any():
        raise PeerError(f"{file}: 'tokens' must list a positive count per sample")
    samples = []
    for i in range(len(tokens)):
        if model == "lstm":
            samples.append(take(arrays, file, f"s{i}_x", np.float32, 2))
        elif model == "treelstm":
            samples.append(tree_sample(arrays, file, i))
        else:
            ids = take(arrays, file, f"s{i}_input_ids", np.int32, 2)
            types = take(arrays, file, f"s{i}_token_type_ids", np.int32, 2)
            if ids.shape[0] != 1 or ids.shape != types.shape:
                raise PeerError(f"{file}: sample {i}: input_ids {ids.shape} and "
                                f"token_type_ids {types.shape} must both be (1, L)")
            # Embedding lookups take int64; converting here keeps it out of the timing.
            samples.append((ids.astype(np.int64), types.astype(np.int64)))
    return samples, [int(t) for t in tokens]


def tree_sample(arrays, file, i):
    """(left, right, leaf_row, leaves): child indices per node in post-order and,
    for a leaf, its row of `leaves` (-1 for a node)."""
    left = take(arrays, file, f"s{i}_left", np.int32, 1).tolist()
    right = take(arrays, file, f"s{i}_right", np.int32, 1).tolist()
    leaves = take(arrays, file, f"s{i}_leaves", np.float32, 2)
    if len(left) != len(right) or not left:
        raise PeerError(f"{file}: s{i}_left and s{i}_right must be equally long, not empty")
    leaf_row = []
    leaf_count = 0
    for node, (l, r) in enumerate(zip(left, right)):
        if l < 0 and r < 0:
            leaf_row.append(leaf_count)
            leaf_count += 1
        elif 0 <= l < node and 0 <= r < node:
            leaf_row.append(-1)
        else:
            raise PeerError(f"{file}: sample {i}: node {node} has children ({l}, {r}); children "
                            "come before their parent (post-order), -1, -1 for a leaf")
    if leaf_count != leaves.shape[0]:
        raise PeerError(f"{file}: sample {i}: the tree has {leaf_count} leaves "
                        f"but s{i}_leaves has {leaves.shape[0]} rows")
    return left, right, leaf_row, leaves


def load_expected(workdir, check, count):
    if check > count:
        raise PeerError(f"spec.json: 'check' is {check} but there are only {count} samples")
    arrays = load_npz(workdir, "expected.npz")
    return [take(arrays, "expected.npz", f"s{i}", np.float32) for i in range(check)]


# ----------------------------------------------------------------- imports and threads


def set_thread_environment(threads):
    """Thread counts for OpenBLAS and OpenMP, which read them when loaded; the
    caller's own settings win. Passive OpenMP waiting, because torch's libgomp
    pool spinning beside OpenBLAS's pthread pool on the same cores made BERT
    several times slower in the peer measurements."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def import_torch(threads=1, device="cpu"):
    global torch, F
    try:
        import torch as torch_module
        import torch.nn.functional as functional
    except ImportError:
        raise PeerError(f"torch is not importable from {sys.executable}", EXIT_NOT_IMPORTABLE)
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


def export(workdir, spec):
    """Writes workdir/model.onnx: torch.nn.LSTM or the eager BERT, traced with a
    dynamic token axis."""
    if spec["model"] == "treelstm":
        raise PeerError(NO_ONNX_TREELSTM)
    import_torch()
    weights = load_npz(workdir, "weights.npz")
    sizes = check_weights(spec["model"], weights)
    check_heads(spec, sizes)
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

    path = os.path.join(workdir, "model.onnx")
    partial = path + ".partial"  # never leave a half-written model.onnx behind
    # The exporter warns about LSTM batch sizes (ours is 1) and shape inference
    # of constants; the run's check against Nimble's outputs, on samples of
    # other lengths than the example's, is the test of the exported graph.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Exported().eval(), example, partial, input_names=names,
                          output_names=["output"], dynamic_axes=axes, opset_version=ONNX_OPSET)
    os.replace(partial, path)


def onnxruntime_variant(workdir, spec, samples):
    try:
        import onnxruntime as ort
    except ImportError:
        raise PeerError(f"onnxruntime is not importable from {sys.executable}", EXIT_NOT_IMPORTABLE)
    path = os.path.join(workdir, "model.onnx")
    if not os.path.isfile(path):
        raise PeerError(f"{path} is missing: run `peer_bench.py export` (under torch) first")
    options = ort.SessionOptions()
    options.intra_op_num_threads = spec["threads"]
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    if spec["model"] == "lstm":
        feeds = [{"x": np.ascontiguousarray(x[:, None, :])} for x in samples]
    else:
        feeds = [{"input_ids": ids, "token_type_ids": types} for ids, types in samples]
    return ort.__version__, [("onnxruntime", lambda i: session.run(None, feeds[i])[0])]


# ----------------------------------------------------------------- check and timing


def check_outputs(framework, variant, forward, expected, spec):
    """Largest |output - expected| over the checked samples; PeerError on a mismatch."""
    worst = 0.0
    for i, want in enumerate(expected):
        got = np.asarray(forward(i), dtype=np.float32)
        if got.shape != want.shape:
            raise PeerError(f"{framework}/{variant}: sample {i}: output shape {got.shape}, "
                            f"Nimble's {want.shape}")
        diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
        if not np.allclose(got, want, rtol=spec["rtol"], atol=spec["atol"]):
            raise PeerError(f"{framework}/{variant}: sample {i} differs from Nimble's output: max "
                            f"abs diff {diff:.6g} (rtol {spec['rtol']:g}, atol {spec['atol']:g})")
        worst = max(worst, diff)
    return worst


def percentile(values, fraction):
    """Nearest rank, as Nimble's runner: the smallest value with at least
    `fraction` of the values at or below it."""
    ordered = sorted(values)
    rank = math.ceil(fraction * len(ordered))
    return ordered[min(len(ordered) - 1, max(rank, 1) - 1)]


def time_variant(forward, tokens, warmup, repeat):
    count = len(tokens)
    for i in range(warmup):
        forward(i % count)
    per_sample_ns = [[] for _ in range(count)]
    pass_ns = []
    # No garbage collection inside a timed run (as timeit): the models make no
    # reference cycles, so a collection would only add noise.
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            total = 0
            for i in range(count):
                start = time.perf_counter_ns()
                forward(i)
                elapsed = time.perf_counter_ns() - start
                per_sample_ns[i].append(elapsed)
                total += elapsed
            pass_ns.append(total)
    finally:
        gc.enable()
    latencies_us = [statistics.median(runs) / 1e3 for runs in per_sample_ns]
    return {
        "us_per_token": statistics.median(pass_ns) / 1e3 / sum(tokens),
        "latency_mean": sum(latencies_us) / count,
        "latency_p50": percentile(latencies_us, 0.50),
        "latency_p90": percentile(latencies_us, 0.90),
        "latency_p99": percentile(latencies_us, 0.99),
        "sentences": count,
        "tokens": sum(tokens),
    }


def run(workdir, spec):
    if spec["framework"] == "onnxruntime" and spec["model"] == "treelstm":
        raise PeerError(NO_ONNX_TREELSTM)
    samples, tokens = load_samples(workdir, spec["model"])
    expected = load_expected(workdir, spec["check"], len(samples))
    if spec["framework"] == "onnxruntime":
        version, variants = onnxruntime_variant(workdir, spec, samples)
        measure(spec, version, variants, expected, tokens)
        return
    import_torch(spec["threads"], spec["device"])
    weights = load_npz(workdir, "weights.npz")
    sizes = check_weights(spec["model"], weights)
    check_heads(spec, sizes)
    with torch.inference_mode():
        variants = pytorch_variants(spec, weights, sizes, samples)
        measure(spec, torch.__version__, variants, expected, tokens)


def measure(spec, version, variants, expected, tokens):
    """Checks every chosen variant, then times each and prints its line. No
    variant is timed before all pass, so a mismatch leaves no figures on stdout."""
    framework = spec["framework"]
    variants = chosen_variants(spec, variants)
    errors = [check_outputs(framework, name, forward, expected, spec) for name, forward in variants]
    for (name, forward), error in zip(variants, errors):
        figures = time_variant(forward, tokens, spec["warmup"], spec["repeat"])
        figures["max_abs_error"] = error
        print(json.dumps({"framework": framework, "variant": name, "version": version,
                          "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
                          "figures": figures}), flush=True)


def warn(message):
    print(f"peer_bench: warning: {message}", file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("export", "run"))
    parser.add_argument("--workdir", required=True, help="the work directory the caller wrote")
    args = parser.parse_args()
    global np
    try:
        if not os.path.isdir(args.workdir):
            raise PeerError(f"{args.workdir} is not a directory")
        spec = read_spec(args.workdir)
        set_thread_environment(spec["threads"])
        import numpy as np  # after the thread environment: OpenBLAS reads it on load
        if args.command == "export":
            export(args.workdir, spec)
        else:
            run(args.workdir, spec)
    except PeerError as e:
        print(f"peer_bench: {e}", file=sys.stderr)
        return e.status
    except Exception as e:  # a framework's own error, still one line for the caller's log
        # Cut: some (torch's) quote whole tensors.
        message = " ".join(str(e).split())
        print(f"peer_bench: {type(e).__name__}: {message[:1000]}", file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
