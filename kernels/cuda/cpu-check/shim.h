// Minimal CPU emulation of the CUDA features embedding.cu uses: one std::thread
// per CUDA thread of a block, blocks run one after another.
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
struct D3 { unsigned x = 1, y = 1, z = 1; };
thread_local D3 threadIdx, blockIdx;
D3 blockDim, gridDim;
struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
std::barrier<> *g_block_bar;
std::vector<std::barrier<> *> g_warp_bar;
uint64_t g_slots[1024];
inline void __syncthreads() { g_block_bar->arrive_and_wait(); }
inline unsigned lane_id() { return threadIdx.x & 31; }
inline std::barrier<> &wbar() { return *g_warp_bar[threadIdx.x >> 5]; }
template <typename T> T exch(T v, int src_lane) {
    uint64_t bits = 0; std::memcpy(&bits, &v, sizeof(T));
    unsigned base = threadIdx.x & ~31u;
    g_slots[threadIdx.x] = bits;
    wbar().arrive_and_wait();
    uint64_t o = g_slots[base + src_lane];
    wbar().arrive_and_wait();
    T r; std::memcpy(&r, &o, sizeof(T)); return r;
}
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned off) {
    unsigned l = lane_id(); return exch(v, l + off < 32 ? l + off : l);
}
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned off) {
    unsigned l = lane_id(); return exch(v, l >= off ? l - off : l);
}
template <typename T> T __shfl_xor_sync(unsigned, T v, unsigned off) { return exch(v, lane_id() ^ off); }
template <typename T> T __shfl_sync(unsigned, T v, int src) { return exch(v, src & 31); }
inline unsigned __match_any_sync(unsigned, unsigned v) {
    unsigned base = threadIdx.x & ~31u;
    g_slots[threadIdx.x] = v;
    wbar().arrive_and_wait();
    unsigned m = 0;
    for (int i = 0; i < 32; i++) if ((unsigned)g_slots[base + i] == v) m |= 1u << i;
    wbar().arrive_and_wait();
    return m;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
template <typename F> void launch(unsigned grid, unsigned block, F f) {
    blockDim.x = block; gridDim.x = grid;
    std::barrier<> bb(block); g_block_bar = &bb;
    std::vector<std::barrier<> *> wb;
    for (unsigned w = 0; w < block / 32; w++) wb.push_back(new std::barrier<>(32));
    g_warp_bar = wb;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; t++)
        ts.emplace_back([&, t] {
            threadIdx.x = t;
            for (unsigned b = 0; b < grid; b++) { blockIdx.x = b; f(); bb.arrive_and_wait(); }
        });
    for (auto &t : ts) t.join();
    for (auto p : wb) delete p;
}
