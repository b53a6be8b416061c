#include "model/device.h"

#include <torch/cuda.h>

#include "util/error.h"

namespace dspark {

bool cuda_compiled() {
#ifdef DSPARK_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available() { return cuda_compiled() && torch::cuda::is_available(); }

c10::Device parse_device(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  int64_t index = 0;
  if (name != "cuda") {
    const std::string prefix = "cuda:";
    const std::string digits = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : std::string();
    if (digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string::npos)
      fail("unknown device '{}' (want cpu, cuda or cuda:N)", name);
    index = std::stoll(digits);
  }
  if (!cuda_compiled())
    fail("--device {}: this dspark was built without CUDA (a CPU-only LibTorch, or -DDSPARK_CPU_ONLY=ON); "
         "see docs/cuda.md", name);
  const int64_t count = int64_t(torch::cuda::device_count());
  if (count == 0) fail("--device {}: no CUDA GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)", name);
  if (index >= count) fail("--device {}: only {} CUDA GPU{} visible (cuda:0 .. cuda:{})", name, count,
                           count == 1 ? " is" : "s are", count - 1);
  return c10::Device(c10::kCUDA, c10::DeviceIndex(index));
}

void synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? -1 : device.index());
}

}  // namespace dspark
