"""Apache TVM for peer_bench.py (whose docstring is the contract): the work
directory's model.onnx imported into Relax with the token axis kept symbolic
(tvm.relax.frontend.onnx.from_onnx), compiled by tvm.compile through TVM's
default pipeline for this host's LLVM target, untuned, and run on the Relax
VM. BERT only: TVM 0.27's Relax ONNX importer has no LSTM operator
(OpNotImplemented), and the Tree-LSTM has no ONNX export. One variant,
relax_vm; compile_s: the seconds the import and compilation
took (the target is recorded in the run).

Threads: TVM_NUM_THREADS `threads` (set before TVM loads its thread pool).
"""
import contextlib
import os
import platform
import time

from peer_bench import PeerError, Variant, import_framework

NO_LSTM = "tvm has no LSTM baseline: TVM 0.27's Relax ONNX importer has no LSTM operator"


@contextlib.contextmanager
def variants(peer):
    if peer.spec["model"] == "lstm":
        raise PeerError(NO_LSTM)
    os.environ.setdefault("TVM_NUM_THREADS", str(peer.spec["threads"]))
    tvm = import_framework("tvm")
    onnx = import_framework("onnx")
    import tvm.relax.frontend.onnx as relax_onnx

    # TVM takes targets as dicts; a target without its triple falls back to a generic CPU.
    target = {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(),
              "mtriple": f"{platform.machine()}-linux-gnu", "num-cores": peer.spec["threads"]}
    start = time.perf_counter()
    module = relax_onnx.from_onnx(onnx.load(peer.onnx_path()), keep_params_in_input=False)
    executable = tvm.compile(module, tvm.target.Target(target))
    compile_s = time.perf_counter() - start
    device = tvm.cpu()
    machine = tvm.relax.VirtualMachine(executable, device)
    feeds = [[tvm.runtime.tensor(value, device) for value in feed.values()]
             for feed in peer.onnx_feeds()]

    def forward(i):
        return machine["main"](*feeds[i]).numpy()

    yield tvm.__version__, [Variant("relax_vm", forward,
                                    configuration={"tvm_target": target["mcpu"]},
                                    figures={"compile_s": compile_s})]
