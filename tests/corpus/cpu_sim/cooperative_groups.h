// Stand-in for <cooperative_groups.h> when a corpus kernel is compiled for the CPU simulator:
// thread_block, thread_block_tile<N> (N a power of two <= 32), this_thread_block(),
// tiled_partition<N>(), the tile shuffles (the *_sync shuffles with width N), and cg::reduce
// with plus/less/greater (a shfl_xor butterfly, as CUDA's own implementation). A tile's sync()
// is a warp barrier in the simulator. Grid groups and coalesced groups are not modelled.
#pragma once
#include "sim_cuda.h"

namespace cooperative_groups {

inline unsigned sim_linear_tid() {
  return threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
}

struct thread_block {
  void sync() const { __syncthreads(); }
  unsigned thread_rank() const { return sim_linear_tid(); }
  unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return blockIdx; }
  dim3 thread_index() const { return threadIdx; }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};
inline thread_block this_thread_block() { return thread_block(); }
inline void sync(const thread_block& g) { g.sync(); }

template <unsigned N>
struct thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiles are powers of two up to 32");
  void sync() const { sim_yield(AT_WARP); }
  unsigned thread_rank() const { return sim_linear_tid() % N; }
  static constexpr unsigned size() { return N; }
  static constexpr unsigned num_threads() { return N; }
  unsigned meta_group_rank() const { return sim_linear_tid() / N; }
  unsigned meta_group_size() const {
    return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N;
  }
  template <typename T>
  T shfl(T v, int src) const { return __shfl_sync(0xffffffffu, v, src, N); }
  template <typename T>
  T shfl_down(T v, unsigned delta) const { return __shfl_down_sync(0xffffffffu, v, delta, N); }
  template <typename T>
  T shfl_up(T v, unsigned delta) const { return __shfl_up_sync(0xffffffffu, v, delta, N); }
  template <typename T>
  T shfl_xor(T v, unsigned mask) const { return __shfl_xor_sync(0xffffffffu, v, mask, N); }
};
template <unsigned N>
thread_block_tile<N> tiled_partition(const thread_block&) {
  return thread_block_tile<N>();
}
template <unsigned N>
void sync(const thread_block_tile<N>& g) { g.sync(); }

template <typename T>
struct plus {
  T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct less {
  T operator()(T a, T b) const { return a < b ? a : b; }
};
template <typename T>
struct greater {
  T operator()(T a, T b) const { return a > b ? a : b; }
};

template <unsigned N, typename T, typename Op>
T reduce(const thread_block_tile<N>& g, T v, Op op) {
  for (unsigned m = N / 2; m > 0; m >>= 1) v = op(v, g.shfl_xor(v, m));
  return v;
}

}  // namespace cooperative_groups
