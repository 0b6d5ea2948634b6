// The BERT builder: Relay text for the peer's `Bert` forward pass, generated
// for the sizes asked for.
//
// The hidden state stays (1, L, H) from the embeddings to the pooler, so
// nn.dense, nn.layer_norm and the residual adds take it as it is. In
// attention nn.batch_matmul multiplies the hidden state (batch 1, broadcast)
// by the per-head views of the weights:
//
//   q  = x · Wq_hᵀ        (heads, L, dh)   x (1, L, H), Wq as (heads, dh, H)
//   k  = x · Wk_hᵀ        (heads, L, dh)
//   v  = x · Wv_hᵀ        (heads, L, dh)
//   p  = softmax(q · kᵀ)  (heads, L, L)
//   c  = p · v            (heads, L, dh)   transpose_b=False
//   c  transposed to (L, heads, dh), as (1, L, H)
//   out = c · Woᵀ         nn.dense
//
// q, k and v share one layout, whose per-head transposes copy whole rows of
// dh, and p · v reads v as [k, n], which the generated kernel takes as an
// outer product per token. Computing cᵀ = vᵀ · pᵀ instead (vᵀ from Wv_h · xᵀ)
// cost two transposes that gather a column at a time and a product of dot
// products over only L terms each: 1.7 against 0.9 ms of those kernels a
// 53-token sentence (`nimble run --profile`, BERT-base, 2-core Zen 4).
// The context's transpose leaves the output projection an nn.dense on a
// constant weight, which the compiler packs (transform/pack_dense_weights.h),
// where multiplying cᵀ directly (batch_matmul with transpose_a) took 1.5 ms
// a layer against 0.7 (`nimble run --profile`, BERT-base at L = 128).
// The per-head views, 1/sqrt(dh) folded into Wq and bq, are reshapes and
// multiplies of constants, which constant folding computes at compile time,
// so the weights stay the peer's state_dict tensors. One layer is 21 kernel
// calls: 5 batch matmuls, 3 denses, 8 adds, softmax, the context's transpose,
// 2 layer norms and gelu.
#include "models/bert/bert.h"

#include <cmath>
#include <sstream>

#include "nimble/vm/error.h"

namespace nimble::models {

namespace {

constexpr int kMaxLayers = 48;
// Each size at most 2^24, and all the weights together at most 2^31 floats
// (8 GiB; BERT-large has 0.34G), so that sizes cannot overflow and a typo
// fails here rather than in a huge allocation.
constexpr int64_t kMaxSize = int64_t{1} << 24;
constexpr int64_t kMaxWeights = int64_t{1} << 31;
constexpr int64_t kTokenTypes = 2;
// Uniform in [-0.035, 0.035) has standard deviation 0.0202, BERT's 0.02.
constexpr double kWeightScale = 0.035;

std::string Weight(const std::string& name) {
  return "meta[relay.Constant][" + name + "]";
}

std::string LayerWeight(int layer, const std::string& name) {
  return Weight("layers." + std::to_string(layer) + "." + name);
}

// A float32 literal that reads back as the same float.
std::string FloatLiteral(double value) {
  std::ostringstream text;
  text.precision(9);
  text << value << "f";
  return text.str();
}

std::string LayerNorm(const std::string& data, const std::string& gamma, const std::string& beta) {
  return "nn.layer_norm(" + data + ", " + gamma + ", " + beta + ", epsilon=1e-12f)";
}

// Writes `let %name = value;`, then `// comment` when there is one.
void Let(std::ostringstream& text, const std::string& name, const std::string& value,
         const std::string& comment = "") {
  text << "  let %" << name << " = " << value << ";";
  if (!comment.empty()) text << "  // " << comment;
  text << "\n";
}

// Encoder layer `layer` (post-LayerNorm), from %x<layer> to %x<layer + 1>.
void EncoderLayer(const BertOptions& options, int layer, std::ostringstream& text) {
  const int64_t head_size = options.hidden_size / options.heads;
  const std::string heads = std::to_string(options.heads);
  const std::string dh = std::to_string(head_size);
  const std::string hidden = std::to_string(options.hidden_size);
  const std::string scale = FloatLiteral(1.0 / std::sqrt(static_cast<double>(head_size)));
  const std::string n = std::to_string(layer);
  const std::string x = "%x" + n;
  const auto weight = [&](const std::string& name) { return LayerWeight(layer, name); };
  const auto view = [&](const std::string& name, const std::string& shape) {
    return "reshape(" + weight(name) + ", newshape=[" + shape + "])";
  };
  const std::string per_head = heads + ", " + dh + ", " + hidden;
  text << "  // Layer " << n
       << ": self-attention. The weights' per-head views (q's scaled by 1/sqrt(" << dh
       << ")) fold at compile time.\n";
  Let(text, "wq" + n, "multiply(" + view("attn.query.weight", per_head) + ", " + scale + ")");
  Let(text, "bq" + n,
      "multiply(" + view("attn.query.bias", heads + ", 1, " + dh) + ", " + scale + ")");
  Let(text, "wk" + n, view("attn.key.weight", per_head));
  Let(text, "bk" + n, view("attn.key.bias", heads + ", 1, " + dh));
  Let(text, "wv" + n, view("attn.value.weight", per_head));
  Let(text, "bv" + n, view("attn.value.bias", heads + ", 1, " + dh));
  Let(text, "q" + n, "add(nn.batch_matmul(" + x + ", %wq" + n + "), %bq" + n + ")",
      "(" + heads + ", L, " + dh + ")");
  Let(text, "k" + n, "add(nn.batch_matmul(" + x + ", %wk" + n + "), %bk" + n + ")",
      "(" + heads + ", L, " + dh + ")");
  Let(text, "v" + n, "add(nn.batch_matmul(" + x + ", %wv" + n + "), %bv" + n + ")",
      "(" + heads + ", L, " + dh + ")");
  Let(text, "probs" + n, "nn.softmax(nn.batch_matmul(%q" + n + ", %k" + n + "), axis=-1)",
      "(" + heads + ", L, L)");
  Let(text, "context" + n,
      "reshape(transpose(nn.batch_matmul(%probs" + n + ", %v" + n +
          ", transpose_b=False), axes=[1, 0, 2]), newshape=[1, -1, " + hidden + "])",
      "(1, L, " + hidden + ")");
  Let(text, "attention" + n, "nn.dense(%context" + n + ", " + weight("attn_out.weight") + ")",
      "(1, L, " + hidden + ")");
  Let(text, "h" + n,
      LayerNorm("add(add(%attention" + n + ", " + weight("attn_out.bias") + "), " + x + ")",
                weight("ln1.weight"), weight("ln1.bias")));
  text << "  // Layer " << n << ": feed-forward.\n";
  Let(text, "inter" + n,
      "gelu(add(nn.dense(%h" + n + ", " + weight("inter.weight") + "), " + weight("inter.bias") +
          "))");
  Let(text, "x" + std::to_string(layer + 1),
      LayerNorm("add(add(nn.dense(%inter" + n + ", " + weight("out.weight") + "), " +
                    weight("out.bias") + "), %h" + n + ")",
                weight("ln2.weight"), weight("ln2.bias")));
}

std::string BertProgram(const BertOptions& options) {
  const bool dynamic = options.seq_len < 0;
  const std::string length = !dynamic ? std::to_string(options.seq_len)
                             : options.bounded_length
                                 ? "?<=" + std::to_string(options.max_positions)
                                 : "?";
  const std::string ids = "Tensor[(1, " + length + "), int32]";
  // The embeddings of positions 0..L-1, a slice of the table: with L static,
  // one that folds into a constant; with L dynamic, one that ends at L, whose
  // type keeps the table's length as its bound. A sequence longer than the
  // table is an error (its slice is shorter than the words').
  const std::string positions =
      dynamic ? "dyn.strided_slice(" + Weight("pos.weight") +
                    ", full(0i64, shape=[1], dtype=\"int64\"), strided_slice(shape_of(%input_ids, "
                    "dtype=\"int64\"), begin=[1], end=[2]), full(1i64, shape=[1], "
                    "dtype=\"int64\"))"
              : "strided_slice(" + Weight("pos.weight") + ", begin=[0], end=[" + length + "])";
  std::ostringstream text;
  text << "#[version = \"0.0.5\"]\n"
       << "// BERT (vocab " << options.vocab_size << ", hidden " << options.hidden_size << ", "
       << options.layers << " layers, " << options.heads << " heads, FFN " << options.ffn_size
       << ", " << options.max_positions << " positions, " << options.classes
       << " classes), generated by\n"
       << "// models/bert/bert.cc: the classifier's logits for one sequence of L tokens.\n"
       << "def @main(%input_ids: " << ids << ", %token_type_ids: " << ids << ")\n"
       << "    -> Tensor[(1, " << options.classes << "), float32] {\n"
       << "  // Embeddings. An id outside its table is an error (mode \"fast\"), not clipped.\n";
  Let(text, "words", "take(" + Weight("word.weight") + ", %input_ids, axis=0, mode=\"fast\")");
  Let(text, "positions", positions);
  Let(text, "token_types",
      "take(" + Weight("tok_type.weight") + ", %token_type_ids, axis=0, mode=\"fast\")");
  Let(text, "x0",
      LayerNorm("add(add(%words, %positions), %token_types)", Weight("ln.weight"),
                Weight("ln.bias")),
      "(1, L, " + std::to_string(options.hidden_size) + ")");
  for (int layer = 0; layer < options.layers; ++layer) EncoderLayer(options, layer, text);
  text << "  // Pooler on the first token ([CLS]), then the classifier.\n";
  Let(text, "first", "take(%x" + std::to_string(options.layers) + ", 0, axis=1, mode=\"fast\")");
  Let(text, "pooled",
      "tanh(add(nn.dense(%first, " + Weight("pooler.weight") + "), " + Weight("pooler.bias") +
          "))");
  text << "  add(nn.dense(%pooled, " << Weight("cls.weight") << "), " << Weight("cls.bias") << ")\n"
       << "}\n";
  return text.str();
}

void CheckOptions(const BertOptions& options) {
  const std::pair<const char*, int64_t> sizes[] = {{"vocab_size", options.vocab_size},
                                                   {"hidden_size", options.hidden_size},
                                                   {"heads", options.heads},
                                                   {"ffn_size", options.ffn_size},
                                                   {"max_positions", options.max_positions},
                                                   {"classes", options.classes}};
  for (const auto& [name, value] : sizes) {
    if (value < 1 || value > kMaxSize) {
      throw Error("bert: " + std::string(name) + " must be between 1 and " +
                  std::to_string(kMaxSize) + ", got " + std::to_string(value));
    }
  }
  if (options.hidden_size % options.heads != 0) {
    throw Error("bert: hidden_size " + std::to_string(options.hidden_size) +
                " is not a multiple of heads " + std::to_string(options.heads));
  }
  if (options.layers < 1 || options.layers > kMaxLayers) {
    throw Error("bert: layers must be between 1 and " + std::to_string(kMaxLayers) + ", got " +
                std::to_string(options.layers));
  }
  if (options.seq_len != -1 && (options.seq_len < 1 || options.seq_len > options.max_positions)) {
    throw Error("bert: seq_len must be -1 (dynamic) or between 1 and max_positions " +
                std::to_string(options.max_positions) + ", got " + std::to_string(options.seq_len));
  }
}

bool IsLayerNormGamma(const std::string& name) {
  return name == "ln.weight" || name.ends_with(".ln1.weight") || name.ends_with(".ln2.weight");
}

// Seeded weights at BERT's initialisation scale, with the layer norms'
// gammas moved to 1 (1 ± 0.035): a gamma near 0 would shrink every
// activation. Biases and betas keep the small ±0.035 rather than BERT's
// zeros, so the tests see them.
text::ParamMap SeededBertWeights(const std::vector<WeightSpec>& specs, uint64_t seed) {
  text::ParamMap weights = SeededWeights(specs, seed, kWeightScale);
  for (auto& [name, tensor] : weights) {
    if (!IsLayerNormGamma(name)) continue;
    float* gamma = tensor->data<float>();
    for (int64_t i = 0; i < tensor->numel(); ++i) gamma[i] += 1.0f;
  }
  return weights;
}

}  // namespace

std::vector<WeightSpec> BertWeightSpecs(const BertOptions& options) {
  CheckOptions(options);
  const int64_t hidden = options.hidden_size;
  std::vector<WeightSpec> specs = {
      {"word.weight", {options.vocab_size, hidden}},
      {"pos.weight", {options.max_positions, hidden}},
      {"tok_type.weight", {kTokenTypes, hidden}},
      {"ln.weight", {hidden}},
      {"ln.bias", {hidden}},
  };
  const auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    specs.push_back({name + ".weight", {out, in}});
    specs.push_back({name + ".bias", {out}});
  };
  for (int layer = 0; layer < options.layers; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    linear(prefix + "attn.query", hidden, hidden);
    linear(prefix + "attn.key", hidden, hidden);
    linear(prefix + "attn.value", hidden, hidden);
    linear(prefix + "attn_out", hidden, hidden);
    specs.push_back({prefix + "ln1.weight", {hidden}});
    specs.push_back({prefix + "ln1.bias", {hidden}});
    linear(prefix + "inter", options.ffn_size, hidden);
    linear(prefix + "out", hidden, options.ffn_size);
    specs.push_back({prefix + "ln2.weight", {hidden}});
    specs.push_back({prefix + "ln2.bias", {hidden}});
  }
  linear("pooler", hidden, hidden);
  linear("cls", options.classes, hidden);
  return specs;
}

Model BuildBert(const BertOptions& options) {
  const std::vector<WeightSpec> specs = BertWeightSpecs(options);
  int64_t total = 0;
  for (const WeightSpec& spec : specs) total += ShapeNumel(spec.shape);
  if (total > kMaxWeights) {
    throw Error("bert: the weights would hold " + std::to_string(total) + " floats, more than " +
                std::to_string(kMaxWeights));
  }
  return Model{.name = "bert",
               .program = BertProgram(options),
               .weights = options.weights_path.empty() ? SeededBertWeights(specs, options.seed)
                                                       : LoadWeights(options.weights_path, specs)};
}

}  // namespace nimble::models
