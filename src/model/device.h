// Where tensors live. `--device cpu|cuda|cuda:N` is parsed and checked here once, so every command
// refuses a device it cannot use with the same one-line error before loading anything. The only
// place that knows whether this binary was built with CUDA (DSPARK_HAVE_CUDA, set by CMake when the
// LibTorch it links has CUDA and -DDSPARK_CPU_ONLY is off).
#pragma once
#include <c10/core/Device.h>

#include <string>

namespace dspark {

// "cpu", "cuda" (= cuda:0) or "cuda:N". Throws dspark::Error (one line) for another name, for CUDA
// in a build without it, and when no GPU (or fewer than N + 1) is visible.
c10::Device parse_device(const std::string& name);

bool cuda_compiled();   // this binary links a LibTorch with CUDA
bool cuda_available();  // ... and at least one GPU is visible

// Blocks until the device has finished the work queued so far (GPU kernels run asynchronously;
// timings must wait for them). Nothing to do on the CPU.
void synchronize(c10::Device device);

}  // namespace dspark
