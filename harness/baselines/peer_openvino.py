"""OpenVINO for peer_bench.py (whose docstring is the contract): the work
directory's model.onnx, compiled for the CPU plug-in twice.

Variants: f32 = INFERENCE_PRECISION_HINT f32; default = the precision the
plug-in picks for this CPU by itself (bf16 where it has AMX or AVX512-BF16),
recorded as the run's precision. A variant below f32 is checked with
REDUCED_PRECISION_TOLERANCE, recorded in its run; max_abs_error says how far
it went. compile_s: the seconds compile_model took.

Threads: INFERENCE_NUM_THREADS `threads`, one stream, the latency hint.
"""
import contextlib
import importlib.metadata
import time

from peer_bench import Variant, import_framework

# (rtol, atol) for bf16 and f16: 8 and 11 bits of mantissa, where f32 has 24.
# BERT-base at bf16 differed from Nimble's logits by 6.7e-3 on an AMX Xeon.
REDUCED_PRECISION_TOLERANCE = (2e-2, 2e-2)


@contextlib.contextmanager
def variants(peer):
    ov = import_framework("openvino")
    core = ov.Core()
    model = core.read_model(peer.onnx_path())
    config = {"INFERENCE_NUM_THREADS": peer.spec["threads"], "NUM_STREAMS": 1,
              "PERFORMANCE_HINT": "LATENCY"}
    feeds = peer.onnx_feeds()
    found = []
    for name, hints in (("f32", {"INFERENCE_PRECISION_HINT": "f32"}), ("default", {})):
        start = time.perf_counter()
        compiled = core.compile_model(model, "CPU", {**config, **hints})
        compile_s = time.perf_counter() - start
        request = compiled.create_infer_request()
        precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        found.append(Variant(
            name, lambda i, request=request: request.infer(feeds[i])[0].copy(),
            precision=precision,
            tolerance=None if precision == "f32" else REDUCED_PRECISION_TOLERANCE,
            figures={"compile_s": compile_s}))
    # The package's release (2026.4.1), not the build string ov.__version__ gives.
    yield importlib.metadata.version("openvino"), found
