// A minimal CPU stand-in for the CUDA runtime, used only by tests/corpus/test_corpus_cpu_sim.py to
// check that each corpus kernel (run through its own host launch function) computes what its numpy
// reference says. One ucontext fiber per CUDA thread; blocks run one after another; every thread of
// a block runs until it reaches __syncthreads() (or a warp shuffle), so a missing barrier shows up
// as a wrong result. `kernel<<<g, b, smem, stream>>>(args)` and `extern __shared__ T x[];` are
// rewritten by the test before compiling. Not a CUDA interpreter: no memory checks, fp32 on the host.
#pragma once
#include <ucontext.h>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include <algorithm>
using std::max;  // CUDA's host/device min and max overloads
using std::min;

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef void* cudaStream_t;
typedef int cudaError_t;
#define cudaSuccess 0
inline cudaError_t cudaGetLastError() { return 0; }
// `__constant__` tables are plain globals here: the copy the host makes into them
template <typename T>
inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, size_t count, size_t offset = 0) {
  std::memcpy(reinterpret_cast<char*>(&symbol) + offset, src, count);
  return 0;
}

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __constant__
#define __launch_bounds__(...)

enum { RUN = 0, AT_BLOCK = 1, AT_WARP = 2, DONE = 3 };
struct SimThread {
  ucontext_t ctx;
  dim3 tid;
  int state;
  char* stack;
};
struct SimState {
  std::vector<SimThread> th;
  int cur = 0;
  dim3 bidx, bdim, gdim;
  ucontext_t sched;
  std::function<void()> body;
  double shfl[1024];
  std::vector<char> dyn;
  void* dyn_smem = nullptr;
  int* record = nullptr;
  int launches = 0;
  int error = 0;
};
inline SimState g_sim;

#define threadIdx (g_sim.th[g_sim.cur].tid)
#define blockIdx (g_sim.bidx)
#define blockDim (g_sim.bdim)
#define gridDim (g_sim.gdim)

inline void sim_yield(int state) {
  g_sim.th[g_sim.cur].state = state;
  swapcontext(&g_sim.th[g_sim.cur].ctx, &g_sim.sched);
}
inline void __syncthreads() { sim_yield(AT_BLOCK); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// Fibers switch only at barriers/shuffles, so a read-modify-write is already atomic here.
template <typename T>
T atomicAdd(T* address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}

template <typename T>
T atomicMax(T* address, T value) {
  T old = *address;
  *address = old < value ? value : old;
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  T old = *address;
  *address = value < old ? value : old;
  return old;
}
template <typename T>
T atomicExch(T* address, T value) {
  T old = *address;
  *address = value;
  return old;
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  T old = *address;
  if (old == compare) *address = value;
  return old;
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }

// Warp shuffles: every lane of the warp publishes its value, then reads its source lane's, with
// CUDA's `width` segments (a source outside the lane's segment returns the lane's own value).
template <typename T, typename F>
T sim_shfl(T v, F src_lane) {
  const int t = g_sim.cur, lane = t % 32;
  g_sim.shfl[t] = static_cast<double>(v);
  sim_yield(AT_WARP);
  const int s = src_lane(lane);
  T r = s < 0 ? v : static_cast<T>(g_sim.shfl[t - lane + s]);
  sim_yield(AT_WARP);
  return r;
}
template <typename T>
T __shfl_down_sync(unsigned, T v, int delta, int width = 32) {
  return sim_shfl(v, [=](int lane) {
    return (lane % width) + delta < width ? lane + delta : -1;
  });
}
template <typename T>
T __shfl_up_sync(unsigned, T v, int delta, int width = 32) {
  return sim_shfl(v, [=](int lane) { return (lane % width) >= delta ? lane - delta : -1; });
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  return sim_shfl(v, [=](int lane) {
    const int s = lane ^ mask;
    return s / width == lane / width ? s : -1;
  });
}
template <typename T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
  return sim_shfl(v, [=](int lane) { return (lane / width) * width + (src % width); });
}

// 16-bit float storage types: the value is kept as its bit pattern; arithmetic goes through
// float (as the CUDA headers' host fallbacks do), conversions round to nearest even.
inline unsigned sim_f32_bits(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float sim_bits_f32(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
struct __nv_bfloat16 {
  unsigned short x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) {
    unsigned u = sim_f32_bits(f);
    if (std::isnan(f)) x = 0x7fc0;
    else x = static_cast<unsigned short>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  operator float() const { return sim_bits_f32(static_cast<unsigned>(x) << 16); }
};
struct __half {
  _Float16 h;
  __half() = default;
  __half(float f) : h(static_cast<_Float16>(f)) {}
  operator float() const { return static_cast<float>(h); }
};
inline float __bfloat162float(__nv_bfloat16 v) { return static_cast<float>(v); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __half2float(__half v) { return static_cast<float>(v); }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline void sim_entry() {
  g_sim.body();
  g_sim.th[g_sim.cur].state = DONE;
}

template <typename F>
void sim_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t, F f) {
  if (g_sim.record && g_sim.launches == 0) {
    int* r = g_sim.record;
    r[0] = grid.x; r[1] = grid.y; r[2] = grid.z;
    r[3] = block.x; r[4] = block.y; r[5] = block.z;
    r[6] = (int)smem;
  }
  g_sim.launches++;
  g_sim.body = f;
  g_sim.gdim = grid;
  g_sim.bdim = block;
  g_sim.dyn.assign(smem + 16, static_cast<char>(0xff));  // NaN-poisoned dynamic smem
  g_sim.dyn_smem = g_sim.dyn.data();
  const int nt = block.x * block.y * block.z;
  const size_t STACK = 64 * 1024;
  g_sim.th.resize(nt);
  for (int t = 0; t < nt; ++t)
    if (!g_sim.th[t].stack) g_sim.th[t].stack = (char*)malloc(STACK);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        g_sim.bidx = dim3(bx, by, bz);
        for (int t = 0; t < nt; ++t) {
          SimThread& s = g_sim.th[t];
          s.tid = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
          s.state = RUN;
          getcontext(&s.ctx);
          s.ctx.uc_stack.ss_sp = s.stack;
          s.ctx.uc_stack.ss_size = STACK;
          s.ctx.uc_link = &g_sim.sched;
          makecontext(&s.ctx, sim_entry, 0);
        }
        for (;;) {
          for (int t = 0; t < nt; ++t)
            if (g_sim.th[t].state == RUN) {
              g_sim.cur = t;
              swapcontext(&g_sim.sched, &g_sim.th[t].ctx);
            }
          bool released = false, all_done = true;
          for (int w = 0; w * 32 < nt; ++w) {  // warp barriers
            bool any = false, all = true;
            for (int t = w * 32; t < nt && t < w * 32 + 32; ++t) {
              int st = g_sim.th[t].state;
              if (st == AT_WARP) any = true;
              else if (st != DONE) all = false;
            }
            if (any && all) {
              for (int t = w * 32; t < nt && t < w * 32 + 32; ++t)
                if (g_sim.th[t].state == AT_WARP) g_sim.th[t].state = RUN;
              released = true;
            }
          }
          if (!released) {
            bool any = false, all = true;
            for (int t = 0; t < nt; ++t) {
              int st = g_sim.th[t].state;
              if (st == AT_BLOCK) any = true;
              else if (st != DONE) all = false;
            }
            if (any && all) {
              for (int t = 0; t < nt; ++t)
                if (g_sim.th[t].state == AT_BLOCK) g_sim.th[t].state = RUN;
              released = true;
            }
          }
          for (int t = 0; t < nt; ++t)
            if (g_sim.th[t].state != DONE) all_done = false;
          if (all_done) break;
          if (!released) {
            fprintf(stderr, "deadlock/divergent barrier in block (%u,%u,%u)\n", bx, by, bz);
            g_sim.error = 1;
            return;
          }
        }
      }
}
