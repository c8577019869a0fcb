// The bridge between Python arrays and qexact's tensors, both ways without copies.
//
// In: any CPU array nanobind can import (a numpy array through the buffer protocol or DLPack,
// a PyTorch CPU tensor or anything else that speaks DLPack) becomes a TensorView over the same
// memory, with its strides. numpy has no bfloat16 of its own: the Python layer passes an
// ml_dtypes.bfloat16 array as its uint16 view with `bf16_bits` set; a DLPack producer that
// labels its data bfloat16 (PyTorch) needs no flag.
// Out: a qexact::Tensor moves into a capsule that owns it, and numpy's array borrows its bytes.
// bf16 results leave as uint16 bit patterns, which the Python layer views as ml_dtypes.bfloat16.
#pragma once
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::python {

namespace nb = nanobind;

// Any dtype, any strides, read-only, CPU memory.
using InArray = nb::ndarray<nb::ro, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy>;

// numpy's name of an imported array's dtype ("float32", "bfloat16", "float8_e4m3fn", ...).
std::string dtype_name_of(const InArray& a);

// The qexact dtype of an imported array, or nothing qexact knows (returns false).
bool qexact_dtype_of(const InArray& a, bool bf16_bits, DType& out);

// A view over `a` whose dtype must be one of `accepted`; otherwise nb::type_error naming the
// argument `what`, the dtype it holds and those accepted.
TensorView view_of(const InArray& a, bool bf16_bits, const char* what, const std::vector<DType>& accepted);

// The numpy array owning `t`'s bytes (bf16 as uint16).
OutArray to_numpy(Tensor&& t);

// The engine and thread count of a call (threads >= 0; 0: QEXACT_THREADS, else one per core).
RunOptions run_options(const std::string& engine, int threads);

// The float inputs every quantizer takes: f32, f16, bf16.
const std::vector<DType>& float_inputs();

}  // namespace qexact::python
