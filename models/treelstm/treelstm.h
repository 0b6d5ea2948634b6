// The binary constituency Tree-LSTM of the paper's evaluation [6.1] (Tai et
// al. 2015): input 300, hidden 150. The input tree is an ADT built at run
// time and the model recurses over it:
//
//   type Tree { Leaf(Tensor[(), int32]), Node(Tree, Tree) }
//   def @main(%tree: Tree, %leaves: Tensor[(?, INPUT), float32]) -> Tensor[(1, HIDDEN), float32]
//
// returns the root's hidden state; a leaf holds its row of %leaves, the
// sentence's word vectors. `nimble run` reads only tensors, so the
// program also takes the tree as arrays:
//
//   def @main_arrays(%children: Tensor[(?, 2), int32], %leaves: Tensor[(?, INPUT), float32])
//
// where row k of %children is node k's (left, right) row numbers, or (-1, j)
// for a leaf carrying row j of %leaves, and the last row is the root.
//
// A leaf computes i, o, u from its word vector (c = σ(i)·tanh(u),
// h = σ(o)·tanh(c)), all leaves in one matrix product before the recursion,
// since no leaf depends on another; a node computes i, f_l, f_r, o, u from
// [h_l, h_r] (c = σ(i)·tanh(u) + σ(f_l)·c_l + σ(f_r)·c_r). Weights
// are named as the peer's BinaryTreeLSTMCell state_dict
// (../shared/peers/torch_models.py): leaf.weight (3H, I), leaf.bias (3H),
// node.weight (5H, 2H), node.bias (5H).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace nimble::models {

struct TreeLstmOptions {
  int64_t input_size = 300;
  int64_t hidden_size = 150;
  uint64_t seed = 1;
  std::string weights_path = {};
};

std::vector<WeightSpec> TreeLstmWeightSpecs(const TreeLstmOptions& options);

Model BuildTreeLstm(const TreeLstmOptions& options);

// A binary tree in post-order: node k's children are left[k] and right[k]
// (both -1 for a leaf), children come before their parent, the root is last;
// leaves are numbered 0, 1, ... from left to right in that order.
struct BinaryTree {
  std::vector<int32_t> left;
  std::vector<int32_t> right;
  size_t num_leaves() const;
};

// @main's arguments (%tree, %leaves) for `tree` whose leaf j carries row j of
// `leaf_vectors` (n_leaves, INPUT), the tree built with the constructors of
// `module` (a Module() of this model). Throws nimble::Error on a malformed
// tree (a child after its parent, a node with one child, row count).
std::vector<Ref<Object>> TreeArguments(const ir::IRModule& module, const BinaryTree& tree,
                                       const Tensor& leaf_vectors);

}  // namespace nimble::models
