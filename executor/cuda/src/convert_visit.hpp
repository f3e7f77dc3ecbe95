// Which pair of element types a converting kernel is instantiated for (internal to the CUDA backend).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "reshard/dtype.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard::cuda {

template <class T>
struct AnyElement : std::true_type {};

// Calls f(From{}, To{}) for two different element types the move converts between, From admitted by Admits;
// cudaErrorInvalidValue for any other pair.
template <template <class> class Admits = AnyElement, class F>
cudaError_t visit_conversion(DType from, DType to, F&& f) {
  return visit_dtype(from, [&](auto a) {
    return visit_dtype(to, [&](auto b) -> cudaError_t {
      using From = typename std::decay_t<decltype(a)>::type;
      using To = typename std::decay_t<decltype(b)>::type;
      if constexpr (detail::kConvertibleElement<From> && detail::kConvertibleElement<To> &&
                    !std::is_same_v<From, To> && Admits<From>::value) {
        return f(From{}, To{});
      } else {
        return cudaErrorInvalidValue;
      }
    });
  });
}

}  // namespace reshard::cuda
