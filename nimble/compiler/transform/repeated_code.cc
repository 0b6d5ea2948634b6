// A call graph over globals, with an edge for every mention of a global
// (called or not), walked from each global to find the cycles, then from
// the repeated globals to what they reach.
#include "nimble/compiler/transform/repeated_code.h"

#include <map>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::transform {

namespace {

// The globals a function mentions, and whether it passes any as a value.
class Mentions : public ir::ExprVisitor {
 public:
  std::set<std::string> globals;
  std::set<std::string> as_values;

  void VisitCall(const ir::CallNode* node) override {
    if (node->callee->kind == ir::ExprKind::kGlobalVar) {
      globals.insert(static_cast<const ir::GlobalVarNode&>(*node->callee).name);
    } else {
      VisitExpr(node->callee);
    }
    for (const ir::Expr& arg : node->args) VisitExpr(arg);
  }
  void VisitGlobalVar(const ir::GlobalVarNode* node) override {
    globals.insert(node->name);
    as_values.insert(node->name);
  }
};

// Every global reachable from `from` along `edges`, `from` itself only when
// on a cycle.
std::set<std::string> Reachable(const std::string& from,
                                const std::map<std::string, std::set<std::string>>& edges) {
  std::set<std::string> seen;
  std::vector<std::string> work(edges.at(from).begin(), edges.at(from).end());
  while (!work.empty()) {
    const std::string name = std::move(work.back());
    work.pop_back();
    if (!seen.insert(name).second) continue;
    const auto next = edges.find(name);
    if (next != edges.end()) work.insert(work.end(), next->second.begin(), next->second.end());
  }
  return seen;
}

}  // namespace

RepeatedCode::RepeatedCode(const ir::IRModule& module) {
  std::map<std::string, std::set<std::string>> edges;
  std::set<std::string> roots;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    const std::string& name = definition.global->name;
    Mentions mentions;
    mentions.VisitExpr(definition.function);
    edges[name] = mentions.globals;
    roots.insert(mentions.as_values.begin(), mentions.as_values.end());
    if (HasFlag(definition.function.get(), kClosureAttr)) roots.insert(name);
  }
  for (const auto& [name, callees] : edges) {
    if (Reachable(name, edges).contains(name)) roots.insert(name);
  }
  for (const std::string& root : roots) {
    repeated_.insert(root);
    if (edges.contains(root)) {
      const std::set<std::string> reached = Reachable(root, edges);
      repeated_.insert(reached.begin(), reached.end());
    }
  }
}

ir::Expr RepeatedCodeMutator::VisitFunction(const ir::FunctionNode* function) {
  if (HasFlag(function, kPrimitiveAttr)) return ir::RefOf(function);
  ++depth_;
  ir::Expr result = ir::ExprMutator::VisitFunction(function);
  --depth_;
  return result;
}

}  // namespace nimble::transform
