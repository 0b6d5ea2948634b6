"""Runs the exported cases (export_models.py) in ONNX Runtime, where installed.

Usage: onnxruntime_outputs.py OUT_DIR

For each case in OUT_DIR/cases.txt and each of its lengths, writes ONNX
Runtime's outputs for the same inputs as OUT_DIR/NAME.L.ort.npz (out0,
out1, ...). Exits 3 when onnxruntime cannot be imported.
"""
import os
import sys

import numpy as np

try:
    import onnxruntime
except ImportError:
    sys.exit(3)


def main():
    out_dir = sys.argv[1]
    with open(os.path.join(out_dir, "cases.txt")) as cases:
        for line in cases:
            name, lengths = line.split()
            session = onnxruntime.InferenceSession(os.path.join(out_dir, name + ".onnx"),
                                                   providers=["CPUExecutionProvider"])
            names = [i.name for i in session.get_inputs()]
            for length in lengths.split(","):
                arrays = np.load(os.path.join(out_dir, f"{name}.{length}.npz"))
                outputs = session.run(None, {n: arrays[n] for n in names})
                np.savez(os.path.join(out_dir, f"{name}.{length}.ort.npz"),
                         **{f"out{i}": o for i, o in enumerate(outputs)})


if __name__ == "__main__":
    main()
