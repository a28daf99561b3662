// libFuzzer target: the graph reading of the lowering. The input is TorchScript
// IR text (the form `graph.toString()` prints a frozen forward in); torch's IR
// parser builds the graph, with empty tensors for tensor constants, and the
// chain walker reads it as a row model of width 37, then the plan builder takes
// the steps it found. This is the instrumented half of the TorchScript loader:
// the walker's every branch is ltserve code.
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/script.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "torch/chain_walker.h"
#include "torch/lowering.h"

namespace {

// The integers of a list starting at `at` ("3, 37, ..." or "5, 1]"), as doubles (HUGE_VAL
// past double's range; strtod never throws); `at` is left after them.
std::vector<double> ReadIntegers(const char*& at) {
  std::vector<double> values;
  while (*at >= '0' && *at <= '9') {
    char* end = nullptr;
    values.push_back(std::strtod(at, &end));
    at = end;
    while (*at == ',' || *at == ' ') ++at;
  }
  return values;
}

// Whether a tensor type ("Float(3, 37, strides=[37, 1], ...") declares more than `limit`
// elements of storage: 1 + sum over dims of (size - 1) * stride, or the product of the sizes
// where no strides follow. parseIR allocates each tensor constant at its declared sizes and
// strides, so a mutated "Float(99999999, 99999999)" or "Float(3, strides=[1777777777777777])"
// would ask torch for terabytes (the fuzzer's first two findings, harness artefacts: a model
// file's tensors are as large as its file). The walker's rules never turn on sizes like that,
// so such inputs are skipped.
bool DeclaresHugeShape(const std::string& text, double limit) {
  for (std::size_t open = text.find('('); open != std::string::npos;
       open = text.find('(', open + 1)) {
    const char* at = text.c_str() + open + 1;
    const std::vector<double> sizes = ReadIntegers(at);
    double elements = 1;
    for (double size : sizes) elements *= size;
    if (elements > limit) return true;
    constexpr std::string_view kStrides = "strides=[";
    if (std::string_view(at).substr(0, kStrides.size()) != kStrides) continue;
    at += kStrides.size();
    const std::vector<double> strides = ReadIntegers(at);
    double extent = 1;
    for (std::size_t i = 0; i < strides.size(); ++i) {
      const double size = i < sizes.size() ? sizes[i] : 1;
      extent += (size > 0 ? size - 1 : 0) * strides[i];
    }
    if (extent > limit) return true;
  }
  return false;
}

// Whether parentheses and brackets nest deeper than `limit` anywhere in `text`. torch's IR
// parser descends a few frames a level of a type, so a mutated type nested a few thousand
// levels deep ("((((...Future((((...") overflows the stack inside libtorch (a finding of an
// 8-minute run, another harness artefact: the server never parses IR text, and a frozen
// forward's types nest a few levels). Such inputs are skipped.
bool NestsDeeperThan(const std::string& text, int limit) {
  int depth = 0;
  for (const char c : text) {
    if (c == '(' || c == '[') {
      if (++depth > limit) return true;
    } else if ((c == ')' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (DeclaresHugeShape(text, /*limit=*/1 << 20)) return 0;
  if (NestsDeeperThan(text, /*limit=*/64)) return 0;
  auto graph = std::make_shared<torch::jit::Graph>();
  try {
    torch::jit::parseIR(text, graph.get(), /*parse_tensor_constants=*/true);
  } catch (const std::exception&) {
    return 0;  // not IR: torch's parser, not ltserve's, refused it
  }
  try {
    ltserve::lowering::ChainWalker walker(/*input_rank=*/1,
                                          /*has_batch_dim=*/true);
    auto steps = walker.Walk(*graph);
    if (!steps.ok()) {
      if (steps.status().message().empty()) std::abort();
      return 0;
    }
    auto plan = ltserve::lowering::BuildPlan(*steps, 37);
    if (!plan.ok() && plan.status().message().empty()) std::abort();
  } catch (const std::exception&) {
    // ChainSteps catches what the walker throws (torch's checks on a malformed
    // graph) and answers UNIMPLEMENTED; a throw here is that same refusal.
  }
  return 0;
}
