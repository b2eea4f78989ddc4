// Pytrees in C++: flattening nested tuples, lists, dicts, None, namedtuples and registered
// custom nodes into leaves plus a PyTreeDef, and back. Both the Python tracer and the C++
// jit fast path use this one implementation, so they agree on the order of leaves.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

namespace fj::py_bindings {

namespace py = pybind11;

enum class NodeKind : uint8_t { kLeaf, kNone, kTuple, kList, kDict, kNamedTuple, kCustom };

struct Node {
  NodeKind kind = NodeKind::kLeaf;
  int arity = 0;         // number of children
  int num_leaves = 0;    // leaves in this subtree
  int num_nodes = 0;     // nodes in this subtree, itself included
  py::object node_data;  // dict: sorted keys (list); namedtuple/custom: the type
  py::object aux;        // custom: auxiliary data returned by the flatten function
};

class PyTreeDef {
 public:
  // Flattens `x`, appending leaves to `leaves`. `is_leaf`, if not None, is called on each
  // node and stops the descent where it returns True.
  static PyTreeDef Flatten(py::handle x, std::vector<py::object>& leaves,
                           py::handle is_leaf = py::none());
  // Rebuilds the tree from `leaves` (an iterable of exactly num_leaves() values).
  py::object Unflatten(const std::vector<py::object>& leaves) const;
  py::object UnflattenIterable(py::iterable leaves) const;

  int num_leaves() const { return nodes_.empty() ? 0 : nodes_.back().num_leaves; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  size_t Hash() const;
  bool operator==(const PyTreeDef& other) const;
  std::string ToString() const;
  // The children's treedefs of the root node.
  std::vector<PyTreeDef> Children() const;

 private:
  void FlattenInto(py::handle x, std::vector<py::object>& leaves, py::handle is_leaf);
  // nodes_ in post order: children before their parent; the root is last.
  std::vector<Node> nodes_;
};

// Registers a custom node type: flatten(x) -> (children, aux); unflatten(aux, children).
void RegisterPyTreeNode(py::object type, py::function flatten, py::function unflatten);

void DefinePyTree(py::module_& m);

}  // namespace fj::py_bindings
