// Building ONNX graphs node by node in the ONNX import tests.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nimble::onnx_import {

// A node `op_type` of `inputs` to output `output` (which also names it),
// added to `graph`.
inline onnx::NodeProto& AddNode(onnx::GraphProto& graph, const std::string& op_type,
                                const std::vector<std::string>& inputs, const std::string& output) {
  onnx::NodeProto& node = *graph.add_node();
  node.set_op_type(op_type);
  node.set_name(output);
  for (const std::string& input : inputs) node.add_input(input);
  node.add_output(output);
  return node;
}

inline void SetFloat(onnx::NodeProto& node, const std::string& name, float value) {
  onnx::AttributeProto& attribute = *node.add_attribute();
  attribute.set_name(name);
  attribute.set_type(onnx::AttributeProto::FLOAT);
  attribute.set_f(value);
}

inline void SetInt(onnx::NodeProto& node, const std::string& name, int64_t value) {
  onnx::AttributeProto& attribute = *node.add_attribute();
  attribute.set_name(name);
  attribute.set_type(onnx::AttributeProto::INT);
  attribute.set_i(value);
}

inline void SetGraph(onnx::NodeProto& node, const std::string& name,
                     const onnx::GraphProto& graph) {
  onnx::AttributeProto& attribute = *node.add_attribute();
  attribute.set_name(name);
  attribute.set_type(onnx::AttributeProto::GRAPH);
  *attribute.mutable_g() = graph;
}

// A scalar initializer `name` of `dtype` (FLOAT, INT32, INT64 or BOOL).
inline void AddScalar(onnx::GraphProto& graph, const std::string& name, int32_t dtype,
                      double value) {
  onnx::TensorProto& tensor = *graph.add_initializer();
  tensor.set_name(name);
  tensor.set_data_type(dtype);
  if (dtype == onnx::TensorProto::FLOAT) {
    tensor.add_float_data(static_cast<float>(value));
  } else if (dtype == onnx::TensorProto::INT64) {
    tensor.add_int64_data(static_cast<int64_t>(value));
  } else {
    tensor.add_int32_data(static_cast<int32_t>(value));
  }
}

// An input `name` of element type `dtype` added to `graph`; a dimension of
// -1 is a named one (`n`, `n1`, ...).
inline void AddInput(onnx::GraphProto& graph, const std::string& name, int32_t dtype,
                     const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto& input = *graph.add_input();
  input.set_name(name);
  onnx::TypeProto::Tensor& type = *input.mutable_type()->mutable_tensor_type();
  type.set_elem_type(dtype);
  onnx::TensorShapeProto& shape = *type.mutable_shape();
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] < 0) {
      shape.add_dim()->set_dim_param("n" + (d == 0 ? std::string() : std::to_string(d)));
    } else {
      shape.add_dim()->set_dim_value(dims[d]);
    }
  }
}

}  // namespace nimble::onnx_import
