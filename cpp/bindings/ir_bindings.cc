// Bindings for the IR (modules, the builder used by the Python lowering, the text form),
// the compiler and executables. Nothing but translation between Python and C++.
#include "bindings/ir_bindings.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings/array.h"
#include "bindings/host_callback.h"
#include "analysis/buffer_assignment.h"
#include "analysis/cost_model.h"
#include "codegen/gpu/gpu_compiler.h"
#include "compiler/code_cache.h"
#include "compiler/compiler.h"
#include "fusion/profile.h"
#include "ir/builder.h"
#include "ir/dot_printer.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/gpu/gpu_executable.h"
#include "support/error.h"

namespace fj::py_bindings {
namespace {

using namespace pybind11::literals;

DType ParseDTypeOrThrow(const std::string& s) {
  std::optional<DType> t = ParseDType(s);
  if (!t) throw py::value_error("unknown dtype '" + s + "'");
  return *t;
}

Opcode ParseOpcodeOrThrow(const std::string& s) {
  std::optional<Opcode> op = ParseOpcode(s);
  if (!op) throw py::value_error("unknown opcode '" + s + "'");
  return *op;
}

std::vector<int64_t> IntList(py::handle h) {
  std::vector<int64_t> v;
  for (py::handle x : h) v.push_back(py::cast<int64_t>(x));
  return v;
}

py::tuple ShapeTuple(const Shape& s) {
  if (s.IsTuple()) {
    py::list parts;
    for (const Shape& e : s.tuple_shapes()) parts.append(ShapeTuple(e));
    return py::make_tuple("tuple", py::tuple(parts));
  }
  return py::make_tuple(std::string(DTypeName(s.dtype())), py::tuple(py::cast(s.dims())));
}

InstructionAttrs ParseAttrs(const py::dict& attrs) {
  InstructionAttrs a;
  for (auto [k, v] : attrs) {
    std::string key = py::cast<std::string>(k);
    if (key == "dimensions") {
      a.dimensions = IntList(v);
    } else if (key == "slice_starts") {
      a.slice.starts = IntList(v);
    } else if (key == "slice_limits") {
      a.slice.limits = IntList(v);
    } else if (key == "slice_strides") {
      a.slice.strides = IntList(v);
    } else if (key == "direction") {
      auto d = ParseComparisonDirection(py::cast<std::string>(v));
      if (!d) throw py::value_error("unknown comparison direction");
      a.direction = *d;
    } else if (key == "index") {
      a.index = py::cast<int64_t>(v);
    } else if (key == "unroll") {
      a.unroll = py::cast<int64_t>(v);
    } else if (key == "lhs_batch") {
      a.dot.lhs_batch = IntList(v);
    } else if (key == "rhs_batch") {
      a.dot.rhs_batch = IntList(v);
    } else if (key == "lhs_contracting") {
      a.dot.lhs_contracting = IntList(v);
    } else if (key == "rhs_contracting") {
      a.dot.rhs_contracting = IntList(v);
    } else if (key == "offset_dims") {
      a.gather.offset_dims = IntList(v);
    } else if (key == "collapsed_slice_dims") {
      a.gather.collapsed_slice_dims = IntList(v);
    } else if (key == "start_index_map") {
      a.gather.start_index_map = IntList(v);
    } else if (key == "index_vector_dim") {
      a.gather.index_vector_dim = a.scatter.index_vector_dim = py::cast<int64_t>(v);
    } else if (key == "update_window_dims") {
      a.scatter.update_window_dims = IntList(v);
    } else if (key == "inserted_window_dims") {
      a.scatter.inserted_window_dims = IntList(v);
    } else if (key == "scatter_dims_to_operand_dims") {
      a.scatter.scatter_dims_to_operand_dims = IntList(v);
    } else if (key == "indices_are_sorted") {
      a.scatter.indices_are_sorted = py::cast<bool>(v);
    } else if (key == "unique_indices") {
      a.scatter.unique_indices = py::cast<bool>(v);
    } else if (key == "padding") {
      for (py::handle p : v) {
        py::tuple t = py::reinterpret_borrow<py::tuple>(p);
        a.padding.push_back({py::cast<int64_t>(t[0]), py::cast<int64_t>(t[1]), py::cast<int64_t>(t[2])});
      }
    } else if (key == "fusion_kind") {
      auto kind = ParseFusionKind(py::cast<std::string>(v));
      if (!kind) throw py::value_error("unknown fusion kind");
      a.fusion_kind = *kind;
    } else if (key == "custom_call_target") {
      a.custom_call_target = py::cast<std::string>(v);
    } else if (key == "custom_call_config") {
      a.custom_call_config = py::cast<std::string>(v);
    } else {
      throw py::value_error("unknown attribute '" + key + "'");
    }
  }
  return a;
}

// Handles keep the module alive, so Python may hold them as long as it likes.
struct InstrHandle {
  std::shared_ptr<Module> module;
  Instruction* instr;
};

struct ComputationHandle {
  std::shared_ptr<Module> module;
  Computation* comp;
};

struct ModuleBuilder {
  std::shared_ptr<Module> module;
  ComputationHandle entry;
  explicit ModuleBuilder(const std::string& name) : module(std::make_shared<Module>(name)) {
    Computation* c = module->AddComputation("main");
    module->set_entry(c);
    entry = {module, c};
  }
};

struct ModuleHandle {
  std::shared_ptr<Module> module;
};

py::dict KernelDict(const KernelInfo& k) {
  return py::dict("name"_a = k.name, "fusion"_a = k.fusion, "kind"_a = k.kind, "units"_a = k.units,
                  "width"_a = k.width, "parallel"_a = k.parallel, "grain"_a = k.grain, "bytes_read"_a = k.bytes_read,
                  "bytes_written"_a = k.bytes_written, "loop"_a = k.loop,
                  "threads_per_unit"_a = k.threads_per_unit);
}

// The kernels of a kernelized module as plain data, for explain: each kernel's ops, and
// for each input the value it comes from (another kernel's op, a parameter, a constant)
// and the ops inside the kernel that read it.
py::list KernelGraph(const Module& module, const Target& target) {
  // The loop (while instruction) each control-flow computation runs in.
  std::unordered_map<const Computation*, const Instruction*> loop_of;
  for (const Computation* c : module.ControlFlowComputations()) {
    for (const Instruction* i : c->MakePostOrder()) {
      if (i->opcode() != Opcode::kWhile && i->opcode() != Opcode::kConditional) continue;
      for (const Computation* callee : i->called_computations()) {
        loop_of[callee] = i->opcode() == Opcode::kWhile ? i : (loop_of.count(c) ? loop_of.at(c) : nullptr);
      }
    }
  }
  CostModel model(target);
  auto source_of = [](const Instruction* v) -> std::pair<const Instruction*, int64_t> {
    int64_t index = -1;
    while (true) {
      if (v->opcode() == Opcode::kReshape) {
        v = v->operand(0);
      } else if (v->opcode() == Opcode::kGetTupleElement) {
        index = v->tuple_index();
        v = v->operand(0);
      } else {
        return {v, index};
      }
    }
  };
  auto value_op_name = [](const Instruction* k, int64_t index) -> std::string {
    if (k->opcode() != Opcode::kFusion) return k->name();
    const Instruction* root = k->fused_computation()->root();
    if (root->opcode() == Opcode::kTuple) {
      const Instruction* r = root->operand(index < 0 ? 0 : static_cast<int>(index));
      return r->name();
    }
    return root->name();
  };
  py::list out;
  for (const Computation* computation : module.ControlFlowComputations()) {
  const Instruction* loop = loop_of.count(computation) ? loop_of.at(computation) : nullptr;
  std::string loop_name = loop ? loop->name() : "";
  for (const Instruction* k : computation->MakePostOrder()) {
    if (k->opcode() == Opcode::kCustomCall) {
      // An opaque kernel: one op, its operands read from memory.
      py::list ops, inputs, outputs;
      std::string what = HasSideEffects(k) ? "host callback (fusionjit.debug.print or debug.callback)"
                                           : "custom-call " + k->attrs().custom_call_target;
      ops.append(py::dict("name"_a = k->name(), "opcode"_a = what,
                          "shape"_a = k->shape().ToString(), "source"_a = k->metadata()));
      for (int n = 0; n < k->operand_count(); ++n) {
        auto [src, index] = source_of(k->operand(n));
        std::string kind = src->opcode() == Opcode::kFusion || src->opcode() == Opcode::kCustomCall ? "kernel"
                           : src->opcode() == Opcode::kParameter ? "parameter"
                           : src->opcode() == Opcode::kConstant ? "constant" : "other";
        py::list readers;
        readers.append(k->name());
        inputs.append(py::dict("kind"_a = kind, "from"_a = src->name(), "from_op"_a = value_op_name(src, index),
                               "readers"_a = readers, "bytes"_a = k->operand(n)->shape().ByteSize()));
      }
      outputs.append(k->name());
      KernelCost cost = EstimateKernel(k);
      out.append(py::dict("name"_a = k->name(), "kind"_a = HasSideEffects(k) ? "host callback" : "custom-call", "ops"_a = ops, "inputs"_a = inputs,
                          "outputs"_a = outputs, "bytes_written"_a = k->shape().ByteSize(), "loop"_a = loop_name,
                          "estimated_us"_a = model.TimeUs(cost), "flops"_a = cost.flops, "bytes"_a = cost.bytes()));
      continue;
    }
    if (k->opcode() != Opcode::kFusion) continue;
    const Computation* fused = k->fused_computation();
    py::list ops;
    for (const Instruction* i : fused->MakePostOrder()) {
      if (i->opcode() == Opcode::kParameter || i->opcode() == Opcode::kTuple) continue;
      if (i->opcode() == Opcode::kConstant && i->shape().NumElements() == 1) continue;
      ops.append(py::dict("name"_a = i->name(), "opcode"_a = std::string(OpcodeName(i->opcode())),
                          "shape"_a = i->shape().ToString(), "source"_a = i->metadata()));
    }
    py::list inputs;
    for (int n = 0; n < k->operand_count(); ++n) {
      auto [src, index] = source_of(k->operand(n));
      py::list readers;
      for (const Instruction* u : fused->parameter(n)->users()) readers.append(u->name());
      std::string kind = src->opcode() == Opcode::kFusion || src->opcode() == Opcode::kCustomCall ? "kernel"
                         : src->opcode() == Opcode::kParameter ? "parameter"
                         : src->opcode() == Opcode::kConstant ? "constant" : "other";
      inputs.append(py::dict("kind"_a = kind, "from"_a = src->name(), "from_op"_a = value_op_name(src, index),
                             "readers"_a = readers, "bytes"_a = k->operand(n)->shape().ByteSize()));
    }
    py::list outputs;
    const Instruction* root = fused->root();
    if (root->opcode() == Opcode::kTuple) {
      for (const Instruction* r : root->operands()) outputs.append(r->name());
    } else {
      outputs.append(root->name());
    }
    KernelCost cost = EstimateKernel(k);
    // (explain's plan has no buffer assignment: an update that may go in place is shown so.)
    KernelTraffic traffic = KernelBytes(k, InPlaceUpdateOperand(k) >= 0);
    out.append(py::dict("name"_a = k->name(), "kind"_a = std::string(FusionKindName(k->fusion_kind())),
                        "ops"_a = ops, "inputs"_a = inputs, "outputs"_a = outputs, "bytes_read"_a = traffic.bytes_read,
                        "bytes_written"_a = traffic.bytes_written, "loop"_a = loop_name,
                        "estimated_us"_a = model.TimeUs(cost), "flops"_a = cost.flops, "bytes"_a = cost.bytes()));
  }
  }
  return out;
}

// Runs an executable on Arrays or NumPy arrays of exactly the parameter shapes; `donate`:
// outputs may take over the buffers of donated parameters' Arrays (which are then deleted).
py::list RunExecutable(const Executable& exe, const py::sequence& args, py::object out_weak, bool donate) {
  const std::vector<Shape>& params = exe.parameter_shapes();
  if (args.size() != params.size()) {
    throw py::value_error("executable takes " + std::to_string(params.size()) + " arguments, got " +
                          std::to_string(args.size()));
  }
  std::vector<Argument> ptrs;
  std::vector<py::object> keep;
  // The run's holds on the Arrays' buffers (NumPy's conversions below may run Python code,
  // and another thread delete or donate an array meanwhile).
  std::vector<std::shared_ptr<Buffer>> held;
  for (size_t i = 0; i < params.size(); ++i) {
    py::handle arg = args[i];
    const Shape& want = params[i];
    if (py::isinstance<PyArray>(arg)) {
      const PyArray& a = arg.cast<const PyArray&>();
      if (a.dtype != want.dtype() || a.shape != want.dims()) {
        throw py::value_error("argument " + std::to_string(i) + " does not match parameter " +
                              want.ToString());
      }
      held.push_back(LiveBuffer(a));
      ptrs.push_back(Argument{nullptr, held.back().get(), nullptr});
      keep.push_back(py::reinterpret_borrow<py::object>(arg));
      continue;
    }
    py::array x = py::array::ensure(arg, py::array::c_style);
    if (!x) throw py::type_error("argument " + std::to_string(i) + " is not an array");
    std::optional<DType> t = DTypeFromNumpy(x.dtype());
    std::vector<int64_t> dims(x.shape(), x.shape() + x.ndim());
    if (!t || *t != want.dtype() || dims != want.dims()) {
      throw py::value_error("argument " + std::to_string(i) + " does not match parameter " +
                            want.ToString());
    }
    keep.push_back(x);
    held.push_back(nullptr);
    ptrs.push_back(Argument{x.data(), nullptr, nullptr});
  }
  if (donate) TakeDonations(exe, keep, ptrs, held);
  std::vector<std::shared_ptr<Buffer>> outs;
  {
    py::gil_scoped_release release;
    outs = exe.Run(ptrs);
  }
  py::list result;
  const std::vector<Shape>& out_shapes = exe.output_shapes();
  for (size_t i = 0; i < outs.size(); ++i) {
    PyArray a;
    a.buffer = outs[i];
    a.dtype = out_shapes[i].dtype();
    a.shape = out_shapes[i].dims();
    a.weak_type = !out_weak.is_none() && py::cast<bool>(py::sequence(out_weak)[i]);
    result.append(WrapArray(std::move(a)));
  }
  return result;
}

}  // namespace

void DefineIr(py::module_& m) {
  py::class_<InstrHandle>(m, "Instr")
      .def_property_readonly("name", [](const InstrHandle& h) { return h.instr->name(); })
      .def_property_readonly("shape", [](const InstrHandle& h) { return ShapeTuple(h.instr->shape()); })
      .def("__repr__", [](const InstrHandle& h) { return h.instr->ToString(); });

  py::class_<ComputationHandle>(m, "ComputationBuilder")
      .def_property_readonly("name", [](const ComputationHandle& h) { return h.comp->name(); })
      .def("parameter",
           [](ComputationHandle& h, int64_t number, const std::string& dtype, std::vector<int64_t> dims,
              const std::string& name) {
             Builder b(h.comp);
             return InstrHandle{h.module, b.Parameter(number, Shape(ParseDTypeOrThrow(dtype), dims), name)};
           },
           "number"_a, "dtype"_a, "dims"_a, "name"_a = "")
      .def("tuple_parameter",
           [](ComputationHandle& h, int64_t number, const std::vector<std::pair<std::string, std::vector<int64_t>>>& elements,
              const std::string& name) {
             std::vector<Shape> shapes;
             for (const auto& [dtype, dims] : elements) shapes.emplace_back(ParseDTypeOrThrow(dtype), dims);
             return InstrHandle{h.module, Builder(h.comp).Parameter(number, Shape::Tuple(shapes), name)};
           },
           "number"_a, "elements"_a, "name"_a = "")
      .def("constant",
           [](ComputationHandle& h, py::array value, const std::string& name) {
             py::array c = py::array::ensure(value, py::array::c_style);
             std::optional<DType> t = DTypeFromNumpy(c.dtype());
             if (!t) throw py::type_error("unsupported constant dtype " + py::str(c.dtype()).cast<std::string>());
             std::vector<int64_t> dims(c.shape(), c.shape() + c.ndim());
             Literal lit(Shape(*t, dims));
             if (lit.byte_size() > 0) std::memcpy(lit.data(), c.data(), lit.byte_size());
             return InstrHandle{h.module, Builder(h.comp).Constant(std::move(lit), name)};
           },
           "value"_a, "name"_a = "")
      .def("add",
           [](ComputationHandle& h, const std::string& opcode, const std::vector<InstrHandle>& operands,
              py::object dtype, py::object dims, py::dict attrs, std::vector<ComputationHandle> called,
              const std::string& source, const std::string& name) {
             std::vector<Instruction*> ops;
             for (const InstrHandle& o : operands) ops.push_back(o.instr);
             std::vector<Computation*> calls;
             for (const ComputationHandle& c : called) calls.push_back(c.comp);
             std::optional<Shape> requested;
             if (!dtype.is_none()) {
               requested = Shape(ParseDTypeOrThrow(py::cast<std::string>(dtype)),
                                 dims.is_none() ? std::vector<int64_t>{} : IntList(dims));
             }
             Instruction* instr = Builder(h.comp).Add(ParseOpcodeOrThrow(opcode), ops, ParseAttrs(attrs),
                                                      calls, requested ? &*requested : nullptr, name);
             instr->set_metadata(source);
             return InstrHandle{h.module, instr};
           },
           "opcode"_a, "operands"_a, "dtype"_a = py::none(), "dims"_a = py::none(), "attrs"_a = py::dict(),
           "called"_a = std::vector<ComputationHandle>{}, "source"_a = "", "name"_a = "")
      .def("set_root", [](ComputationHandle& h, const InstrHandle& root) { h.comp->set_root(root.instr); })
      .def("custom_call",
           [](ComputationHandle& h, const std::string& target, const std::vector<InstrHandle>& operands,
              const std::vector<std::pair<std::string, std::vector<int64_t>>>& results, const std::string& source) {
             std::vector<Instruction*> ops;
             for (const InstrHandle& o : operands) ops.push_back(o.instr);
             std::vector<Shape> shapes;
             for (const auto& [dtype, dims] : results) shapes.emplace_back(ParseDTypeOrThrow(dtype), dims);
             Shape shape = shapes.size() == 1 ? shapes[0] : Shape::Tuple(shapes);
             InstructionAttrs a;
             a.custom_call_target = target;
             Builder b(h.comp);
             Instruction* call = b.Add(Opcode::kCustomCall, ops, a, {}, &shape);
             call->set_metadata(source);
             py::list outs;
             if (shapes.size() == 1) {
               outs.append(InstrHandle{h.module, call});
             } else {
               for (size_t i = 0; i < shapes.size(); ++i) {
                 Instruction* g = b.GetTupleElement(call, static_cast<int64_t>(i));
                 g->set_metadata(source);
                 outs.append(InstrHandle{h.module, g});
               }
             }
             return outs;
           },
           "target"_a, "operands"_a, "results"_a, "source"_a = "");

  py::class_<ModuleBuilder>(m, "ModuleBuilder")
      .def(py::init<const std::string&>(), "name"_a)
      .def_readonly("entry", &ModuleBuilder::entry)
      .def("add_computation",
           [](ModuleBuilder& b, const std::string& name) { return ComputationHandle{b.module, b.module->AddComputation(name)}; })
      .def("scalar_combiner",
           [](ModuleBuilder& b, const std::string& opcode, const std::string& dtype) {
             return ComputationHandle{b.module, MakeScalarCombiner(*b.module, ParseOpcodeOrThrow(opcode), ParseDTypeOrThrow(dtype))};
           })
      // Registers `fn` as a host callback the module calls (RegisterPythonCallback) and
      // holds it for as long as the module, its copies or its executables live; returns its id.
      .def("host_callback",
           [](ModuleBuilder& b, py::object fn, const Specs& operands, const Specs& results) {
             int64_t id = -1;
             b.module->Hold(RegisterPythonCallback(std::move(fn), operands, results, &id));
             return id;
           }, "fn"_a, "operands"_a, "results"_a)
      .def("build", [](ModuleBuilder& b) {
        VerifyModule(*b.module);
        return ModuleHandle{b.module->Clone()};
      });

  py::class_<Executable, std::shared_ptr<Executable>>(m, "Executable")
      .def("__call__", &RunExecutable, "args"_a, "out_weak"_a = py::none(), "donate"_a = false)
      .def_property_readonly("output_aliases", [](const Executable& e) {
        // Per output: (the donated parameter whose buffer it may take, updated in place),
        // or None.
        py::list out;
        for (size_t k = 0; k < e.output_shapes().size(); ++k) {
          const OutputAlias* a = k < e.output_aliases().size() ? &e.output_aliases()[k] : nullptr;
          out.append(a && a->parameter >= 0 ? py::object(py::make_tuple(a->parameter, a->updated)) : py::none());
        }
        return out;
      })
      .def_property_readonly("num_kernels", [](const Executable& e) { return e.kernels().size(); })
      .def_property_readonly("kernels", [](const Executable& e) {
        py::list out;
        for (const KernelInfo& k : e.kernels()) out.append(KernelDict(k));
        return out;
      })
      .def_property_readonly("input_shapes", [](const Executable& e) {
        py::list out;
        for (const Shape& s : e.parameter_shapes()) out.append(ShapeTuple(s));
        return out;
      })
      .def_property_readonly("output_shapes", [](const Executable& e) {
        py::list out;
        for (const Shape& s : e.output_shapes()) out.append(ShapeTuple(s));
        return out;
      })
      .def_property_readonly("temp_bytes", &Executable::temp_bytes)
      .def_property_readonly("loops", [](const Executable& e) {
        py::list out;
        for (const LoopInfo& l : e.loops()) out.append(py::dict("name"_a = l.name, "parent"_a = l.parent));
        return out;
      })
      .def("last_loop_iterations", &Executable::last_loop_iterations)
      // Compiled with profile=True: [(nanoseconds, launches)] per kernel since the last reset.
      .def("profile",
           [](const Executable& e) {
             py::list out;
             for (const Executable::KernelTime& t : e.Profile()) out.append(py::make_tuple(t.nanoseconds, t.launches));
             return out;
           })
      .def("reset_profile", &Executable::ResetProfile)
      .def_property_readonly("backend", [](const Executable& e) { return std::string(BackendName(e.backend())); })
      .def_property_readonly("device", [](const Executable& e) {
        std::shared_ptr<Device> d = e.device();
        return d ? d->Describe() : std::string("cpu");
      });

  py::class_<Compilation>(m, "Compilation")
      .def_property_readonly("executable", [](const Compilation& c) { return c.executable; })
      .def_property_readonly("optimized_text", [](const Compilation& c) { return c.optimized->ToString(); })
      .def_property_readonly("optimized_dot", [](const Compilation& c) { return ModuleToDot(*c.optimized); })
      .def_readonly("llvm_ir", &Compilation::llvm_ir)
      .def_readonly("assembly", &Compilation::assembly)
      .def_readonly("ptx", &Compilation::ptx)
      .def_readonly("buffer_assignment", &Compilation::buffer_assignment)
      .def_readonly("seconds_passes", &Compilation::seconds_passes)
      .def_readonly("seconds_codegen", &Compilation::seconds_codegen)
      .def_readonly("code_cache_hit", &Compilation::code_cache_hit)
      .def_property_readonly("kernel_graph", [](const Compilation& c) { return KernelGraph(*c.optimized, c.target); })
      .def_property_readonly("before_fusion_text", [](const Compilation& c) { return c.before_fusion->ToString(); })
      .def_property_readonly("before_fusion_dot", [](const Compilation& c) { return ModuleToDot(*c.before_fusion); })
      .def_property_readonly("fusion_log", [](const Compilation& c) {
        py::list out;
        for (const FusionLogEntry& e : c.fusion_log.entries()) {
          out.append(py::dict("pass"_a = e.pass, "producer"_a = e.producer, "producer_opcode"_a = e.producer_opcode,
                              "consumer"_a = e.consumer, "consumer_opcode"_a = e.consumer_opcode,
                              "consumer_kernel_ops"_a = e.consumer_kernel_ops,
                              "source"_a = e.producer_source, "fuse"_a = e.decision.fuse, "rule"_a = e.decision.rule,
                              "reason"_a = e.decision.reason, "figures"_a = e.decision.Figures(),
                              "bytes_unfused"_a = e.decision.bytes_unfused, "bytes_fused"_a = e.decision.bytes_fused,
                              "cost_unfused_us"_a = e.decision.cost_unfused_us,
                              "cost_fused_us"_a = e.decision.cost_fused_us, "emitted"_a = e.decision.emitted));
        }
        return out;
      })
      .def_property_readonly("passes", [](const Compilation& c) {
        py::list out;
        for (const PassRecord& r : c.passes) out.append(py::make_tuple(r.name, r.changed, r.seconds));
        return out;
      });

  py::class_<ModuleHandle>(m, "Module")
      .def_property_readonly("name", [](const ModuleHandle& h) { return h.module->name(); })
      .def("to_text", [](const ModuleHandle& h) { return h.module->ToString(); })
      .def("__str__", [](const ModuleHandle& h) { return h.module->ToString(); })
      .def("to_dot", [](const ModuleHandle& h) { return ModuleToDot(*h.module); })
      .def("verify", [](const ModuleHandle& h) { VerifyModule(*h.module); })
      .def("clone", [](const ModuleHandle& h) { return ModuleHandle{h.module->Clone()}; })
      .def_property(
          "donated_parameters", [](const ModuleHandle& h) { return h.module->donated_parameters(); },
          [](ModuleHandle& h, std::vector<int64_t> params) {
            int64_t n = static_cast<int64_t>(h.module->entry()->parameters().size());
            for (int64_t p : params) {
              if (p < 0 || p >= n) throw py::value_error("no parameter " + std::to_string(p) + " to donate");
            }
            h.module->set_donated_parameters(std::move(params));
          })
      .def("optimized",
           [](const ModuleHandle& h, bool simplify) {
             std::shared_ptr<Module> copy = h.module->Clone();
             CompileOptions o;
             o.simplify = simplify;
             RunOptimizationPasses(*copy, o);
             return ModuleHandle{copy};
           },
           "simplify"_a = true)
      .def("compile",
           [](const ModuleHandle& h, int opt_level, int vector_width, bool simplify, bool keep_llvm_ir,
              const std::string& fusion, const std::string& backend, const std::string& gpu_arch,
              int ptx_version, bool keep_ptx, bool profile) {
             CompileOptions o;
             o.profile = profile;
             o.fusion_profile = fusion;
             o.backend = ParseBackend(backend);
             o.gpu_arch = gpu_arch;
             o.ptx_version = ptx_version;
             o.keep_ptx = keep_ptx;
             o.opt_level = opt_level;
             o.vector_width = vector_width;
             o.simplify = simplify;
             o.keep_llvm_ir = keep_llvm_ir;
             std::unique_ptr<Compilation> c;
             {
               py::gil_scoped_release release;
               c = Compile(*h.module, o);
             }
             return c;
           },
           "opt_level"_a = 2, "vector_width"_a = 0, "simplify"_a = true, "keep_llvm_ir"_a = false,
           "fusion"_a = "fusionjit", "backend"_a = "cpu", "gpu_arch"_a = "", "ptx_version"_a = 0,
           "keep_ptx"_a = false, "profile"_a = false);
  m.def("fusion_profiles", &FusionProfileNames);
  // The process's cache of generated code (compiler/code_cache.h).
  m.def("code_cache_size", [] { return CodeCache::Get().size(); });
  m.def("clear_code_cache", [] { CodeCache::Get().Clear(); });
  // The GPU: why it cannot be used ("" when it can), and its description.
  m.def("gpu_unavailable_reason", [] { return GpuUnavailableReason(); });
  m.def("gpu_description", [] { return GetGpuDevice(Backend::kGpu)->Describe(); });
  m.def("gpu_emulated_description", [] { return GetGpuDevice(Backend::kGpuEmulated)->Describe(); });
  m.def("libdevice_path", [] { return gpu::FindLibdevicePath(); });

  m.def("parse_module", [](const std::string& text) { return ModuleHandle{ParseModule(text)}; }, "text"_a);
}

}  // namespace fj::py_bindings
