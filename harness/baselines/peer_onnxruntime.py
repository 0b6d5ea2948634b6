"""ONNX Runtime for peer_bench.py (whose docstring is the contract): one
variant, onnxruntime, running the work directory's model.onnx on the CPU
execution provider with all graph optimisations.

Threads: an intra-op pool of `threads`, inter-op 1, sequential execution.
"""
import contextlib

from peer_bench import Variant, import_framework


@contextlib.contextmanager
def variants(peer):
    ort = import_framework("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = peer.spec["threads"]
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(peer.onnx_path(), options, providers=["CPUExecutionProvider"])
    feeds = peer.onnx_feeds()
    yield ort.__version__, [Variant("onnxruntime", lambda i: session.run(None, feeds[i])[0])]

