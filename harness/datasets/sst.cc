// The SST loaders. Both forms end in BuildPostOrder's checks, so a tree from
// either one is a valid post-order BinaryTree whose leaves are its tokens.
#include "harness/datasets/sst.h"

#include <array>
#include <filesystem>
#include <optional>
#include <utility>

#include "harness/datasets/text.h"

namespace nimble::datasets {

namespace {

constexpr int32_t kNone = -1;

// A binary tree given as the children of each node (kNone for a leaf's), with
// leaves 0 .. n-1 in sentence order and each node the child of at most one
// other. Returns it in post-order, the child with the leftmost leaf first;
// fails (naming `where`) when `root` does not reach every node or two
// branches cross.
models::BinaryTree BuildPostOrder(std::vector<std::array<int32_t, 2>> children, int32_t root,
                                  size_t num_leaves, const std::string& where) {
  const size_t count = children.size();
  // Visits the nodes under `root` in post-order of `children`, along an
  // explicit stack: a degenerate tree is as deep as it is long.
  const auto post_order = [&](const auto& visit) {
    std::vector<std::pair<int32_t, bool>> stack = {{root, false}};
    while (!stack.empty()) {
      auto [node, expanded] = stack.back();
      stack.pop_back();
      if (expanded) {
        visit(node);
        continue;
      }
      stack.push_back({node, true});
      if (children[node][0] != kNone) {
        stack.push_back({children[node][1], false});
        stack.push_back({children[node][0], false});
      }
    }
  };
  // First pass: order each node's children by their leftmost leaf.
  std::vector<int32_t> leftmost(count, kNone);
  size_t reached = 0;
  post_order([&](int32_t node) {
    ++reached;
    auto& [first, second] = children[node];
    if (first == kNone) {
      leftmost[node] = node;
      return;
    }
    if (leftmost[second] < leftmost[first]) std::swap(first, second);
    leftmost[node] = leftmost[first];
  });
  if (reached != count) {
    text::Fail(where, "the root reaches " + std::to_string(reached) + " of " +
                          std::to_string(count) + " nodes (a cycle or a detached subtree)");
  }
  // Second pass: number the nodes.
  models::BinaryTree tree;
  std::vector<int32_t> post_order_id(count, kNone);
  std::vector<int32_t> leaf_order;  // the leaves as post-order meets them
  post_order([&](int32_t node) {
    const auto& [first, second] = children[node];
    post_order_id[node] = static_cast<int32_t>(tree.left.size());
    if (first == kNone) leaf_order.push_back(node);
    tree.left.push_back(first == kNone ? kNone : post_order_id[first]);
    tree.right.push_back(first == kNone ? kNone : post_order_id[second]);
  });
  // Post-order meets the leaves left to right only if no two branches cross.
  for (size_t i = 0; i < num_leaves; ++i) {
    if (leaf_order[i] != static_cast<int32_t>(i)) {
      text::Fail(where, "branches cross: leaf " + std::to_string(leaf_order[i] + 1) +
                            " is at position " + std::to_string(i + 1) + " from the left");
    }
  }
  return tree;
}

// One STree.txt line: `count` 1-based parent pointers, 0 for the root, the
// first `num_leaves` entries the leaves.
models::BinaryTree ParseParentPointers(const std::string& line, size_t num_leaves,
                                       const std::string& where, const std::string& token_where) {
  std::vector<std::string_view> fields = text::Split(line, '|');
  const size_t count = fields.size();
  if (count != 2 * num_leaves - 1) {
    text::Fail(where, std::to_string(count) + " nodes cannot be a binary tree over the " +
                          std::to_string(num_leaves) + " tokens of " + token_where + " (expected " +
                          std::to_string(2 * num_leaves - 1) + " nodes)");
  }
  std::vector<std::array<int32_t, 2>> children(count, {kNone, kNone});
  std::optional<int32_t> root;
  for (size_t node = 0; node < count; ++node) {
    const std::string name = "node " + std::to_string(node + 1);
    std::optional<int64_t> parent = text::ParseInt(fields[node]);
    if (!parent || *parent > static_cast<int64_t>(count)) {
      text::Fail(where, name + ": parent pointer \"" + std::string(fields[node]) +
                            "\" is not in 0.." + std::to_string(count));
    }
    if (*parent == 0) {
      if (root) {
        text::Fail(where, "two roots: nodes " + std::to_string(*root + 1) + " and " +
                              std::to_string(node + 1));
      }
      root = static_cast<int32_t>(node);
      continue;
    }
    const size_t parent_index = static_cast<size_t>(*parent - 1);
    if (parent_index < num_leaves) {
      text::Fail(where, name + " has leaf " + std::to_string(*parent) + " as its parent");
    }
    auto& slots = children[parent_index];
    if (slots[1] != kNone) {
      text::Fail(where, "node " + std::to_string(*parent) + " has more than two children");
    }
    slots[slots[0] == kNone ? 0 : 1] = static_cast<int32_t>(node);
  }
  // 2n-1 nodes, leaves never parents and no node over two children leave
  // every internal node exactly two, and one node (the root) none; the
  // check keeps that argument from being load-bearing.
  if (!root) text::Fail(where, "no root (no parent pointer is 0)");
  return BuildPostOrder(std::move(children), *root, num_leaves, where);
}

}  // namespace

std::vector<SstSentence> ReadSst(const std::string& directory, SstSplit split) {
  const std::string tree_path = (std::filesystem::path(directory) / "STree.txt").string();
  const std::string token_path = (std::filesystem::path(directory) / "SOStr.txt").string();
  const std::string split_path = (std::filesystem::path(directory) / "datasetSplit.txt").string();
  std::vector<std::string> tree_lines = text::ReadLines(tree_path);
  std::vector<std::string> token_lines = text::ReadLines(token_path);
  std::vector<std::string> split_lines = text::ReadLines(split_path);
  if (tree_lines.size() != token_lines.size()) {
    throw Error(tree_path + " has " + std::to_string(tree_lines.size()) + " lines but " +
                token_path + " has " + std::to_string(token_lines.size()));
  }
  if (split_lines.empty() || split_lines[0] != "sentence_index,splitset_label") {
    text::Fail(text::Location(split_path, 1),
               "expected the header \"sentence_index,splitset_label\"");
  }
  // The split of each sentence, 0 until its entry is read.
  std::vector<int> labels(tree_lines.size(), 0);
  for (size_t i = 1; i < split_lines.size(); ++i) {
    const std::string where = text::Location(split_path, i + 1);
    std::vector<std::string_view> fields = text::Split(split_lines[i], ',');
    std::optional<int64_t> index = fields.size() == 2 ? text::ParseInt(fields[0]) : std::nullopt;
    std::optional<int64_t> label = fields.size() == 2 ? text::ParseInt(fields[1]) : std::nullopt;
    if (!index || !label) {
      text::Fail(where,
                 "expected \"sentence_index,splitset_label\", found \"" + split_lines[i] + "\"");
    }
    if (*index < 1 || *index > static_cast<int64_t>(labels.size())) {
      text::Fail(where, "sentence index " + std::to_string(*index) + " is not in 1.." +
                            std::to_string(labels.size()));
    }
    if (*label < 1 || *label > 3) {
      text::Fail(where, "split label " + std::to_string(*label) +
                            " is not 1 (train), 2 (test) or 3 (dev)");
    }
    if (labels[*index - 1] != 0) {
      text::Fail(where, "a second entry for sentence " + std::to_string(*index));
    }
    labels[*index - 1] = static_cast<int>(*label);
  }
  std::vector<SstSentence> sentences;
  for (size_t i = 0; i < tree_lines.size(); ++i) {
    if (labels[i] == 0) {
      throw Error(split_path + ": no entry for sentence " + std::to_string(i + 1) + " (" +
                  text::Location(tree_path, i + 1) + ")");
    }
    if (labels[i] != static_cast<int>(split)) continue;
    const std::string token_where = text::Location(token_path, i + 1);
    if (std::optional<size_t> offset = text::FindInvalidUtf8(token_lines[i])) {
      text::Fail(token_where, "invalid UTF-8 at byte " + std::to_string(*offset + 1));
    }
    SstSentence sentence;
    for (std::string_view token : text::Split(token_lines[i], '|')) {
      if (token.empty()) text::Fail(token_where, "empty token");
      sentence.tokens.emplace_back(token);
    }
    sentence.tree = ParseParentPointers(tree_lines[i], sentence.tokens.size(),
                                        text::Location(tree_path, i + 1), token_where);
    sentences.push_back(std::move(sentence));
  }
  return sentences;
}

SstSentence ParsePtbTree(const std::string& line, const std::string& where) {
  // An item of an open bracket: a word, or a finished subtree (its node).
  struct Item {
    std::string word;
    int32_t node = kNone;
    size_t column = 0;
  };
  struct Bracket {
    size_t column = 0;
    std::vector<Item> items;
  };
  const auto fail = [&](size_t column, const std::string& message) {
    text::Fail(where + ":" + std::to_string(column), message);
  };
  SstSentence sentence;
  // Children of the internal nodes in creation order; leaf k is node k and
  // internal node j becomes node num_leaves + j once the leaves are counted.
  std::vector<std::array<int32_t, 2>> internal_children;
  constexpr int32_t kInternal = 1 << 30;  // marks an internal node until then
  std::vector<Bracket> open;
  std::optional<Item> root;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t column = pos + 1;
    const char c = line[pos];
    if (c == ' ' || c == '\t') {
      ++pos;
    } else if (root) {
      fail(column, "text after the end of the tree");
    } else if (c == '(') {
      open.push_back({column, {}});
      ++pos;
    } else if (c == ')') {
      if (open.empty()) fail(column, "unbalanced ')': no bracket is open");
      Bracket bracket = std::move(open.back());
      open.pop_back();
      ++pos;
      std::vector<Item>& items = bracket.items;
      // A leading word followed by more items is the node's label.
      if (items.size() > 1 && items[0].node == kNone) items.erase(items.begin());
      Item result{"", kNone, bracket.column};
      if (items.size() == 1 && items[0].node == kNone) {
        result.node = static_cast<int32_t>(sentence.tokens.size());
        sentence.tokens.push_back(std::move(items[0].word));
      } else if (items.size() == 2 && items[0].node != kNone && items[1].node != kNone) {
        result.node = kInternal + static_cast<int32_t>(internal_children.size());
        internal_children.push_back({items[0].node, items[1].node});
      } else {
        fail(bracket.column,
             "a bracket must hold one word or two subtrees (after an optional "
             "label), this one holds " +
                 std::to_string(items.size()) + " items");
      }
      if (open.empty()) {
        root = std::move(result);
      } else {
        open.back().items.push_back(std::move(result));
      }
    } else {
      if (open.empty()) fail(column, "a word outside any bracket");
      size_t end = line.find_first_of(" \t()", pos);
      if (end == std::string::npos) end = line.size();
      std::string word = line.substr(pos, end - pos);
      if (std::optional<size_t> offset = text::FindInvalidUtf8(word)) {
        fail(column + *offset, "invalid UTF-8");
      }
      open.back().items.push_back({std::move(word), kNone, column});
      pos = end;
    }
  }
  if (!open.empty()) {
    fail(open.back().column, "unbalanced '(': " + std::to_string(open.size()) +
                                 " bracket(s) still open at the end of the line");
  }
  if (!root) fail(1, "no tree");
  const int32_t num_leaves = static_cast<int32_t>(sentence.tokens.size());
  const auto renumber = [&](int32_t node) {
    return node >= kInternal ? node - kInternal + num_leaves : node;
  };
  std::vector<std::array<int32_t, 2>> children(num_leaves, {kNone, kNone});
  for (const auto& [left, right] : internal_children) {
    children.push_back({renumber(left), renumber(right)});
  }
  sentence.tree = BuildPostOrder(children, renumber(root->node), num_leaves, where);
  return sentence;
}

std::vector<SstSentence> ReadPtbTrees(const std::string& path) {
  std::vector<std::string> lines = text::ReadLines(path);
  std::vector<SstSentence> sentences;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t") == std::string::npos) continue;
    sentences.push_back(ParsePtbTree(lines[i], text::Location(path, i + 1)));
  }
  return sentences;
}

}  // namespace nimble::datasets
