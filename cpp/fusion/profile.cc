// Fusion rule profiles (see profile.h).
#include "fusion/profile.h"

#include "support/error.h"

namespace fj {

FusionProfile GetFusionProfile(const std::string& name) {
  FusionProfile p;
  p.name = name;
  if (name == "xla") {
    p.max_operands_and_outputs = 64;
    p.concat_max_users = 1;
    return p;
  }
  if (name == "xla+concat") {
    p.max_operands_and_outputs = 64;
    p.concat_max_users = 3;
    return p;
  }
  if (name == "fusionjit") {
    p.max_operands_and_outputs = 96;
    p.concat_max_users = 1;  // the cost model may override it
    p.cost_model = true;
    p.reduction_epilogue = true;
    p.row_fusion = true;
    p.frontend_repair = true;
    p.whole_loop = true;
    return p;
  }
  if (name == "none") {
    p.enabled = false;
    p.fusion_merger = p.multi_output = p.horizontal = false;
    return p;
  }
  std::string known;
  for (const std::string& n : FusionProfileNames()) known += (known.empty() ? "" : ", ") + n;
  ThrowInvalidArgument("unknown fusion profile '", name, "'; known profiles: ", known);
}

std::vector<std::string> FusionProfileNames() { return {"fusionjit", "xla", "xla+concat", "none"}; }

}  // namespace fj
