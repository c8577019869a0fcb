// qexact._core's compare functions: the lab's compare (conformance/compare.hpp) and its
// diagnoses for Python, so that qexact.compare reports exactly what `qexact compare` does.
#pragma once
#include <nanobind/nanobind.h>

namespace qexact::python {

void bind_compare(nanobind::module_& m);

}  // namespace qexact::python
