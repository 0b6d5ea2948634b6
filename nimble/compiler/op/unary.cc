// Unary elementwise operators and cast: output type = input type (cast: the
// `dtype` attribute), pattern elementwise. Their scalar functions, shape
// functions and built-in kernels live in the runtime
// (vm/kernels/elemwise_functions.h, elemwise.cc); the reference kernel here
// applies the same scalar function one element at a time.
#include <cstdint>
#include <string>

#include "nimble/compiler/op/dtype_class.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/kernels/elemwise_functions.h"

namespace nimble::op {

namespace {

// The reference kernel: out[i] = fn(in[i]), element by element in the compute
// type. Input and output have one shape, so flat index i is the same element
// of both.
template <typename In, typename Out, typename Fn>
void ReferenceUnary(const Tensor& input, const Tensor& output, const Fn& fn) {
  const In* in = input->data<In>();
  Out* out = output->data<Out>();
  for (int64_t i = 0; i < output->numel(); ++i) {
    out[i] = ConvertElement<Out>(fn(LoadElement(in[i])));
  }
}

// Registers an op computing `fn` on each element; the output has the input's
// type, whose dtype must be one `fn` accepts.
template <typename Fn>
void RegisterUnaryOp(OpRegistry& registry, const std::string& name, const std::string& description,
                     Fn fn) {
  OpDef& def = registry.Register(name);
  def.description = description;
  def.relation = RequireDTypeClass(Fn::kAccepts, IdentityRelation, /*check_output=*/true);
  def.pattern = OpPattern::kElemWise;
  def.kernel = [fn](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(Fn::kAccepts)) {
        ReferenceUnary<T, T>(inputs[0], outputs[0], fn);
      } else {
        ThrowUnsupportedDType(inputs[0]->dtype());
      }
    });
  };
}

bool CastRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                  TypeReporter& reporter) {
  const ir::TensorType input = AsTensorType(types[0], "cast", "argument 0");
  if (!input) return false;
  reporter.Assign(types[1], ir::MakeTensorType(input->shape, attrs.GetDType("dtype")));
  return true;
}

void RegisterCast(OpRegistry& registry) {
  OpDef& def = registry.Register("cast");
  def.description =
      "Converts each element to `dtype`. Float to integer truncates toward zero, saturates at the "
      "integer range and maps NaN to 0; anything to bool is `x != 0`.";
  def.attrs = {
      {.name = "dtype", .kind = ir::AttrKind::kDType, .default_value = {}, .required = true}};
  def.relation = CastRelation;
  def.pattern = OpPattern::kElemWise;
  def.kernel = [](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto in_tag) {
      DispatchDType(outputs[0]->dtype(), [&](auto out_tag) {
        ReferenceUnary<decltype(in_tag), decltype(out_tag)>(inputs[0], outputs[0],
                                                            elemwise::Identity());
      });
    });
  };
}

}  // namespace

void RegisterUnaryOps(OpRegistry& registry) {
  elemwise::ForEachUnaryFunction([&](const char* name, const char* description, auto fn) {
    RegisterUnaryOp(registry, name, description, fn);
  });
  RegisterCast(registry);
}

}  // namespace nimble::op
