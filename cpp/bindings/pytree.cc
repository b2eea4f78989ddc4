// Pytrees (see pytree.h).
#include "bindings/pytree.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace fj::py_bindings {
namespace {

struct CustomNode {
  py::object type;
  py::function flatten;
  py::function unflatten;
};

std::unordered_map<PyObject*, CustomNode>& Registry() {
  static auto* registry = new std::unordered_map<PyObject*, CustomNode>();
  return *registry;
}

bool IsNamedTuple(py::handle x) {
  return PyTuple_Check(x.ptr()) && !PyTuple_CheckExact(x.ptr()) &&
         py::hasattr(py::type::handle_of(x), "_fields");
}

size_t HashObject(py::handle h) {
  Py_hash_t v = PyObject_Hash(h.ptr());
  if (v == -1) {
    PyErr_Clear();  // unhashable auxiliary data: equality still decides
    return 0;
  }
  return static_cast<size_t>(v);
}

}  // namespace

void PyTreeDef::FlattenInto(py::handle x, std::vector<py::object>& leaves, py::handle is_leaf) {
  Node node;
  size_t start_leaves = leaves.size();
  size_t start_nodes = nodes_.size();
  PyObject* p = x.ptr();
  if (!is_leaf.is_none() && py::cast<bool>(is_leaf(x))) {
    leaves.push_back(py::reinterpret_borrow<py::object>(x));
  } else if (p == Py_None) {
    node.kind = NodeKind::kNone;
  } else if (PyTuple_CheckExact(p)) {
    node.kind = NodeKind::kTuple;
    node.arity = static_cast<int>(PyTuple_GET_SIZE(p));
    for (int i = 0; i < node.arity; ++i) FlattenInto(PyTuple_GET_ITEM(p, i), leaves, is_leaf);
  } else if (PyList_CheckExact(p)) {
    node.kind = NodeKind::kList;
    node.arity = static_cast<int>(PyList_GET_SIZE(p));
    // Children may run Python code (is_leaf); keep a reference to the list's items.
    py::list items = py::reinterpret_borrow<py::list>(x);
    for (int i = 0; i < node.arity; ++i) FlattenInto(items[i], leaves, is_leaf);
  } else if (PyDict_CheckExact(p)) {
    node.kind = NodeKind::kDict;
    py::list keys = py::reinterpret_steal<py::list>(PyDict_Keys(p));
    if (PyList_Sort(keys.ptr()) != 0) {
      throw py::error_already_set();  // e.g. keys of mixed types cannot be sorted
    }
    node.arity = static_cast<int>(keys.size());
    py::dict d = py::reinterpret_borrow<py::dict>(x);
    for (py::handle k : keys) FlattenInto(d[k], leaves, is_leaf);
    node.node_data = py::tuple(keys);
  } else if (auto it = Registry().find(reinterpret_cast<PyObject*>(Py_TYPE(p))); it != Registry().end()) {
    node.kind = NodeKind::kCustom;
    py::tuple out = it->second.flatten(x);
    if (out.size() != 2) throw py::value_error("pytree flatten function must return (children, aux_data)");
    py::list children(out[0]);
    node.arity = static_cast<int>(children.size());
    for (py::handle c : children) FlattenInto(c, leaves, is_leaf);
    node.node_data = it->second.type;
    node.aux = out[1];
  } else if (IsNamedTuple(x)) {
    node.kind = NodeKind::kNamedTuple;
    node.arity = static_cast<int>(PyTuple_GET_SIZE(p));
    for (int i = 0; i < node.arity; ++i) FlattenInto(PyTuple_GET_ITEM(p, i), leaves, is_leaf);
    node.node_data = py::reinterpret_borrow<py::object>(py::type::handle_of(x));
  } else {
    leaves.push_back(py::reinterpret_borrow<py::object>(x));
  }
  node.num_leaves = static_cast<int>(leaves.size() - start_leaves);
  node.num_nodes = static_cast<int>(nodes_.size() - start_nodes) + 1;
  nodes_.push_back(std::move(node));
}

PyTreeDef PyTreeDef::Flatten(py::handle x, std::vector<py::object>& leaves, py::handle is_leaf) {
  PyTreeDef def;
  def.FlattenInto(x, leaves, is_leaf);
  return def;
}

py::object PyTreeDef::Unflatten(const std::vector<py::object>& leaves) const {
  if (static_cast<int>(leaves.size()) != num_leaves()) {
    throw py::value_error("tree structure " + ToString() + " expects " + std::to_string(num_leaves()) +
                          " leaves, got " + std::to_string(leaves.size()));
  }
  std::vector<py::object> stack;
  size_t next_leaf = 0;
  for (const Node& node : nodes_) {
    size_t first = stack.size() - node.arity;
    switch (node.kind) {
      case NodeKind::kLeaf:
        stack.push_back(leaves[next_leaf++]);
        continue;
      case NodeKind::kNone:
        stack.push_back(py::none());
        continue;
      default:
        break;
    }
    py::tuple children(node.arity);
    for (int i = 0; i < node.arity; ++i) children[i] = stack[first + i];
    stack.resize(first);
    switch (node.kind) {
      case NodeKind::kTuple:
        stack.push_back(children);
        break;
      case NodeKind::kList:
        stack.push_back(py::list(children));
        break;
      case NodeKind::kDict: {
        py::dict d;
        py::tuple keys = node.node_data;
        for (int i = 0; i < node.arity; ++i) d[keys[i]] = children[i];
        stack.push_back(d);
        break;
      }
      case NodeKind::kNamedTuple:
        stack.push_back(node.node_data(*children));
        break;
      case NodeKind::kCustom: {
        auto it = Registry().find(node.node_data.ptr());
        if (it == Registry().end()) throw py::value_error("pytree node type is no longer registered");
        stack.push_back(it->second.unflatten(node.aux, children));
        break;
      }
      default:
        break;
    }
  }
  return stack.empty() ? py::object(py::none()) : stack.back();
}

py::object PyTreeDef::UnflattenIterable(py::iterable leaves) const {
  std::vector<py::object> v;
  for (py::handle h : leaves) v.push_back(py::reinterpret_borrow<py::object>(h));
  return Unflatten(v);
}

size_t PyTreeDef::Hash() const {
  size_t h = nodes_.size();
  for (const Node& n : nodes_) {
    h = h * 1000003u ^ (static_cast<size_t>(n.kind) * 31 + static_cast<size_t>(n.arity));
    if (n.node_data) h = h * 1000003u ^ HashObject(n.node_data);
    if (n.aux) h = h * 1000003u ^ HashObject(n.aux);
  }
  return h;
}

bool PyTreeDef::operator==(const PyTreeDef& other) const {
  if (nodes_.size() != other.nodes_.size()) return false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& a = nodes_[i];
    const Node& b = other.nodes_[i];
    if (a.kind != b.kind || a.arity != b.arity) return false;
    if (static_cast<bool>(a.node_data) != static_cast<bool>(b.node_data)) return false;
    if (a.node_data && !a.node_data.equal(b.node_data)) return false;
    if (static_cast<bool>(a.aux) != static_cast<bool>(b.aux)) return false;
    if (a.aux && !a.aux.equal(b.aux)) return false;
  }
  return true;
}

std::vector<PyTreeDef> PyTreeDef::Children() const {
  std::vector<PyTreeDef> children;
  if (nodes_.empty()) return children;
  int pos = static_cast<int>(nodes_.size()) - 1;
  int remaining = nodes_.back().arity;
  pos -= 1;
  while (remaining-- > 0) {
    int size = nodes_[pos].num_nodes;
    PyTreeDef child;
    child.nodes_.assign(nodes_.begin() + (pos - size + 1), nodes_.begin() + pos + 1);
    children.push_back(std::move(child));
    pos -= size;
  }
  std::reverse(children.begin(), children.end());
  return children;
}

std::string PyTreeDef::ToString() const {
  std::vector<std::string> stack;
  for (const Node& node : nodes_) {
    if (node.kind == NodeKind::kLeaf) {
      stack.push_back("*");
      continue;
    }
    if (node.kind == NodeKind::kNone) {
      stack.push_back("None");
      continue;
    }
    std::vector<std::string> children(stack.end() - node.arity, stack.end());
    stack.resize(stack.size() - node.arity);
    auto join = [&](const std::vector<std::string>& parts) {
      std::string out;
      for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
      return out;
    };
    std::string text;
    switch (node.kind) {
      case NodeKind::kTuple:
        text = "(" + join(children) + (node.arity == 1 ? ",)" : ")");
        break;
      case NodeKind::kList:
        text = "[" + join(children) + "]";
        break;
      case NodeKind::kDict: {
        py::tuple keys = node.node_data;
        std::vector<std::string> items;
        for (int i = 0; i < node.arity; ++i) {
          items.push_back(py::repr(keys[i]).cast<std::string>() + ": " + children[i]);
        }
        text = "{" + join(items) + "}";
        break;
      }
      case NodeKind::kNamedTuple:
        text = node.node_data.attr("__name__").cast<std::string>() + "(" + join(children) + ")";
        break;
      default:
        text = "CustomNode(" + node.node_data.attr("__name__").cast<std::string>() + "[" +
               py::repr(node.aux).cast<std::string>() + "], [" + join(children) + "])";
    }
    stack.push_back(text);
  }
  return "PyTreeDef(" + (stack.empty() ? std::string() : stack.back()) + ")";
}

void RegisterPyTreeNode(py::object type, py::function flatten, py::function unflatten) {
  PyObject* key = type.ptr();
  if (Registry().count(key)) {
    throw py::value_error("pytree node type " + py::repr(type).cast<std::string>() + " is already registered");
  }
  Registry()[key] = {type, flatten, unflatten};
}

void DefinePyTree(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<PyTreeDef>(m, "PyTreeDef")
      .def_property_readonly("num_leaves", &PyTreeDef::num_leaves)
      .def_property_readonly("num_nodes", &PyTreeDef::num_nodes)
      .def("unflatten", &PyTreeDef::UnflattenIterable)
      .def("children", &PyTreeDef::Children)
      .def("__eq__", [](const PyTreeDef& a, const PyTreeDef& b) { return a == b; })
      .def("__ne__", [](const PyTreeDef& a, const PyTreeDef& b) { return !(a == b); })
      .def("__hash__", &PyTreeDef::Hash)
      .def("__repr__", &PyTreeDef::ToString);
  m.def(
      "tree_flatten",
      [](py::handle x, py::handle is_leaf) {
        std::vector<py::object> leaves;
        PyTreeDef def = PyTreeDef::Flatten(x, leaves, is_leaf);
        py::list out;
        for (auto& l : leaves) out.append(l);
        return py::make_tuple(out, def);
      },
      "tree"_a, "is_leaf"_a = py::none());
  m.def("register_pytree_node", &RegisterPyTreeNode, "type"_a, "flatten"_a, "unflatten"_a);
}

}  // namespace fj::py_bindings
