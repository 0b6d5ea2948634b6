-- Version 4 -> 5: runs of the peer frameworks `nimble-bench baseline` gained
-- beyond PyTorch and ONNX Runtime (docs/reports.md): OpenVINO, TensorFlow,
-- MXNet, TVM and DyNet.

-- SQLite cannot change a column's CHECK: the column is made anew with the
-- wider one, given the old one's values, and takes its name.
ALTER TABLE runs ADD COLUMN framework_v5 TEXT NOT NULL DEFAULT 'nimble'
  CHECK (framework_v5 IN ('nimble', 'pytorch', 'onnxruntime', 'openvino', 'tensorflow', 'mxnet',
                          'tvm', 'dynet'));
UPDATE runs SET framework_v5 = framework;
ALTER TABLE runs DROP COLUMN framework;
ALTER TABLE runs RENAME COLUMN framework_v5 TO framework;
