// Checks that hold for every registered operator: its OpDef is complete and
// consistent, and the operator table of docs/operators.md lists exactly the
// registered operators.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nimble/compiler/op/op.h"

namespace nimble::op {
namespace {

// The part of docs/operators.md after the "## Registered operators" heading.
std::string RegisteredOperatorsSection() {
  const std::string path = NIMBLE_SOURCE_DIR "/docs/operators.md";
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  const size_t start = doc.find("## Registered operators");
  if (start == std::string::npos) {
    ADD_FAILURE() << path << " has no \"## Registered operators\" section";
    return "";
  }
  return doc.substr(start);
}

// The names in the first column of the section's table rows ("| `name` | ...").
std::vector<std::string> DocumentedNames(const std::string& section) {
  std::vector<std::string> names;
  std::istringstream lines(section);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("| `")) continue;
    const size_t end = line.find("` |", 3);
    if (end != std::string::npos) names.push_back(line.substr(3, end - 3));
  }
  return names;
}

TEST(OpRegistryTest, EveryOperatorHasARowInTheDocs) {
  const std::string section = RegisteredOperatorsSection();
  for (const std::string& name : OpRegistry::Global().Names()) {
    EXPECT_NE(section.find("| `" + name + "` |"), std::string::npos)
        << name << " has no row in docs/operators.md";
  }
}

TEST(OpRegistryTest, EveryDocumentedOperatorIsRegisteredOnce) {
  const std::vector<std::string> names = DocumentedNames(RegisteredOperatorsSection());
  EXPECT_EQ(names.size(), OpRegistry::Global().Names().size());
  std::set<std::string> seen;
  for (const std::string& name : names) {
    EXPECT_NE(OpRegistry::Global().Find(name), nullptr)
        << name << " is documented but not registered";
    EXPECT_TRUE(seen.insert(name).second) << name << " has two rows";
  }
}

TEST(OpRegistryTest, EveryDefinitionIsComplete) {
  const std::vector<std::string> names = OpRegistry::Global().Names();
  EXPECT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const OpDef* def = OpRegistry::Global().Find(name);
    ASSERT_NE(def, nullptr);
    EXPECT_EQ(def->name, name);
    EXPECT_FALSE(def->description.empty());
    EXPECT_TRUE(def->relation);
    // Dialect ops become VM instructions, never kernels.
    EXPECT_EQ(static_cast<bool>(def->shape_func), !def->dialect);
    EXPECT_EQ(static_cast<bool>(def->kernel), !def->dialect);
    EXPECT_GE(def->min_inputs, 0);
    EXPECT_LE(def->min_inputs, def->max_inputs);
    std::set<std::string> attr_names;
    for (const AttrSpec& spec : def->attrs) {
      EXPECT_TRUE(attr_names.insert(spec.name).second)
          << "attribute '" << spec.name << "' is declared twice";
    }
  }
}

}  // namespace
}  // namespace nimble::op
