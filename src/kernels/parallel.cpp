// at::parallel_for is a header template whose OpenMP body only exists when the including file is
// compiled with -fopenmp; this project's build doesn't pass it, so at::parallel_for would run
// serially here. Instead we call the entry point that `#pragma omp parallel` lowers to
// (GOMP_parallel), found at run time in the libgomp that LibTorch already loaded. That uses the very
// same OpenMP team as LibTorch's own operators: no second thread pool competing for the cores with
// LibTorch's spin-waiting workers. Without libgomp the work simply runs on the calling thread.
#include "kernels/parallel.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>

namespace dspark::kernels {
namespace {

struct OpenMp {
  void (*parallel)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) = nullptr;
  int (*thread_num)() = nullptr;
  int (*num_threads)() = nullptr;
  bool ok() const { return parallel && thread_num && num_threads; }
};

const OpenMp& openmp() {
  static const OpenMp table = [] {
    OpenMp t;
    t.parallel = reinterpret_cast<decltype(t.parallel)>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
    t.thread_num = reinterpret_cast<decltype(t.thread_num)>(dlsym(RTLD_DEFAULT, "omp_get_thread_num"));
    t.num_threads = reinterpret_cast<decltype(t.num_threads)>(dlsym(RTLD_DEFAULT, "omp_get_num_threads"));
    return t;
  }();
  return table;
}

}  // namespace

void parallel_ranges_raw(int64_t count, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* context) {
  if (count <= 0) return;
  const OpenMp& omp = openmp();
  const int64_t threads =
      std::min<int64_t>(at::get_num_threads(), (count + grain - 1) / std::max<int64_t>(grain, 1));
  if (threads <= 1 || !omp.ok() || at::in_parallel_region()) {
    fn(context, 0, count);
    return;
  }
  struct Team {
    void (*fn)(void*, int64_t, int64_t);
    void* context;
    int64_t count;
    const OpenMp* omp;
  } team{fn, context, count, &omp};
  auto body = [](void* data) {
    const Team& t = *static_cast<const Team*>(data);
    const int64_t nt = t.omp->num_threads(), tid = t.omp->thread_num();
    const int64_t chunk = (t.count + nt - 1) / nt;
    const int64_t begin = tid * chunk, end = std::min(t.count, begin + chunk);
    if (begin < end) t.fn(t.context, begin, end);
  };
  omp.parallel(body, &team, static_cast<unsigned>(threads), 0);
}

}  // namespace dspark::kernels
