// Reading the test programs of tests/programs, which the evaluator's tests and
// the differential test (evaluator vs. VM) share. A program whose first line
// is `// uses: NAME` gets NAME.relay of its own directory appended: the text
// format has no imports, and since items may come in any order, appending
// (rather than prepending) keeps the line:col of errors in the program's own
// lines equal to those of its file.
#pragma once

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "nimble/vm/error.h"

namespace nimble::test {

// The text of the program file at `path`, with the file its first line names
// in `// uses: NAME` appended. Throws nimble::Error when a file cannot be read.
inline std::string ReadProgramFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("cannot read program " + path + ": " + std::strerror(errno));
  std::ostringstream stream;
  stream << file.rdbuf();
  std::string text = stream.str();
  const std::string directive = "// uses: ";
  if (text.starts_with(directive)) {
    const std::string used = text.substr(directive.size(), text.find('\n') - directive.size());
    const std::string directory = path.substr(0, path.find_last_of('/') + 1);
    text += "\n" + ReadProgramFile(directory + used + ".relay");
  }
  return text;
}

// The program tests/programs/NAME.relay of the source tree.
inline std::string ReadTestProgram(const std::string& name) {
  return ReadProgramFile(std::string(NIMBLE_SOURCE_DIR) + "/tests/programs/" + name + ".relay");
}

}  // namespace nimble::test
