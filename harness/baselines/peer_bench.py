"""Peer baselines for `nimble-bench baseline`: the same model, weights and samples
as a Nimble run, measured in a peer framework with Nimble's protocol. This file
is the protocol (work directory, output check, warmup and repeat, timing, the
JSON lines); each framework is a plug-in beside it, peer_FRAMEWORK.py.

The C++ side writes a work directory D, with this file and every plug-in, runs
this script as a child process and records the JSON lines it prints. Two commands:

  /usr/bin/python3 peer_bench.py export --workdir D   # writes D/model.onnx (lstm, bert)
  PYTHON peer_bench.py run --workdir D                # prints one JSON line per variant

`export` needs torch (peer_pytorch.py traces its model); `run` needs the
interpreter that has the framework named in spec.json (torch, onnxruntime,
openvino, tensorflow, mxnet, tvm or dynet, each with numpy; this file and
the plug-ins run on Python 3.8, DyNet's last, and later). A plug-in imports its
framework only when it runs, so each command works in an interpreter that
lacks the others.

Work directory (written by the caller)
  spec.json     {"model": "lstm" | "treelstm" | "bert",
                 "framework": one of FRAMEWORKS,
                 "threads": int >= 1, "warmup": int >= 0, "repeat": int >= 1,
                 "heads": int >= 1 (bert only: the weights do not tell it),
                 "check": K (1 <= K <= samples: leading samples with expected outputs),
                 "rtol": float, "atol": float,
                 "variants": [names] (optional: time only these; default all),
                 "time_limit_s": float (optional: a variant whose timed passes
                           would end past it, from the run's start, fails first),
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
  model.onnx    written by `export` (ONNX, opset 14, dynamic sequence axis
                "tokens"; lstm's input x is (tokens, 1, input)).

Plug-ins: peer_FRAMEWORK.py defines `variants(peer)`, a context manager
yielding (the framework's version, [Variant]) for peer.spec's model, or
raising PeerError (EXIT_NOT_IMPORTABLE when the framework does not import).
`peer` (a Peer) holds the spec, the work directory, the samples (lstm: (tokens,
input) float32; treelstm: (left, right, leaf_row, leaves) with leaf_row a
node's row of leaves, -1 for a node; bert: (input_ids, token_type_ids) (1, L)
int64), and, loaded on first use, the weights and the sizes read from them.
A Variant's forward(i) returns sample i's output as an array; its precision
(f32 unless it computes in less) and, for reduced precision, the looser
tolerance it is checked with go into its line.

Protocol (as Nimble's): every variant's outputs on the first K samples must
match expected.npz (np.allclose with rtol, atol, or the variant's own) before
any variant is timed. Then `warmup` untimed single-sample runs cycling over the
samples, then `repeat` timed passes over all samples, each sample timed on its own.

Output: one line per variant on stdout, nothing else:
  {"framework": ..., "variant": ..., "version": the framework's version,
   "omp_wait_policy": OMP_WAIT_POLICY as the run had it,
   "configuration": {"precision": "f32" | what the variant computed in,
                     "rtol", "atol": only where looser than spec.json's,
                     and what else the plug-in records of the variant},
   "figures": {"us_per_token": the median pass's time / total tokens (µs),
               "latency_mean", "latency_p50", "latency_p90", "latency_p99":
                   over samples of each sample's median over passes (µs,
                   nearest-rank percentiles),
               "sentences": N, "tokens": total tokens,
               "max_abs_error": the largest |output - expected| of the check,
               and the plug-in's own (compile_s: seconds to compile, where a
               framework compiles ahead of the first run)}}
Exit status: 0; 1 with one line on stderr for a bad work directory, an
output mismatch, a run past the time limit or a framework error; 3 when the
framework is not importable from this interpreter. Warnings (also one line
each) go to stderr.

Threads: each plug-in sets its framework's own pool to `threads` (see its
docstring). Unless the caller's environment sets them, OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS are set to `threads` and OMP_WAIT_POLICY to PASSIVE
before numpy or a framework is loaded.
"""
import argparse
import functools
import gc
import importlib
import json
import math
import os
import statistics
import sys
import time

# numpy, imported by main() once the thread settings are in the environment:
# OpenBLAS (under numpy and the frameworks) and libgomp read them when loaded.
np = None

MODELS = ("lstm", "treelstm", "bert")
FRAMEWORKS = ("pytorch", "onnxruntime", "openvino", "tensorflow", "mxnet", "tvm", "dynet")
# The plug-ins that run the ONNX export rather than weights.npz.
ONNX_FRAMEWORKS = ("onnxruntime", "openvino", "tvm")
DEVICES = ("cpu", "cuda")
EXIT_ERROR = 1
EXIT_NOT_IMPORTABLE = 3


class PeerError(Exception):
    """A failure reported as one line on stderr with exit status `status`."""

    def __init__(self, message, status=EXIT_ERROR):
        super().__init__(message)
        self.status = status


class Variant:
    """One way of running the model, timed as a run of its own."""

    def __init__(self, name, forward, precision="f32", tolerance=None, configuration=None,
                 figures=None):
        self.name = name
        self.forward = forward  # forward(i) -> sample i's output
        self.precision = precision
        self.tolerance = tolerance  # (rtol, atol) looser than spec.json's, or None
        self.configuration = configuration or {}
        self.figures = figures or {}


class Peer:
    """What a plug-in builds its variants from."""

    def __init__(self, workdir, spec, samples):
        self.workdir = workdir
        self.spec = spec
        self.samples = samples

    @functools.cached_property
    def _checked_weights(self):
        weights = load_npz(self.workdir, "weights.npz")
        sizes = check_weights(self.spec["model"], weights)
        check_heads(self.spec, sizes)
        return weights, sizes

    @property
    def weights(self):
        """weights.npz, its names and shapes checked for the model."""
        return self._checked_weights[0]

    @property
    def sizes(self):
        """The sizes read from the weights (check_weights)."""
        return self._checked_weights[1]

    def onnx_path(self):
        path = os.path.join(self.workdir, "model.onnx")
        if not os.path.isfile(path):
            raise PeerError(f"{path} is missing: run `peer_bench.py export` (under torch) first")
        return path

    def onnx_feeds(self):
        """Each sample as model.onnx's named inputs: lstm's x is (tokens, 1, input)."""
        if self.spec["model"] == "lstm":
            return [{"x": np.ascontiguousarray(x[:, None, :])} for x in self.samples]
        return [{"input_ids": ids, "token_type_ids": types} for ids, types in self.samples]


def no_onnx_treelstm(framework):
    return f"{framework} has no Tree-LSTM baseline: the model recurses over a tree (no ONNX export)"


def import_framework(module):
    """The framework's module; PeerError (exit status 3) when it does not import."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise PeerError(f"{module} is not importable from {sys.executable}: {e}",
                        EXIT_NOT_IMPORTABLE)


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
    if "time_limit_s" in spec and not field("time_limit_s", (int, float), 0) > 0:
        raise PeerError(f"{path}: 'time_limit_s' must be positive")
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
    names = [variant.name for variant in variants]
    for name in wanted:
        if name not in names:
            raise PeerError(f"{spec['framework']} has no variant '{name}' for {spec['model']} "
                            f"(it has {', '.join(names)})")
    return [variant for variant in variants if variant.name in wanted]


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
    """The samples as numpy arrays, in the form the plug-ins take, and their tokens."""
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



# ----------------------------------------------------------------- check and timing


def check_outputs(framework, variant, expected, spec):
    """Largest |output - expected| over the checked samples; PeerError on a mismatch."""
    rtol, atol = variant.tolerance or (spec["rtol"], spec["atol"])
    worst = 0.0
    for i, want in enumerate(expected):
        got = np.asarray(variant.forward(i), dtype=np.float32)
        if got.shape != want.shape:
            raise PeerError(f"{framework}/{variant.name}: sample {i}: output shape {got.shape}, "
                            f"Nimble's {want.shape}")
        diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
        if not np.allclose(got, want, rtol=rtol, atol=atol):
            raise PeerError(f"{framework}/{variant.name} ({variant.precision}): sample {i} differs "
                            f"from Nimble's output: max abs diff {diff:.6g} (rtol {rtol:g}, "
                            f"atol {atol:g})")
        worst = max(worst, diff)
    return worst


def percentile(values, fraction):
    """Nearest rank, as Nimble's runner: the smallest value with at least
    `fraction` of the values at or below it."""
    ordered = sorted(values)
    rank = math.ceil(fraction * len(ordered))
    return ordered[min(len(ordered) - 1, max(rank, 1) - 1)]


def time_variant(name, forward, tokens, warmup, repeat, deadline):
    """The figures of `repeat` timed passes; PeerError as soon as the passes
    measured so far say the rest would end after `deadline` (a monotonic time)."""
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
        for done in range(1, repeat + 1):
            total = 0
            for i in range(count):
                start = time.perf_counter_ns()
                forward(i)
                elapsed = time.perf_counter_ns() - start
                per_sample_ns[i].append(elapsed)
                total += elapsed
            pass_ns.append(total)
            left_s = (repeat - done) * statistics.mean(pass_ns) / 1e9
            if time.monotonic() + left_s > deadline:
                raise PeerError(f"{name}: {repeat} timed passes of {total / 1e9:.3g} s each would "
                                f"end {time.monotonic() + left_s - deadline:.3g} s past the time "
                                "limit; measured none")
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


def load_plugin(framework):
    # The plug-ins import this file as peer_bench; it runs as __main__.
    sys.modules.setdefault("peer_bench", sys.modules["__main__"])
    return importlib.import_module("peer_" + framework)


def run(workdir, spec, deadline):
    framework = spec["framework"]
    if framework in ONNX_FRAMEWORKS and spec["model"] == "treelstm":
        raise PeerError(no_onnx_treelstm(framework))
    samples, tokens = load_samples(workdir, spec["model"])
    expected = load_expected(workdir, spec["check"], len(samples))
    with load_plugin(framework).variants(Peer(workdir, spec, samples)) as (version, variants):
        measure(spec, version, variants, expected, tokens, deadline)


def measure(spec, version, variants, expected, tokens, deadline):
    """Checks every chosen variant, then times each and prints its line. No
    variant is timed before all pass, so a mismatch leaves no figures on stdout."""
    framework = spec["framework"]
    variants = chosen_variants(spec, variants)
    errors = [check_outputs(framework, variant, expected, spec) for variant in variants]
    for variant, error in zip(variants, errors):
        figures = time_variant(f"{framework}/{variant.name}", variant.forward, tokens,
                               spec["warmup"], spec["repeat"], deadline)
        figures["max_abs_error"] = error
        figures.update(variant.figures)
        configuration = {"precision": variant.precision, **variant.configuration}
        if variant.tolerance:
            configuration["rtol"], configuration["atol"] = variant.tolerance
        print(json.dumps({"framework": framework, "variant": variant.name, "version": version,
                          "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
                          "configuration": configuration, "figures": figures}), flush=True)


def warn(message):
    print(f"peer_bench: warning: {message}", file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("export", "run"))
    parser.add_argument("--workdir", required=True, help="the work directory the caller wrote")
    args = parser.parse_args()
    started = time.monotonic()
    global np
    try:
        if not os.path.isdir(args.workdir):
            raise PeerError(f"{args.workdir} is not a directory")
        spec = read_spec(args.workdir)
        set_thread_environment(spec["threads"])
        import numpy as np  # after the thread environment: OpenBLAS reads it on load
        deadline = started + spec.get("time_limit_s", math.inf)
        if args.command == "run":
            run(args.workdir, spec, deadline)
        elif spec["model"] == "treelstm":
            raise PeerError(no_onnx_treelstm("the ONNX export"))
        else:
            load_plugin("pytorch").export(Peer(args.workdir, spec, samples=None))
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
