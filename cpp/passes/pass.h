// The pass interface and the pipeline, as in XLA: a pass is a small class with a name and a
// Run that reports whether it changed the module; a pipeline is a readable list of passes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"

namespace fj {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Returns true if the module changed.
  virtual bool Run(Module& module) = 0;
};

// What the pipeline saw: one entry per pass run, for FJ_DEBUG and `lower().as_text`.
struct PassRecord {
  std::string name;
  bool changed = false;
  double seconds = 0;
};

class Pipeline : public Pass {
 public:
  explicit Pipeline(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }

  template <typename T, typename... Args>
  T& AddPass(Args&&... args) {
    passes_.push_back(std::make_unique<T>(std::forward<Args>(args)...));
    return static_cast<T&>(*passes_.back());
  }
  // Runs the passes in order (repeatedly until none changes anything, at most
  // `max_iterations` times, if set_fixed_point was called). With FJ_CHECKS=1 the verifier
  // runs after every pass; with FJ_DUMP_DIR each pass's output is written there.
  bool Run(Module& module) override;
  void set_fixed_point(int max_iterations) { max_iterations_ = max_iterations; }
  const std::vector<PassRecord>& records() const { return records_; }

 private:
  std::string name_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassRecord> records_;
  int max_iterations_ = 1;
};

// Writes `text` to FJ_DUMP_DIR/<NN>-<module>-<stage>.<ext> if FJ_DUMP_DIR is set.
void DumpStage(const Module& module, std::string_view stage, std::string_view ext,
               const std::string& text);

}  // namespace fj
