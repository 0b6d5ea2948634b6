#include "nimble/compiler/ir/module.h"

namespace nimble::ir {

GlobalVar IRModuleNode::GetGlobalVar(const std::string& name) {
  auto [it, inserted] = globals_.try_emplace(name);
  if (inserted) it->second = Make<GlobalVarNode>(name);
  return it->second;
}

void IRModuleNode::Add(const GlobalVar& global, Function function) {
  globals_[global->name] = global;
  auto [it, inserted] = function_index_.try_emplace(global->name, functions_.size());
  if (inserted) {
    functions_.push_back({global, std::move(function)});
  } else {
    functions_[it->second] = {global, std::move(function)};
  }
}

Function IRModuleNode::Lookup(const std::string& name) const {
  auto it = function_index_.find(name);
  return it == function_index_.end() ? nullptr : functions_[it->second].function;
}

void IRModuleNode::AddTypeDef(TypeData type_data) {
  for (TypeData& existing : type_defs_) {
    if (existing->header->name == type_data->header->name) {
      existing = std::move(type_data);
      return;
    }
  }
  type_defs_.push_back(std::move(type_data));
}

TypeData IRModuleNode::LookupTypeDef(const std::string& name) const {
  for (const TypeData& type_data : type_defs_) {
    if (type_data->header->name == name) return type_data;
  }
  return nullptr;
}

Constructor IRModuleNode::LookupConstructor(const std::string& name) const {
  for (const TypeData& type_data : type_defs_) {
    for (const Constructor& constructor : type_data->constructors) {
      if (constructor->name == name) return constructor;
    }
  }
  return nullptr;
}

}  // namespace nimble::ir
