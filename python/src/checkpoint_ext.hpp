// qexact._core's checkpoint functions (checkpoint_ext.cpp), registered by NB_MODULE.
#pragma once
#include <nanobind/nanobind.h>

namespace qexact::python {

void bind_checkpoint(nanobind::module_& m);

}  // namespace qexact::python
