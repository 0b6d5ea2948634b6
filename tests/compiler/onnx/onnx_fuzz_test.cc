// Seeded random mutations of real ONNX models: PyTorch's exports of a BERT
// encoder, an operator graph, a 2-layer LSTM and a GRU, whose initial state is folded
// at import (export_models.py, where PyTorch is
// installed) and a graph built here of every converted operator. Bytes are
// flipped, cut and inserted, and the model's structure is edited (op types,
// attributes, inputs, dims, initializer data, opsets). Every import must
// either succeed or throw nimble::Error; this suite is built with
// AddressSanitizer and UBSan over the importer's own sources
// (tests/meson.build), so an out-of-bounds access, an absurd allocation or
// undefined behaviour fails it.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/onnx/onnx_import.h"
#include "nimble/vm/error.h"

namespace nimble::onnx_import {
namespace {

namespace fs = std::filesystem;

onnx::NodeProto* AddNode(onnx::GraphProto& graph, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs) {
  onnx::NodeProto* node = graph.add_node();
  node->set_op_type(op);
  node->set_name(op + "_" + std::to_string(graph.node_size()));
  for (const std::string& input : inputs) node->add_input(input);
  for (const std::string& output : outputs) node->add_output(output);
  return node;
}

void IntAttr(onnx::NodeProto* node, const std::string& name, int64_t value) {
  onnx::AttributeProto* attribute = node->add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::INT);
  attribute->set_i(value);
}

void IntsAttr(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* attribute = node->add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::INTS);
  for (int64_t value : values) attribute->add_ints(value);
}

void Initializer(onnx::GraphProto& graph, const std::string& name, const std::vector<int64_t>& dims,
                 const std::vector<float>& values) {
  onnx::TensorProto* tensor = graph.add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t dim : dims) tensor->add_dims(dim);
  for (float value : values) tensor->add_float_data(value);
}

void IntInitializer(onnx::GraphProto& graph, const std::string& name,
                    const std::vector<int64_t>& values) {
  onnx::TensorProto* tensor = graph.add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(onnx::TensorProto::INT64);
  tensor->add_dims(static_cast<int64_t>(values.size()));
  tensor->set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
}

void Input(onnx::GraphProto& graph, const std::string& name, const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto* input = graph.add_input();
  input->set_name(name);
  onnx::TypeProto::Tensor* tensor = input->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t dim : dims) {
    onnx::TensorShapeProto::Dimension* d = tensor->mutable_shape()->add_dim();
    if (dim < 0) {
      d->set_dim_param("sequence");
    } else {
      d->set_dim_value(dim);
    }
  }
}

// A graph of the converted operators on x: (1, ?, 8).
std::string BuiltModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_version(13);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name("operators");
  Input(graph, "x", {1, -1, 8});
  std::vector<float> weight(64);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 0.01f * static_cast<float>(i);
  Initializer(graph, "w", {8, 8}, weight);
  Initializer(graph, "gamma", {8}, std::vector<float>(8, 1.0f));
  Initializer(graph, "beta", {8}, std::vector<float>(8, 0.0f));
  IntInitializer(graph, "zero", {0});
  IntInitializer(graph, "one", {1});
  IntInitializer(graph, "heads", {2, 4});
  IntInitializer(graph, "split", {3, 5});
  AddNode(graph, "MatMul", {"x", "w"}, {"h"});
  AddNode(graph, "Erf", {"h"}, {"e"});
  AddNode(graph, "Add", {"h", "e"}, {"a"});
  AddNode(graph, "Shape", {"a"}, {"shape"});
  IntAttr(AddNode(graph, "Gather", {"shape", "one"}, {"length"}), "axis", 0);
  AddNode(graph, "Slice", {"shape", "zero", "one"}, {"batch"});
  AddNode(graph, "Concat", {"batch", "length", "heads"}, {"newshape"})->add_attribute();
  graph.mutable_node(graph.node_size() - 1)->clear_attribute();
  IntAttr(graph.mutable_node(graph.node_size() - 1), "axis", 0);
  AddNode(graph, "Reshape", {"a", "newshape"}, {"r"});
  IntsAttr(AddNode(graph, "Transpose", {"r"}, {"t"}), "perm", {0, 2, 1, 3});
  IntAttr(AddNode(graph, "Softmax", {"t"}, {"s"}), "axis", -1);
  AddNode(graph, "MatMul", {"s", "t"}, {"st"});  // the inner sizes checked at run time
  AddNode(graph, "Tanh", {"a"}, {"tanh"});
  IntAttr(AddNode(graph, "LayerNormalization", {"tanh", "gamma", "beta"}, {"norm"}), "axis", -1);
  IntAttr(AddNode(graph, "Split", {"norm", "split"}, {"p", "q"}), "axis", 2);
  AddNode(graph, "Sigmoid", {"p"}, {"sig"});
  AddNode(graph, "Unsqueeze", {"sig", "zero"}, {"u"});
  AddNode(graph, "Squeeze", {"u", "zero"}, {"sq"});
  IntsAttr(AddNode(graph, "ReduceMean", {"q"}, {"mean"}), "axes", {-1});
  AddNode(graph, "Greater", {"sq", "sig"}, {"more"});
  AddNode(graph, "Where", {"more", "sq", "sig"}, {"picked"});
  AddNode(graph, "ConstantOfShape", {"shape"}, {"zeros"});
  AddNode(graph, "Expand", {"mean", "shape"}, {"grown"});
  IntAttr(AddNode(graph, "Cast", {"grown"}, {"cast"}), "to", onnx::TensorProto::INT64);
  for (const char* output : {"picked", "zeros", "cast", "st"}) {
    onnx::ValueInfoProto* value = graph.add_output();
    value->set_name(output);
  }
  return model.SerializeAsString();
}

// PyTorch's exports, when the exporter is there.
std::vector<std::string> ExportedModels() {
  const fs::path dir = fs::temp_directory_path() / ("nimble_onnx_fuzz_" + std::to_string(getpid()));
  std::vector<std::string> models;
  const std::string command = std::string("/usr/bin/python3 ") + NIMBLE_SOURCE_DIR +
                              "/tests/compiler/onnx/export_models.py " + dir.string() +
                              " > /dev/null 2>&1";
  if (std::system(command.c_str()) == 0) {
    for (const char* name :
         {"bert_opset14.onnx", "ops.onnx", "lstm2.onnx", "gru1.onnx", "greedy_decoder.onnx",
          "branch.onnx", "lstm_lengths.onnx", "nn_ops.onnx"}) {
      std::ifstream file(dir / name, std::ios::binary);
      models.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return models;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : random_(seed) {}

  size_t Below(size_t bound) {
    return bound == 0 ? 0 : std::uniform_int_distribution<size_t>(0, bound - 1)(random_);
  }

  int64_t Interesting() {
    static constexpr int64_t kValues[] = {0,         1,         -1,        2,        3,     -2,
                                          7,         64,        -64,       1000,     65535, 1 << 20,
                                          INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
    return kValues[Below(std::size(kValues))];
  }

  void MutateBytes(std::string& bytes) {
    const size_t edits = 1 + Below(4);
    for (size_t i = 0; i < edits && !bytes.empty(); ++i) {
      switch (Below(4)) {
        case 0:
          bytes[Below(bytes.size())] ^= static_cast<char>(1 << Below(8));
          break;
        case 1:
          bytes[Below(bytes.size())] = static_cast<char>(Interesting());
          break;
        case 2:
          bytes.resize(Below(bytes.size()));
          break;
        default:
          bytes.insert(Below(bytes.size()), 1 + Below(8), static_cast<char>(Below(256)));
      }
    }
  }

  // The model's graph or one nested in a node's attribute (a Loop's body,
  // an If's branch), at random.
  onnx::GraphProto& RandomGraph(onnx::ModelProto& model) {
    std::vector<onnx::GraphProto*> graphs{model.mutable_graph()};
    for (size_t i = 0; i < graphs.size(); ++i) {
      for (onnx::NodeProto& node : *graphs[i]->mutable_node()) {
        for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
          if (attribute.has_g()) graphs.push_back(attribute.mutable_g());
        }
      }
    }
    return *graphs[Below(graphs.size())];
  }

  void MutateModel(onnx::ModelProto& model) {
    const size_t edits = 1 + Below(3);
    for (size_t i = 0; i < edits; ++i) {
      onnx::GraphProto& graph = RandomGraph(model);
      switch (Below(8)) {
        case 0: {  // another operator
          if (graph.node_size() == 0) break;
          static const char* kOps[] = {"Add",       "MatMul",
                                       "Reshape",   "Gather",
                                       "Slice",     "Split",
                                       "Concat",    "Softmax",
                                       "Transpose", "Unsqueeze",
                                       "Range",     "Expand",
                                       "Where",     "Cast",
                                       "Squeeze",   "Shape",
                                       "Dropout",   "Gemm",
                                       "ReduceSum", "Constant",
                                       "LSTM",      "GRU",
                                       "Loop",      "If",
                                       "Flatten",   "BatchNormalization",
                                       "NonZero",   "ArgMax"};
          graph.mutable_node(Below(graph.node_size()))->set_op_type(kOps[Below(std::size(kOps))]);
          break;
        }
        case 1: {  // an attribute's value
          onnx::NodeProto* node = RandomNode(graph);
          if (!node || node->attribute_size() == 0) break;
          onnx::AttributeProto* attribute = node->mutable_attribute(Below(node->attribute_size()));
          if (attribute->ints_size() > 0) {
            attribute->set_ints(Below(attribute->ints_size()), Interesting());
          } else {
            attribute->set_i(Interesting());
            attribute->set_f(static_cast<float>(Interesting()));
          }
          if (Below(4) == 0)
            attribute->set_type(static_cast<onnx::AttributeProto::AttributeType>(Below(12)));
          break;
        }
        case 2: {  // an input rewired to another tensor, or dropped
          onnx::NodeProto* node = RandomNode(graph);
          onnx::NodeProto* other = RandomNode(graph);
          if (!node || !other || node->input_size() == 0 || other->output_size() == 0) break;
          if (Below(3) == 0) {
            node->mutable_input()->RemoveLast();
          } else {
            node->set_input(Below(node->input_size()), other->output(Below(other->output_size())));
          }
          break;
        }
        case 3: {  // an input's dimension
          if (graph.input_size() == 0) break;
          auto* shape = graph.mutable_input(Below(graph.input_size()))
                            ->mutable_type()
                            ->mutable_tensor_type()
                            ->mutable_shape();
          if (shape->dim_size() == 0) break;
          if (Below(4) == 0) {
            shape->mutable_dim()->RemoveLast();
          } else {
            shape->mutable_dim(Below(shape->dim_size()))->set_dim_value(Interesting());
          }
          break;
        }
        case 4: {  // an initializer's dims, type or data
          if (graph.initializer_size() == 0) break;
          onnx::TensorProto* tensor = graph.mutable_initializer(Below(graph.initializer_size()));
          switch (Below(3)) {
            case 0:
              if (tensor->dims_size() > 0)
                tensor->set_dims(Below(tensor->dims_size()), Interesting());
              break;
            case 1:
              tensor->set_data_type(static_cast<int32_t>(Below(17)));
              break;
            default:
              if (tensor->has_raw_data()) {
                tensor->mutable_raw_data()->resize(Below(tensor->raw_data().size() + 16));
              } else if (tensor->float_data_size() > 0) {
                tensor->mutable_float_data()->RemoveLast();
              }
          }
          break;
        }
        case 5:  // the opset
          if (model.opset_import_size() > 0) {
            model.mutable_opset_import(0)->set_version(static_cast<int64_t>(Below(20)));
          }
          break;
        case 6: {  // a node removed
          if (graph.node_size() == 0) break;
          graph.mutable_node()->DeleteSubrange(static_cast<int>(Below(graph.node_size())), 1);
          break;
        }
        default: {  // two nodes swapped
          if (graph.node_size() < 2) break;
          graph.mutable_node()->SwapElements(static_cast<int>(Below(graph.node_size())),
                                             static_cast<int>(Below(graph.node_size())));
        }
      }
    }
  }

 private:
  onnx::NodeProto* RandomNode(onnx::GraphProto& graph) {
    return graph.node_size() == 0 ? nullptr : graph.mutable_node(Below(graph.node_size()));
  }

  std::mt19937_64 random_;
};

// Imports `bytes`; fails the test on anything but success or nimble::Error.
void ImportSurvives(const std::string& bytes, const std::string& what) {
  try {
    ImportOnnx(bytes, "fuzz.onnx");
  } catch (const Error&) {
  } catch (const std::exception& error) {
    ADD_FAILURE() << what << ": " << typeid(error).name() << ": " << error.what();
  }
}

TEST(OnnxFuzz, TheBuiltSeedImports) {
  const ir::IRModule module = ImportOnnx(BuiltModel(), "built.onnx");
  EXPECT_EQ(module->Lookup("main")->params.size(), 1u);
}

TEST(OnnxFuzz, MutatedModelsImportOrFailCleanly) {
  std::vector<std::string> seeds = ExportedModels();
  seeds.push_back(BuiltModel());
  for (size_t s = 0; s < seeds.size(); ++s) {
    onnx::ModelProto seed;
    ASSERT_TRUE(seed.ParseFromString(seeds[s])) << "seed " << s;
    for (uint64_t round = 0; round < 150; ++round) {
      Mutator mutator(s * 1000003 + round);
      std::string bytes = seeds[s];
      mutator.MutateBytes(bytes);
      ImportSurvives(bytes, "seed " + std::to_string(s) + " bytes round " + std::to_string(round));
      onnx::ModelProto model = seed;
      mutator.MutateModel(model);
      ImportSurvives(model.SerializeAsString(),
                     "seed " + std::to_string(s) + " structure round " + std::to_string(round));
      if (HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace nimble::onnx_import
