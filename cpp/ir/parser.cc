// Parser for the IR text form (see printer.cc for the grammar by example).
#include "ir/parser.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "support/error.h"

namespace fj {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::unique_ptr<Module> Run() {
    SkipSpace();
    ExpectWord("module");
    module_ = std::make_unique<Module>(ParseName());
    if (TryConsume(',')) {
      ExpectWord("donated");
      Expect('=');
      module_->set_donated_parameters(ParseIntList());
    }
    SkipSpace();
    while (!AtEnd()) {
      ParseComputation();
      SkipSpace();
    }
    ResolveComputationReferences();
    if (!module_->entry()) Fail("module has no ENTRY computation");
    return std::move(module_);
  }

 private:
  struct PendingCall {
    Instruction* instr;
    std::vector<std::string> names;
    size_t pos;
  };

  // --- lexing ----------------------------------------------------------------------------
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd()) {
      char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (!AtEnd() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  [[noreturn]] void Fail(const std::string& what, size_t at = std::string::npos) const {
    size_t p = at == std::string::npos ? pos_ : at;
    int line = 1, col = 1;
    for (size_t i = 0; i < p && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    size_t line_start = text_.rfind('\n', p == 0 ? 0 : p - 1);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    size_t line_end = text_.find('\n', p);
    std::string_view line_text = text_.substr(line_start, line_end - line_start);
    ThrowInvalidArgument("IR parse error at line ", line, ", column ", col, ": ", what, "\n  ",
                         line_text);
  }

  bool TryConsume(char c) {
    SkipSpace();
    if (Peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void Expect(char c) {
    if (!TryConsume(c)) Fail(StrCat("expected '", c, "'"));
  }

  static bool IsNameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  }

  std::string ParseName() {
    SkipSpace();
    size_t start = pos_;
    while (!AtEnd() && IsNameChar(text_[pos_])) ++pos_;
    if (start == pos_) Fail("expected a name");
    return std::string(text_.substr(start, pos_ - start));
  }

  bool PeekWord(std::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    size_t end = pos_ + word.size();
    return end >= text_.size() || !IsNameChar(text_[end]);
  }

  void ExpectWord(std::string_view word) {
    if (!PeekWord(word)) Fail(StrCat("expected '", word, "'"));
    pos_ += word.size();
  }

  std::string ParsePercentName() {
    Expect('%');
    return ParseName();
  }

  int64_t ParseInt() {
    SkipSpace();
    size_t start = pos_;
    if (Peek() == '-' || Peek() == '+') ++pos_;
    while (!AtEnd() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (start == pos_ || (pos_ == start + 1 && !std::isdigit(static_cast<unsigned char>(text_[start])))) {
      Fail("expected an integer");
    }
    return std::strtoll(std::string(text_.substr(start, pos_ - start)).c_str(), nullptr, 10);
  }

  std::string ParseQuoted() {
    Expect('"');
    std::string out;
    while (!AtEnd() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\' && !AtEnd()) {
        char e = text_[pos_++];
        out += e == 'n' ? '\n' : e;
      } else {
        out += c;
      }
    }
    Expect('"');
    return out;
  }

  std::vector<int64_t> ParseIntList() {  // {1,2,3}
    Expect('{');
    std::vector<int64_t> v;
    if (TryConsume('}')) return v;
    do {
      v.push_back(ParseInt());
    } while (TryConsume(','));
    Expect('}');
    return v;
  }

  // --- shapes ----------------------------------------------------------------------------
  Shape ParseShape() {
    SkipSpace();
    if (TryConsume('(')) {
      std::vector<Shape> elements;
      if (!TryConsume(')')) {
        do {
          elements.push_back(ParseShape());
        } while (TryConsume(','));
        Expect(')');
      }
      return Shape::Tuple(std::move(elements));
    }
    size_t at = pos_;
    std::string name;
    while (!AtEnd() && std::isalnum(static_cast<unsigned char>(text_[pos_]))) name += text_[pos_++];
    std::optional<DType> dtype = ParseDType(name);
    if (!dtype) Fail(StrCat("unknown element type '", name, "'"), at);
    Expect('[');
    std::vector<int64_t> dims;
    if (!TryConsume(']')) {
      do {
        int64_t d = ParseInt();
        if (d < 0) Fail("negative dimension");
        dims.push_back(d);
      } while (TryConsume(','));
      Expect(']');
    }
    return Shape(*dtype, std::move(dims));
  }

  // --- literals --------------------------------------------------------------------------
  void ParseLiteralElements(std::vector<std::string>& out) {
    SkipSpace();
    if (TryConsume('{')) {
      if (TryConsume('}')) return;
      do {
        ParseLiteralElements(out);
      } while (TryConsume(','));
      Expect('}');
      return;
    }
    size_t start = pos_;
    while (!AtEnd() && (IsNameChar(text_[pos_]) || text_[pos_] == '+')) ++pos_;
    if (start == pos_) Fail("expected a literal element");
    out.emplace_back(text_.substr(start, pos_ - start));
  }

  Literal ParseLiteral(const Shape& shape) {
    if (!shape.IsArray()) Fail("a constant must have an array shape");
    size_t at = pos_;
    std::vector<std::string> elements;
    ParseLiteralElements(elements);
    Literal lit(shape);
    if (static_cast<int64_t>(elements.size()) != shape.NumElements()) {
      Fail(StrCat("constant of shape ", shape.ToString(), " has ", elements.size(),
                  " elements"), at);
    }
    for (size_t i = 0; i < elements.size(); ++i) {
      const std::string& e = elements[i];
      char* end = nullptr;
      if (IsPred(shape.dtype())) {
        if (e == "true" || e == "1") {
          lit.SetUint64(i, 1);
        } else if (e == "false" || e == "0") {
          lit.SetUint64(i, 0);
        } else {
          Fail("bad pred literal '" + e + "'", at);
        }
        continue;
      }
      if (IsFloat(shape.dtype()) && e.rfind("nan_0x", 0) == 0) {  // a NaN by its bits
        lit.SetUint64(i, std::strtoull(e.c_str() + 6, &end, 16));
        if (*end || e.size() == 6) Fail("bad float literal '" + e + "'", at);
      } else if (IsFloat(shape.dtype())) {
        double d = std::strtod(e.c_str(), &end);
        if (*end) Fail("bad float literal '" + e + "'", at);
        lit.SetDouble(i, d);
      } else if (IsSignedInt(shape.dtype())) {
        lit.SetInt64(i, std::strtoll(e.c_str(), &end, 10));
        if (*end) Fail("bad integer literal '" + e + "'", at);
      } else {
        lit.SetUint64(i, std::strtoull(e.c_str(), &end, 10));
        if (*end || e[0] == '-') Fail("bad unsigned literal '" + e + "'", at);
      }
    }
    return lit;
  }

  // --- computations and instructions -----------------------------------------------------
  void ParseComputation() {
    bool is_entry = false;
    if (PeekWord("ENTRY")) {
      ExpectWord("ENTRY");
      is_entry = true;
    }
    std::string name = ParsePercentName();
    if (module_->FindComputation(name)) Fail("computation %" + name + " defined twice");
    Computation* comp = module_->AddComputation(name);
    if (comp->name() != name) Fail("computation name %" + name + " clashes");
    if (is_entry) {
      if (module_->entry()) Fail("two ENTRY computations");
      module_->set_entry(comp);
    }
    // The header repeats the parameters' and the root's shapes; they must agree.
    size_t header_at = pos_;
    std::vector<Shape> declared_params;
    Expect('(');
    if (!TryConsume(')')) {
      do {
        ParseName();
        Expect(':');
        declared_params.push_back(ParseShape());
      } while (TryConsume(','));
      Expect(')');
    }
    Expect('-');
    Expect('>');
    Shape declared_result = ParseShape();
    Expect('{');
    names_.clear();
    while (!TryConsume('}')) ParseInstruction(comp);
    if (!comp->root()) Fail("computation %" + name + " has no ROOT");
    for (int i = 0; i < comp->num_parameters(); ++i) {
      if (!comp->parameter(i)) Fail(StrCat("computation %", name, " lacks parameter ", i));
    }
    if (declared_params.size() != static_cast<size_t>(comp->num_parameters())) {
      Fail(StrCat("computation %", name, " declares ", declared_params.size(), " parameters but has ",
                  comp->num_parameters()), header_at);
    }
    for (size_t i = 0; i < declared_params.size(); ++i) {
      if (declared_params[i] != comp->parameter(i)->shape()) {
        Fail(StrCat("computation %", name, " declares parameter ", i, " as ", declared_params[i].ToString(),
                    " but it is ", comp->parameter(i)->shape().ToString()), header_at);
      }
    }
    if (declared_result != comp->root()->shape()) {
      Fail(StrCat("computation %", name, " declares the result ", declared_result.ToString(),
                  " but its ROOT is ", comp->root()->shape().ToString()), header_at);
    }
  }

  void ParseInstruction(Computation* comp) {
    bool is_root = false;
    if (PeekWord("ROOT")) {
      ExpectWord("ROOT");
      is_root = true;
    }
    size_t at = pos_;
    std::string name = ParsePercentName();
    if (names_.count(name)) Fail("instruction %" + name + " defined twice", at);
    Expect('=');
    Shape shape = ParseShape();
    size_t op_at = pos_;
    std::string op_name = ParseName();
    std::optional<Opcode> opcode = ParseOpcode(op_name);
    if (!opcode) Fail("unknown opcode '" + op_name + "'", op_at);

    InstructionAttrs attrs;
    std::vector<Instruction*> operands;
    Expect('(');
    if (*opcode == Opcode::kParameter) {
      attrs.index = ParseInt();
      Expect(')');
    } else if (*opcode == Opcode::kConstant) {
      attrs.literal = std::make_shared<Literal>(ParseLiteral(shape));
      Expect(')');
    } else if (!TryConsume(')')) {
      do {
        size_t operand_at = pos_;
        std::string operand = ParsePercentName();
        auto it = names_.find(operand);
        if (it == names_.end()) Fail("use of undefined value %" + operand, operand_at);
        operands.push_back(it->second);
      } while (TryConsume(','));
      Expect(')');
    }

    std::vector<std::string> called_names;
    std::map<std::string, std::string> seen_attrs;
    std::string metadata;
    while (TryConsume(',')) {
      size_t attr_at = pos_;
      std::string key = ParseName();
      if (seen_attrs.count(key)) Fail("attribute '" + key + "' given twice", attr_at);
      seen_attrs[key] = "";
      Expect('=');
      ParseAttribute(key, *opcode, attrs, called_names, metadata, attr_at);
    }

    auto instr = Instruction::Create(*opcode, shape, operands, attrs);
    instr->set_metadata(metadata);
    Instruction* added = nullptr;
    try {
      added = comp->AddInstruction(std::move(instr), name);
    } catch (const Error& e) {
      Fail(e.what(), at);
    }
    // Names are scoped per computation in the text; one already taken elsewhere in the
    // module is renamed (so such text does not print back verbatim).
    names_[name] = added;
    if (!called_names.empty()) {
      pending_.push_back({added, called_names, at});
    }
    if (is_root) {
      if (comp->root()) Fail("two ROOT instructions", at);
      comp->set_root(added);
    }
  }

  void ParseAttribute(const std::string& key, Opcode opcode, InstructionAttrs& attrs,
                      std::vector<std::string>& called, std::string& metadata, size_t at) {
    auto set_call = [&](size_t slot, std::string name) {
      if (called.size() <= slot) called.resize(slot + 1);
      called[slot] = std::move(name);
    };
    if (key == "dimensions" || key == "dynamic_slice_sizes" || key == "slice_sizes") {
      attrs.dimensions = ParseIntList();
    } else if (key == "iota_dimension") {
      attrs.dimensions = {ParseInt()};
    } else if (key == "slice") {
      Expect('{');
      if (!TryConsume('}')) {
        do {
          Expect('[');
          attrs.slice.starts.push_back(ParseInt());
          Expect(':');
          attrs.slice.limits.push_back(ParseInt());
          int64_t stride = 1;
          if (TryConsume(':')) stride = ParseInt();
          attrs.slice.strides.push_back(stride);
          Expect(']');
        } while (TryConsume(','));
        Expect('}');
      }
    } else if (key == "padding") {
      SkipSpace();
      if (TryConsume('{')) {
        Expect('}');
        return;
      }
      do {
        PadDim p;
        p.low = ParseInt();
        Expect('_');
        p.high = ParseInt();
        Expect('_');
        p.interior = ParseInt();
        attrs.padding.push_back(p);
      } while (TryConsume('x'));
    } else if (key == "direction") {
      std::string d = ParseName();
      auto dir = ParseComparisonDirection(d);
      if (!dir) Fail("unknown comparison direction '" + d + "'", at);
      attrs.direction = *dir;
    } else if (key == "index") {
      attrs.index = ParseInt();
    } else if (key == "unroll") {
      attrs.unroll = ParseInt();
    } else if (key == "trip_count") {
      attrs.trip_count = ParseInt();
    } else if (key == "offset_dims") {
      attrs.gather.offset_dims = ParseIntList();
    } else if (key == "collapsed_slice_dims") {
      attrs.gather.collapsed_slice_dims = ParseIntList();
    } else if (key == "start_index_map") {
      attrs.gather.start_index_map = ParseIntList();
    } else if (key == "index_vector_dim") {
      attrs.gather.index_vector_dim = attrs.scatter.index_vector_dim = ParseInt();
    } else if (key == "update_window_dims") {
      attrs.scatter.update_window_dims = ParseIntList();
    } else if (key == "inserted_window_dims") {
      attrs.scatter.inserted_window_dims = ParseIntList();
    } else if (key == "scatter_dims_to_operand_dims") {
      attrs.scatter.scatter_dims_to_operand_dims = ParseIntList();
    } else if (key == "indices_are_sorted" || key == "unique_indices") {
      std::string v = ParseName();
      if (v != "true" && v != "false") Fail(key + " must be true or false, not '" + v + "'", at);
      (key == "unique_indices" ? attrs.scatter.unique_indices : attrs.scatter.indices_are_sorted) = v == "true";
    } else if (key == "lhs_batch_dims") {
      attrs.dot.lhs_batch = ParseIntList();
    } else if (key == "rhs_batch_dims") {
      attrs.dot.rhs_batch = ParseIntList();
    } else if (key == "lhs_contracting_dims") {
      attrs.dot.lhs_contracting = ParseIntList();
    } else if (key == "rhs_contracting_dims") {
      attrs.dot.rhs_contracting = ParseIntList();
    } else if (key == "kind") {
      std::string k = ParseName();
      auto kind = ParseFusionKind(k);
      if (!kind) Fail("unknown fusion kind '" + k + "'", at);
      attrs.fusion_kind = *kind;
    } else if (key == "calls" || key == "to_apply" || key == "condition") {
      set_call(0, ParsePercentName());
    } else if (key == "body") {
      set_call(1, ParsePercentName());
    } else if (key == "branch_computations") {
      Expect('{');
      if (!TryConsume('}')) {
        do {
          called.push_back(ParsePercentName());
        } while (TryConsume(','));
        Expect('}');
      }
    } else if (key == "custom_call_target") {
      attrs.custom_call_target = ParseQuoted();
    } else if (key == "custom_call_config") {
      attrs.custom_call_config = ParseQuoted();
    } else if (key == "source") {
      metadata = ParseQuoted();
    } else {
      Fail(StrCat("unknown attribute '", key, "' for ", OpcodeName(opcode)), at);
    }
  }

  void ResolveComputationReferences() {
    for (PendingCall& p : pending_) {
      std::vector<Computation*> called;
      for (const std::string& name : p.names) {
        if (name.empty()) Fail("missing called computation", p.pos);
        Computation* c = module_->FindComputation(name);
        if (!c) Fail("unknown computation %" + name, p.pos);
        called.push_back(c);
      }
      p.instr->set_called_computations(called);
      if (p.instr->opcode() == Opcode::kFusion && !called.empty()) {
        called[0]->set_fusion_instruction(p.instr);
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::unique_ptr<Module> module_;
  std::unordered_map<std::string, Instruction*> names_;
  std::vector<PendingCall> pending_;
};

}  // namespace

std::unique_ptr<Module> ParseModule(std::string_view text) { return Parser(text).Run(); }

}  // namespace fj
