// The Microsoft Research Paraphrase Corpus in its distributed form
// (msr_paraphrase_test.txt): a UTF-8 TSV, optionally with a byte-order mark,
// whose header line is "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String" and
// whose every other line is one sentence pair.
#pragma once

#include <string>
#include <vector>

namespace nimble::datasets {

struct MrpcPair {
  int quality = 0;  // 1: paraphrase, 0: not
  std::string id1;
  std::string id2;
  std::string sentence1;
  std::string sentence2;
};

// Throws nimble::Error naming the file and line ("path:LINE: ...") for a
// missing header, a wrong field count, a quality other than 0/1, an empty
// sentence or invalid UTF-8; an unreadable file names the path.
std::vector<MrpcPair> ReadMrpc(const std::string& path);

}  // namespace nimble::datasets
