// Kernel emission: one LLVM function per fusion. The plan says how the output index space
// is walked; the elemental emitter computes each group of lanes.
//
// Emitted signature: void @name(ptr %buffers, i64 %begin, i64 %end), where buffers holds
// the output buffers (one per tuple element of a multi-output fusion) followed by one per
// fusion operand, and [begin, end) is a range of iteration units (elements or rows).
#pragma once

#include <string>
#include <vector>

#include "codegen/llvm_util.h"
#include "ir/instruction.h"

namespace fj::codegen {

struct KernelPlan {
  enum class Mode {
    kFlat,  // every access follows the output's row-major order: units are elements
    kRows,  // units are rows of the output's last dimension (or one output element)
    kLinear1D,  // a rank-1 output walked by element, through the per-dimension index
    kHorizontal,  // several outputs of different shapes, one segment of units each
    kUpdate,      // an in-place dynamic-update-slice: units are rows of the update
    kWholeLoop,   // a whole loop as one kernel (whole_loop_emitter.h): units are lanes
  };
  Mode mode = Mode::kRows;
  int64_t units = 0;       // iteration units in total
  int64_t row_length = 1;  // kRows: elements per unit
  int width = 1;           // lanes per vector step of the innermost loop
  int reduction_width = 1; // lanes of a row reduction's inner loop
  int num_outputs = 1;
  // kHorizontal: where each output's units start (one unit per element), and whether
  // its elements can be walked by their linear index alone.
  std::vector<int64_t> segment_starts;
  std::vector<bool> segment_flat;
  // A reduction with side outputs: roots over the operand space of reduction `side_hero`
  // (side_output[k]) are stored by its loop, once per element it combines; the units are
  // the reduction's outputs.
  const Instruction* side_hero = nullptr;
  std::vector<bool> side_output;
};

// Chooses the plan for `fusion` with at most `max_width` lanes (1 for the GPU).
// `in_place`: its output buffer is its updated operand's (a dynamic-update-slice writes
// only the update).
KernelPlan PlanKernel(const Instruction* fusion, int max_width, bool in_place = false);

// Emits the kernel into `module` under `name` and returns it. `may_alias`: an output may
// share its buffer with an operand (no noalias promises; every output of a group of lanes
// is computed before any is stored).
llvm::Function* EmitKernel(llvm::Module& module, const Instruction* fusion, const KernelPlan& plan,
                           const std::string& name, bool may_alias = false);

// Loads the elements of a buffer of `t` at `linear` (`width` lanes): a scalar load for a
// uniform index, a vector load for consecutive lanes, else a gather; pred is stored as i8.
Val LoadElements(Builder& b, llvm::Value* base, DType t, const IndexDim& linear, int width);
// Stores `v` at `linear`, whose lanes are consecutive.
void StoreElements(Builder& b, llvm::Value* base, DType t, const IndexDim& linear, const Val& v, int width);
// A value of `t` as it is stored (pred widened to i8).
llvm::Value* StoreValue(Builder& b, DType t, llvm::Value* v);

// A private global holding a constant's bytes, 64-byte aligned (created once per module).
llvm::GlobalVariable* ConstantGlobal(llvm::Module& module, const Instruction* constant);

}  // namespace fj::codegen
