// An IRModule: the global functions of a program (in definition order, so
// printing is stable) and its algebraic data types.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/expr.h"

namespace nimble::ir {

class IRModuleNode : public Object {
 public:
  // The global variable for `name`, created on first use so that recursive and
  // mutually recursive definitions can refer to it before it is defined.
  GlobalVar GetGlobalVar(const std::string& name);
  // Adds or replaces the definition of a global.
  void Add(const GlobalVar& global, Function function);
  // Null when `name` is not defined.
  Function Lookup(const std::string& name) const;
  bool Contains(const std::string& name) const { return Lookup(name) != nullptr; }

  void AddTypeDef(TypeData type_data);
  // Null when absent.
  TypeData LookupTypeDef(const std::string& name) const;
  Constructor LookupConstructor(const std::string& name) const;

  struct Definition {
    GlobalVar global;
    Function function;
  };
  const std::vector<Definition>& functions() const { return functions_; }
  const std::vector<TypeData>& type_defs() const { return type_defs_; }

 private:
  std::vector<Definition> functions_;
  std::unordered_map<std::string, size_t> function_index_;
  std::unordered_map<std::string, GlobalVar> globals_;
  std::vector<TypeData> type_defs_;
};
using IRModule = Ref<IRModuleNode>;

inline IRModule MakeModule() {
  return Make<IRModuleNode>();
}

}  // namespace nimble::ir
