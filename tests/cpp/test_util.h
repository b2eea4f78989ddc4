// Helpers for the C++ tests: parse IR text, run a pass, compare text.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "ir/module.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace fj::testing {

// The float32 combiners reductions in test modules name: %add_f32 and %max_f32.
inline constexpr const char* kF32Combiners = R"(
%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%max_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] maximum(%a, %b)
}
)";

inline std::unique_ptr<Module> Parse(const std::string& text) {
  std::unique_ptr<Module> m = ParseModule(text);
  VerifyModule(*m);
  return m;
}

// Parses `text`, runs `pass`, verifies, and returns the printed result.
template <typename PassT>
std::string RunPass(const std::string& text, bool* changed = nullptr) {
  std::unique_ptr<Module> m = Parse(text);
  PassT pass;
  bool c = pass.Run(*m);
  if (changed) *changed = c;
  VerifyModule(*m);
  return m->ToString();
}

inline std::string ReadGolden(const std::string& name) {
  std::ifstream in(std::string(FJ_TEST_DATA_DIR) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Trims each line's trailing spaces and the text's leading newline, so raw string
// literals in tests can be indented naturally.
inline std::string Normalize(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (first && line.empty()) continue;
    first = false;
    out += line + "\n";
  }
  while (out.size() > 1 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') out.pop_back();
  return out;
}

}  // namespace fj::testing
