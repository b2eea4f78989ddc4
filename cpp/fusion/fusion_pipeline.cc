// The fusion pipeline (see fusion_pipeline.h).
#include "fusion/fusion_pipeline.h"

#include <cstdlib>
#include <cstdio>

#include "analysis/cost_model.h"
#include "fusion/fusion_merger.h"
#include "fusion/instruction_fusion.h"
#include "fusion/kernel_wrapper.h"
#include "fusion/multi_output_fusion.h"
#include "fusion/whole_loop_fusion.h"
#include "passes/constant_folding.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/dot_layout.h"
#include "passes/reduction_layout.h"
#include "passes/simplify.h"
#include "passes/tree_reduction.h"
#include "passes/while_loop.h"

namespace fj {

void AddFusionPasses(Pipeline& pipeline, const FusionProfile& profile, FusionLog* log, const Target& target) {
  // Loops whole-loop fusion takes run as one kernel whatever unroll factor the user gave;
  // the others are unrolled by the user's factor or (fusionjit profile) the cost model's.
  if (profile.whole_loop) pipeline.AddPass<WholeLoopFusionPass>(profile, log, target);
  WhileLoopUnrollPass::Note note = nullptr;
  if (log) {
    note = [log](const Instruction* loop, int64_t factor, const std::string& why) {
      std::string what = factor > 1 ? "unrolled by " + std::to_string(factor) : "not unrolled";
      log->Record("while-unroll", loop, loop,
                  factor > 1 ? FusionDecision::Yes("unroll", what + ": " + why)
                             : FusionDecision::No("unroll", what + ": " + why));
    };
  }
  pipeline.AddPass<WhileLoopUnrollPass>(/*choose=*/profile.whole_loop, note);
  pipeline.AddPass<WhileTripCountPass>();
  // Unrolled copies index with constants once the counter folds; slices of what they
  // update then simplify, which folds more: to a fixed point, as before the plans.
  Pipeline& tidy = pipeline.AddPass<Pipeline>("after-unroll");
  tidy.set_fixed_point(8);
  tidy.AddPass<SimplifyPass>();
  tidy.AddPass<ConstantFoldingPass>();
  tidy.AddPass<CsePass>();
  tidy.AddPass<DcePass>();
  // Dots in the layout the tiled product reads; matrix-vector products as row reductions
  // (split by the next pass where long) and outer products as elementwise products.
  pipeline.AddPass<DotLayoutPass>(target.is_gpu() ? 1 : target.vector_lanes);
  // The reshapes that put a dot back in its shape meet the program's own (a matrix-vector
  // product of vmap, a 1-D matmul): folded, so that nothing stands between the dot and
  // the elementwise work an output fusion takes into the dot's kernel.
  pipeline.AddPass<SimplifyPass>();
  pipeline.AddPass<DcePass>();
  // Reductions in the shape the target's kernels walk fast, then the target's work split
  // for reductions with few outputs (block counts depend only on
  // shapes); not inside whole-loop kernels, which reduce per block of lanes themselves.
  pipeline.AddPass<ReductionLayoutPass>(target.vector_lanes);
  pipeline.AddPass<TreeReductionPass>(target.tree);
  if (profile.enabled) {
    // Repeated until nothing changes, as XLA's HloPassFix around its fusion passes.
    Pipeline& fix = pipeline.AddPass<Pipeline>("fusion-fixed-point");
    fix.set_fixed_point(8);
    fix.AddPass<InstructionFusionPass>(profile, log, /*may_duplicate=*/false, target);
    fix.AddPass<InstructionFusionPass>(profile, log, /*may_duplicate=*/true, target);
    fix.AddPass<FusionMergerPass>(profile, log, target);
    fix.AddPass<MultiOutputFusionPass>(profile, log);
    // Merged kernels hold copies of the ops each part computed: CSE keeps one of each.
    fix.AddPass<CsePass>();
    fix.AddPass<DcePass>();
    pipeline.AddPass<HorizontalFusionPass>(profile, log);
    pipeline.AddPass<DcePass>();
  }
  pipeline.AddPass<KernelWrapperPass>();
}

namespace {

FusionPlan BuildPlan(const Module& module, const FusionProfile& profile, const Target& target) {
  FusionPlan plan;
  plan.before = module.Clone();
  plan.module = module.Clone();
  plan.rules = profile.name;
  Pipeline kernels("fusion");
  AddFusionPasses(kernels, profile, &plan.log, target);
  kernels.Run(*plan.module);
  plan.records = kernels.records();
  ProgramCost cost = EstimateProgram(*plan.module, CostModel(target));
  plan.estimated_us = cost.us;
  plan.kernels = cost.kernels;
  return plan;
}

}  // namespace

FusionPlan FormKernels(const Module& module, const FusionProfile& profile, const Target& target,
                       const Module* baseline) {
  FusionPlan best = BuildPlan(module, profile, target);
  // FJ_OWN_PLAN (README, Debugging): keep this plan, to measure what the estimates refused.
  if (!profile.cost_model || std::getenv("FJ_OWN_PLAN")) return best;
  std::string figures;
  auto describe = [&](const FusionPlan& p) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s%s rules: %d kernel%s, %.3g us", figures.empty() ? "" : "; ",
                  p.rules.c_str(), p.kernels, p.kernels == 1 ? "" : "s", p.estimated_us);
    figures += buf;
  };
  describe(best);
  std::string own = best.rules;
  std::string why;
  double xla_us = -1;  // the best estimate of XLA's rules
  for (const char* rules : {"xla+concat", "xla"}) {
    FusionPlan other = BuildPlan(baseline ? *baseline : module, GetFusionProfile(rules), target);
    describe(other);
    if (xla_us < 0 || other.estimated_us < xla_us) xla_us = other.estimated_us;
    // Estimates within 0.1% are a tie: then fewer kernels win.
    double tolerance = 1e-3 * best.estimated_us;
    bool faster = other.estimated_us < best.estimated_us - tolerance;
    bool tie = !faster && other.estimated_us <= best.estimated_us + tolerance;
    if (faster || (tie && other.kernels < best.kernels)) {
      why = faster ? "is estimated faster than" : "is estimated as fast, with fewer kernels, as";
      best = std::move(other);
    }
  }
  FusionDecision d;
  d.fuse = true;
  d.rule = "plan-selection";
  d.reason = best.rules == own
                 ? "kept the cost model's plan (" + figures + ")"
                 : "the plan the " + best.rules + " rules build " + why + " the cost model's own (" + figures + ")";
  // Figures: XLA's rules' best plan -> the plan kept.
  d.cost_unfused_us = xla_us;
  d.cost_fused_us = best.estimated_us;
  best.log.Note("plan-selection", d);
  return best;
}

}  // namespace fj
