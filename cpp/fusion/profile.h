// Fusion rule profiles: which rules decide, so that decisions are reproducible and
// comparable. "xla" is legacy XLA:GPU as the paper studied it (2022), "xla+concat" the
// paper's patched XLA, "fusionjit" everything this project does (cost-model decisions
// where XLA's rules are conservative), "none" one kernel per op.
#pragma once

#include <string>
#include <vector>

namespace fj {

struct FusionProfile {
  std::string name = "fusionjit";
  bool enabled = true;
  // Legacy budgets (gpu_fusible.h): operands + outputs per fusion (64 in 2022, 96 later),
  // and how often one op may be emitted inside a fusion (kAllowedCodeDuplication).
  int max_operands_and_outputs = 96;
  int max_emitted = 15;
  // A concatenate (or pad, dynamic-update-slice, reduce, dot) with more users than this is
  // not fused (XLA's CodeDuplicationTooHigh rule: 1; the paper's patch: 3 for concatenate).
  int concat_max_users = 1;
  // Expensive ops (transcendentals, XLA's list) are never duplicated in the XLA profiles;
  // the fusionjit profile asks the cost model instead.
  bool cost_model = false;
  // Elementwise consumers of a reduction join its kernel (reduction epilogue).
  bool reduction_epilogue = false;
  // A reduction over rows joins the kernel that reads it broadcast back along its rows, which
  // then computes it once per row (softmax in one kernel; see IsPerRowReduction).
  bool row_fusion = false;
  bool fusion_merger = true;
  double merger_max_bytes_ratio = 1.10;
  bool multi_output = true;
  bool horizontal = true;
  // Beyond XLA: a counted loop whose steps are elementwise over the same lanes runs as one
  // kernel that keeps each lane's state in registers for all steps (whole-loop fusion),
  // and a loop the user gave no unroll factor gets one from the cost model.
  bool whole_loop = false;
  // Before fusion: forward slices of concatenates to the concatenated operands (the
  // paper's limitation 1: the frontend's concatenate defeats fusion).
  bool frontend_repair = false;
};

// Throws fj::Error(kInvalidArgument) for an unknown name.
FusionProfile GetFusionProfile(const std::string& name);
std::vector<std::string> FusionProfileNames();

}  // namespace fj
