"""Exports the ONNX import tests' models with PyTorch's exporter.

Usage: export_models.py OUT_DIR
       export_models.py --bert OUT.onnx [--layers N] [--hidden H] [--heads A] [--ffn F]
       export_models.py --elman OUT.onnx

The first form writes, for each case, OUT_DIR/NAME.onnx and, per sequence
length L, the inputs and PyTorch's outputs as OUT_DIR/NAME.L.npz (in0, in1,
..., out0, out1, ...), and lists the cases in OUT_DIR/cases.txt ("NAME
L1,L2,..."). The second writes one BERT encoder with BERT's vocabulary
(30522 ids) and 512 positions, seeded random weights and a dynamic sequence
axis (opset 17), for `nimble-bench run --onnx` (BERT-base: the defaults).
The third writes a scripted Elman RNN over 300-wide word vectors, an ONNX
Loop over the sequence, for `nimble-bench run --onnx`.
Needs Debian's python3-torch and python3-onnx.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(7)


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.size = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)

    def split(self, x):
        # As Hugging Face's BERT: the sizes come from the tensor itself.
        shape = x.size()[:-1] + (self.heads, self.size)
        return x.view(shape).permute(0, 2, 1, 3)

    def forward(self, x):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.size)
        context = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return self.out(context.view(context.size()[:-2] + (self.heads * self.size,)))


class Layer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attention = Attention(hidden, heads)
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x):
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.down(nn.functional.gelu(self.up(x))))


class Bert(nn.Module):
    def __init__(self, vocab=60, hidden=32, heads=4, ffn=64, layers=2, positions=64):
        super().__init__()
        self.words = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(positions, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(Layer(hidden, heads, ffn) for _ in range(layers))
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, ids):
        length = ids.size(1)
        positions = torch.arange(length, dtype=torch.long).unsqueeze(0)
        x = self.norm(self.words(ids) + self.positions(positions))
        for layer in self.layers:
            x = layer(x)
        return x, torch.tanh(self.pool(x[:, 0]))


class Ops(nn.Module):
    """The element-wise, comparison and shape operators BERT-like graphs use."""

    def forward(self, x, y):
        mask = (x > 0) & ~(y < 0.5) | torch.eq(x, y)
        picked = torch.where(mask, x, torch.sqrt(torch.abs(y)) ** 2.0)
        grown = picked.unsqueeze(1).expand(-1, 3, -1, -1)
        halves = torch.split(grown, [1, 2], dim=1)
        filler = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32) + 1.5
        mean = x.mean(dim=-1, keepdim=True)
        centred = (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
        return (halves[1].squeeze(0) * torch.sigmoid(x), torch.relu(filler - 2.0),
                centred, (x[:, 1:] * 2).to(torch.int64), torch.exp(-x).sum(1))


class NnOps(nn.Module):
    """Batch normalization, global pools, Flatten, NonZero, the reductions, Tile and Pad of images."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(3)
        self.norm.running_mean.uniform_(-1, 1)
        self.norm.running_var.uniform_(0.5, 2)
        self.norm.weight.data.uniform_(0.5, 1.5)
        self.norm.bias.data.uniform_(-1, 1)

    def forward(self, x):
        y = self.norm(x)
        return (nn.functional.adaptive_avg_pool2d(y, 1), nn.functional.adaptive_max_pool2d(x, 1),
                torch.flatten(y, 1), torch.nonzero(x > 0.5), torch.norm(x, dim=-1),
                torch.norm(x, p=1, dim=1), torch.logsumexp(x * 10, dim=2),
                torch.argmin(x, dim=3), torch.argmax(x, dim=1, keepdim=True),
                x.repeat(1, 2, 1, 3), nn.functional.pad(x, (1, 1, 2, 1), mode="reflect"),
                nn.functional.pad(x, (1, 2, 0, 1), mode="replicate"),
                nn.functional.pad(x, (2, 0, 1, 1), value=0.5))


class Contractions(nn.Module):
    """Einsum as attention and other exports write it: batched products, a transpose, a dot."""

    def forward(self, q, k):
        scores = torch.einsum("bhid,bhjd->bhij", q, k)
        return (scores, torch.einsum("bhij,bhjd->bhid", scores, k), torch.einsum("bhid->bdhi", q),
                torch.einsum("bhid,bhid->bh", q, k), torch.einsum("...id,...jd->...ij", q, k),
                torch.einsum("bhid,bhjd->ij", q, k))


class Resizes(nn.Module):
    """Resize as nn.functional.interpolate exports it: nearest and bilinear, by scale and size."""

    def forward(self, x):
        interpolate = nn.functional.interpolate
        return (interpolate(x, scale_factor=2.0, mode="nearest"),
                interpolate(x, scale_factor=(1.5, 0.5), mode="bilinear", align_corners=False),
                interpolate(x, size=(3, 7), mode="bilinear", align_corners=True),
                interpolate(x, scale_factor=3.0, mode="bilinear"))


class TextCnn(nn.Module):
    """A text CNN over a sentence of any length: 1-D convolutions, pools and a classifier."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(20, 16, 3, padding=1)
        self.conv2 = nn.Conv1d(16, 8, 3, stride=2, dilation=2, padding=2)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        y = nn.functional.max_pool1d(torch.relu(self.conv1(x)), 2)
        y = torch.relu(self.conv2(y))
        return self.out(torch.flatten(nn.functional.adaptive_max_pool1d(y, 1), 1))


class Images(nn.Module):
    """2-D convolutions (grouped, strided), transposed convolutions and pools of any size."""

    def __init__(self):
        super().__init__()
        self.grouped = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), groups=2)
        self.up = nn.ConvTranspose2d(6, 3, 3, stride=2, padding=1, output_padding=1)
        self.up1 = nn.ConvTranspose1d(4, 2, 4, stride=3, padding=2, groups=2)

    def forward(self, x):
        y = self.grouped(x)
        return (y, self.up(y),
                nn.functional.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                                         count_include_pad=False),
                nn.functional.avg_pool2d(x, 2),
                nn.functional.max_pool2d(x, (2, 3), stride=1, padding=(1, 1)), self.up1(x[:, :, 0]))


class Index(nn.Module):
    """TopK, CumSum, GatherElements and ScatterND as PyTorch exports them."""

    def forward(self, x, i):
        values, indices = torch.topk(x, 3, dim=1)
        smallest, _ = torch.topk(x, 2, dim=0, largest=False)
        y = x.clone()
        y[0] = x[1] * 2
        return (torch.cumsum(x, dim=1), values, indices, smallest, torch.gather(x, 1, i),
                x[i[:, 0], i[:, 1]], y)


def export_gather_nd(out_dir):
    """GatherND (batch_dims 0 and 1), built with onnx.helper; numpy's indexing is the reference."""
    import onnx
    from onnx import TensorProto, helper
    nodes = [helper.make_node("GatherND", ["in0", "in1"], ["out0"]),
             helper.make_node("GatherND", ["in0", "in2"], ["out1"], batch_dims=1)]
    graph = helper.make_graph(
        nodes, "gather_nd",
        [helper.make_tensor_value_info("in0", TensorProto.FLOAT, [3, "n", 4]),
         helper.make_tensor_value_info("in1", TensorProto.INT64, ["k", 2]),
         helper.make_tensor_value_info("in2", TensorProto.INT64, [3, "k", 1])],
        [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("out1", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(out_dir, "gather_nd.onnx"))
    rng = np.random.default_rng(3)
    for n in (2, 5):
        data = rng.standard_normal((3, n, 4)).astype(np.float32)
        pairs = np.stack([rng.integers(0, 3, 6), rng.integers(-n, n, 6)], axis=1)
        rows = rng.integers(0, n, (3, 6, 1))
        batched = np.stack([data[b][rows[b, :, 0]] for b in range(3)])
        np.savez(os.path.join(out_dir, f"gather_nd.{n}.npz"), in0=data, in1=pairs, in2=rows,
                 out0=data[pairs[:, 0], pairs[:, 1]], out1=batched)
    with open(os.path.join(out_dir, "cases.txt"), "a") as cases:
        cases.write("gather_nd 2,5\n")


def export_helper_ops(out_dir):
    """What PyTorch 1.13 does not export, built with onnx.helper at opset 20: Gelu both ways,
    ReduceL2 / ReduceSumSquare / ReduceLogSumExp with axes as an input, Size, Split into
    num_outputs and a Scan (running sums over a dynamic axis, the second input reversed);
    numpy computes the references."""
    import math

    import onnx
    from onnx import TensorProto, helper
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "column"], ["sum_out"]),
         helper.make_node("Mul", ["sum_out", "reversed_column"], ["product"])],
        "body",
        [helper.make_tensor_value_info("sum_in", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("column", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("reversed_column", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("sum_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("product", TensorProto.FLOAT, [3])])
    nodes = [
        helper.make_node("Gelu", ["in0"], ["out0"]),
        helper.make_node("Gelu", ["in0"], ["out1"], approximate="tanh"),
        helper.make_node("ReduceL2", ["in0", "last"], ["out2"], keepdims=0),
        helper.make_node("ReduceSumSquare", ["in0", "last"], ["out3"]),
        helper.make_node("ReduceLogSumExp", ["in0", "last"], ["out4"], keepdims=0),
        helper.make_node("Size", ["in0"], ["out5"]),
        helper.make_node("Split", ["in1"], ["out6", "out7"], axis=0, num_outputs=2),
        helper.make_node("Scan", ["zeros", "in0", "in0"], ["out8", "out9"], body=scan_body,
                         num_scan_inputs=2, scan_input_axes=[1, 1], scan_input_directions=[0, 1],
                         scan_output_axes=[1]),
    ]
    graph = helper.make_graph(
        nodes, "helper_ops",
        [helper.make_tensor_value_info("in0", TensorProto.FLOAT, [3, "n"]),
         helper.make_tensor_value_info("in1", TensorProto.FLOAT, [5, 2])],
        [helper.make_tensor_value_info(f"out{i}", TensorProto.INT64 if i == 5 else TensorProto.FLOAT,
                                       None) for i in range(10)],
        [helper.make_tensor("last", TensorProto.INT64, [1], [-1]),
         helper.make_tensor("zeros", TensorProto.FLOAT, [3], [0, 0, 0])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]),
              os.path.join(out_dir, "helper_ops.onnx"))
    erf = np.vectorize(math.erf)
    rng = np.random.default_rng(5)
    for n in (1, 4, 7):
        x = (rng.standard_normal((3, n)) * 2).astype(np.float32)
        y = rng.standard_normal((5, 2)).astype(np.float32)
        sums = np.cumsum(x, axis=1)
        scanned = sums * x[:, ::-1]
        outputs = [0.5 * x * (1 + erf(x / math.sqrt(2))),
                   0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                   np.sqrt((x * x).sum(-1)), (x * x).sum(-1, keepdims=True),
                   np.log(np.exp(x).sum(-1)), np.array(x.size, dtype=np.int64), y[:3], y[3:],
                   sums[:, -1], scanned]
        arrays = {"in0": x, "in1": y}
        arrays.update({f"out{i}": np.asarray(o).astype(o.dtype if o.dtype == np.int64 else np.float32)
                       for i, o in enumerate(outputs)})
        np.savez(os.path.join(out_dir, f"helper_ops.{n}.npz"), **arrays)
    with open(os.path.join(out_dir, "cases.txt"), "a") as cases:
        cases.write("helper_ops 1,4,7\n")


class Linear2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(12, 5)

    def forward(self, x):
        return torch.log(torch.exp(self.linear(x)) + 1) / 3


class Recurrent(nn.Module):
    """nn.LSTM or nn.GRU over a sequence: every step's output and the final states.

    With `lengths`, a batch of padded sequences of those lengths (as
    pack_padded_sequence): outputs past a sequence's end are zeros and its
    final state is its last step's."""

    def __init__(self, cell, layers, bidirectional=False):
        super().__init__()
        self.rnn = cell(10, 6, num_layers=layers, bidirectional=bidirectional)

    def forward(self, x, lengths=None):
        if lengths is None:
            output, states = self.rnn(x)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
            output, states = self.rnn(packed)
            output = nn.utils.rnn.pad_packed_sequence(output, total_length=x.shape[0])[0]
        if isinstance(states, tuple):
            return (output,) + states
        return output, states


class CountedLoop(nn.Module):
    """A loop over the input's first axis (a trip count of its length), carrying a state."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4) * 0.5)

    def forward(self, x):
        h = torch.zeros(1, 4)
        for i in range(x.size(0)):
            h = torch.tanh(h @ self.weight + x[i])
        return h


class WhileLoop(nn.Module):
    """A trip count that depends on the values: doubling until the sum passes 100."""

    def forward(self, x):
        y = x
        steps = torch.zeros((), dtype=torch.long)
        while bool(y.abs().sum() < 100.0):
            y = y * 2.0 + 0.1
            steps = steps + 1
        return y, steps


class GreedyDecoder(nn.Module):
    """Up to 12 greedy steps with an early break at token 0; the tokens grow each step."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Parameter(torch.randn(8, 6))
        self.out = nn.Parameter(torch.randn(6, 8))

    def forward(self, h):
        tokens = torch.zeros(0, dtype=torch.long)
        for _ in range(12):
            token = torch.argmax(h @ self.out, dim=1)
            tokens = torch.cat([tokens, token])
            if bool(token[0] == 0):
                break
            h = torch.tanh(h + self.embed[token])
        return tokens, h


class Elman(nn.Module):
    """An Elman RNN over a sentence's word vectors (sequence, 1, 300), scripted: a Loop."""

    def __init__(self):
        super().__init__()
        self.input = nn.Parameter(torch.randn(300, 128) * 0.05)
        self.recurrent = nn.Parameter(torch.randn(128, 128) * 0.05)

    def forward(self, words):
        h = torch.zeros(1, 128)
        for i in range(words.size(0)):
            h = torch.tanh(words[i] @ self.input + h @ self.recurrent)
        return h


class Branch(nn.Module):
    """A branch on a reduced value whose two sides give different shapes."""

    def forward(self, x):
        if bool(x.mean() > 0):
            y = x[1:] * 2.0
        else:
            y = torch.cat([x, x - 1.0], dim=0)
        return y


def export(out_dir, name, model, make_inputs, lengths, dynamic_axes, opset, script=False):
    model.eval()
    if script:  # TorchScript's exporter: Python control flow becomes Loop and If
        model = torch.jit.script(model)
    sample = make_inputs(lengths[0])
    inputs = [f"in{i}" for i in range(len(sample))]
    with torch.no_grad():
        outputs = model(*sample)
    count = len(outputs) if isinstance(outputs, tuple) else 1
    torch.onnx.export(model, sample, os.path.join(out_dir, name + ".onnx"), input_names=inputs,
                      output_names=[f"out{i}" for i in range(count)], dynamic_axes=dynamic_axes,
                      opset_version=opset)
    for length in lengths:
        args = make_inputs(length)
        with torch.no_grad():
            results = model(*args)
        if not isinstance(results, tuple):
            results = (results,)
        arrays = {f"in{i}": a.numpy() for i, a in enumerate(args)}
        arrays.update({f"out{i}": r.numpy() for i, r in enumerate(results)})
        np.savez(os.path.join(out_dir, f"{name}.{length}.npz"), **arrays)
    with open(os.path.join(out_dir, "cases.txt"), "a") as cases:
        cases.write(f"{name} {','.join(map(str, lengths))}\n")


def export_with_lengths(out_dir, name, cell, lengths_by_case):
    """A one-layer bidirectional `cell` over a batch of 3 padded sequences: the
    exported layer's node given sequence_lens (PyTorch's exporter does not
    export packed sequences), against PyTorch's packed run."""
    import onnx
    model = Recurrent(cell, 1, bidirectional=True).eval()
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, (torch.randn(4, 3, 10),), path, input_names=["in0"],
                      output_names=["out0", "out1"] + (["out2"] if cell is nn.LSTM else []),
                      dynamic_axes={"in0": {0: "sequence"}}, opset_version=14)
    graph = onnx.load(path)
    (node,) = [n for n in graph.graph.node if n.op_type in ("LSTM", "GRU")]
    while len(node.input) < 5:
        node.input.append("")
    node.input[4] = "in1"
    graph.graph.input.append(onnx.helper.make_tensor_value_info("in1", onnx.TensorProto.INT32, [3]))
    onnx.save(graph, path)
    for case, lengths in enumerate(lengths_by_case):
        x = torch.randn(max(lengths), 3, 10)
        with torch.no_grad():
            results = model(x, torch.tensor(lengths))
        arrays = {"in0": x.numpy(), "in1": np.array(lengths, dtype=np.int32)}
        arrays.update({f"out{i}": r.numpy() for i, r in enumerate(results)})
        np.savez(os.path.join(out_dir, f"{name}.{case}.npz"), **arrays)
    with open(os.path.join(out_dir, "cases.txt"), "a") as cases:
        cases.write(f"{name} {','.join(map(str, range(len(lengths_by_case))))}\n")


def export_bert(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--bert", required=True)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--ffn", type=int, default=3072)
    args = parser.parse_args(argv)
    model = Bert(vocab=30522, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                 layers=args.layers, positions=512).eval()
    torch.onnx.export(model, (torch.randint(0, 30522, (1, 16)),), args.bert,
                      input_names=["input_ids"], output_names=["sequence", "pooled"],
                      dynamic_axes={"input_ids": {1: "sequence"}}, opset_version=17)


def main():
    if sys.argv[1] == "--bert":
        export_bert(sys.argv[1:])
        return
    if sys.argv[1] == "--elman":
        torch.onnx.export(torch.jit.script(Elman().eval()), (torch.randn(5, 1, 300),), sys.argv[2],
                          input_names=["words"], dynamic_axes={"words": {0: "sequence"}},
                          opset_version=14)
        return
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    bert = Bert()
    ids = lambda length: (torch.randint(0, 60, (1, length)),)
    for opset in (14, 17):
        export(out_dir, f"bert_opset{opset}", bert, ids, [7, 1, 16, 33],
               {"in0": {1: "sequence"}}, opset)
    two = lambda length: (torch.randn(2, length, 6), torch.randn(2, length, 6))
    export(out_dir, "ops", Ops(), two, [4, 9], {"in0": {1: "n"}, "in1": {1: "n"}}, 13)
    export(out_dir, "ops_opset11", Ops(), two, [4], {"in0": {1: "n"}, "in1": {1: "n"}}, 11)
    images = lambda n: (torch.randn(1 + n % 2, 3, 4, n),)
    export(out_dir, "nn_ops", NnOps(), images, [5, 2, 8], {"in0": {0: "batch", 3: "n"}}, 14)
    heads = lambda n: (torch.randn(1 + n % 2, 2, n, 4), torch.randn(1 + n % 2, 2, n, 4))
    export(out_dir, "einsum", Contractions(), heads, [3, 6],
           {"in0": {0: "batch", 2: "n"}, "in1": {0: "batch", 2: "n"}}, 14)
    export(out_dir, "resize", Resizes(), lambda n: (torch.randn(1, 2, 4, n),), [5, 8],
           {"in0": {3: "n"}}, 13)
    export(out_dir, "text_cnn", TextCnn(), lambda n: (torch.randn(1, 20, n),), [9, 4, 16],
           {"in0": {2: "n"}}, 14)
    export(out_dir, "images", Images(), lambda n: (torch.randn(1, 4, n, n + 2),), [7, 4, 10],
           {"in0": {2: "h", 3: "w"}}, 14)
    export(out_dir, "index", Index(),
           lambda n: (torch.randn(4, n), torch.randint(0, min(n, 4), (4, 2))), [6, 3],
           {"in0": {1: "n"}}, 14)
    export_gather_nd(out_dir)
    export_helper_ops(out_dir)
    export(out_dir, "linear", Linear2d(), lambda length: (torch.randn(length, 12),), [3, 8],
           {"in0": {0: "batch"}}, 13)
    sequence = lambda length: (torch.randn(length, 1, 10),)
    for cell, name in ((nn.LSTM, "lstm"), (nn.GRU, "gru")):
        for layers in (1, 2):
            export(out_dir, f"{name}{layers}", Recurrent(cell, layers), sequence, [5, 1, 12],
                   {"in0": {0: "sequence"}}, 14)
        export(out_dir, f"{name}_bidirectional", Recurrent(cell, 2, bidirectional=True), sequence,
               [5, 1, 12], {"in0": {0: "sequence"}}, 14)
        export_with_lengths(out_dir, f"{name}_lengths", cell, [[5, 2, 1], [3, 3, 3], [1, 4, 2]])
    first_axis = {"in0": {0: "n"}}
    export(out_dir, "loop_counted", CountedLoop(), lambda n: (torch.randn(n, 1, 4),), [5, 1, 9],
           first_axis, 14, script=True)
    export(out_dir, "loop_while", WhileLoop(), lambda n: (torch.randn(n) * 0.5,), [3, 8],
           first_axis, 14, script=True)
    # The sizes only label the cases: each draws another start state.
    export(out_dir, "greedy_decoder", GreedyDecoder(), lambda n: (torch.randn(1, 6) * n,),
           [1, 2, 3, 4, 5], first_axis, 14, script=True)
    export(out_dir, "branch", Branch(),
           lambda n: (torch.randn(n, 2) + (2.0 if n % 2 else -2.0),), [3, 4, 7], first_axis, 14,
           script=True)


if __name__ == "__main__":
    main()
