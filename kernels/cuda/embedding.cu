// Embedding primitives of nmpsim-kernels in CUDA C (compiled at run time by
// NVRTC; self-contained: no headers, no CUB / thrust).
//
// Kernels (every one `extern "C"`, names listed in `KERNEL_NAMES` of
// kernels/src/cuda/backend/mod.rs):
//   gather-reduce          nmpsim_gather_reduce_{vec4,scalar}, and for every table of a
//                          batch in one launch nmpsim_gather_reduce_tables_{vec4,scalar}
//   expand                 nmpsim_expand_{vec4,scalar}
//   index helpers          nmpsim_bag_ids, nmpsim_iota
//   exclusive / inclusive  nmpsim_scan_reduce, nmpsim_scan_blocks, nmpsim_scan_apply
//   radix sort pass        nmpsim_radix_histogram, nmpsim_radix_scatter
//   segments of a sort     nmpsim_head_flags, nmpsim_segments
//   coalesce accumulate    nmpsim_coalesce_accumulate_*, nmpsim_coalesce_long_pieces_*,
//                          nmpsim_segment_combine_long_* ({vec4,scalar})
//   tensor casting         nmpsim_cast_permute, nmpsim_cast_mean_scale
//   casted gather-reduce   nmpsim_casted_gather_reduce_*, nmpsim_casted_long_pieces_*,
//                          nmpsim_segment_combine_long_* ({vec4,scalar})
//   scatter + optimizer    nmpsim_scatter_update_{vec4,scalar}
//   bench table fill       nmpsim_fill_uniform
//   stream hold            nmpsim_hold
//   Eff-TT tables          nmpsim_tt_prefix, nmpsim_tt_pool, nmpsim_tt_grad_prefix,
//                          nmpsim_tt_grad_first, nmpsim_tt_grad_last, nmpsim_tt_reduce
//                          (the last section)
//
// Conventions: sizes are 64-bit (`u64`), row ids and lookup positions 32-bit
// (the crate refuses batches of 2^32 or more lookups). Row offsets are always
// computed in 64 bits (`(u64)row * dimv`). Every kernel uses a grid-stride
// loop, so any grid size is correct. "vec4" kernels see rows as float4 and
// are launched only when dim % 4 == 0 (rows are then 16-byte aligned);
// `dimv` is the row length in vector elements (dim / 4 or dim).
//
// Rounding: the backward kernels use explicit round-to-nearest intrinsics
// (__fmul_rn, __fadd_rn, ...) so the compiler cannot contract a multiply and
// an add into an FMA: expand + coalesce and the casted gather-reduce must
// agree bit for bit, as on the CPU, and the expand must equal the f32
// product `scale * grad` exactly.

typedef unsigned int u32;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu

// Pooling modes, as `Pooling` in kernels/src/pooling.rs.
#define POOL_SUM 0
#define POOL_MEAN 1
#define POOL_WEIGHTED 2

// Optimizer kinds, as `Optimizer` in kernels/src/optimizer.rs.
#define OPT_SGD 0
#define OPT_ADAGRAD 1
#define OPT_ROWWISE_ADAGRAD 2
#define OPT_RMSPROP 3

// Radix sort: 8-bit digits, 256-thread blocks, 8 items per thread per tile.
#define RADIX_BITS 8
#define RADIX 256
#define BLOCK 256
#define ITEMS 8
#define TILE (BLOCK * ITEMS)
#define WARPS (BLOCK / 32)

__device__ __forceinline__ u64 global_thread() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ u64 grid_threads() {
    return (u64)gridDim.x * blockDim.x;
}

// Lanes that share one row: the smallest power of two >= dimv, at most 32.
__device__ __forceinline__ u32 lanes_for(u64 dimv) {
    u32 l = 1;
    while (l < 32u && (u64)l < dimv) l <<= 1;
    return l;
}

__device__ __forceinline__ u32 umax32(u32 a, u32 b) { return a > b ? a : b; }

// ---- element helpers, overloaded for float and float4 ----------------------

__device__ __forceinline__ void vzero(float &a) { a = 0.0f; }
__device__ __forceinline__ void vzero(float4 &a) { a = make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

// a += b
__device__ __forceinline__ void vadd(float &a, float b) { a = __fadd_rn(a, b); }
__device__ __forceinline__ void vadd(float4 &a, float4 b) {
    a.x = __fadd_rn(a.x, b.x);
    a.y = __fadd_rn(a.y, b.y);
    a.z = __fadd_rn(a.z, b.z);
    a.w = __fadd_rn(a.w, b.w);
}

// s * b, rounded
__device__ __forceinline__ float vmul(float s, float b) { return __fmul_rn(s, b); }
__device__ __forceinline__ float4 vmul(float s, float4 b) {
    return make_float4(__fmul_rn(s, b.x), __fmul_rn(s, b.y), __fmul_rn(s, b.z), __fmul_rn(s, b.w));
}

// a += s * b with the product rounded first (no FMA), as expand then coalesce.
__device__ __forceinline__ void vaxpy(float &a, float s, float b) { a = __fadd_rn(a, __fmul_rn(s, b)); }
__device__ __forceinline__ void vaxpy(float4 &a, float s, float4 b) { vadd(a, vmul(s, b)); }

// a / d, correctly rounded
__device__ __forceinline__ void vdiv(float &a, float d) { a = __fdiv_rn(a, d); }
__device__ __forceinline__ void vdiv(float4 &a, float d) {
    a.x = __fdiv_rn(a.x, d);
    a.y = __fdiv_rn(a.y, d);
    a.z = __fdiv_rn(a.z, d);
    a.w = __fdiv_rn(a.w, d);
}

// a += (value of lane + off); every lane of the warp must call it.
__device__ __forceinline__ void vshfl_add(float &a, u32 off) {
    a += __shfl_down_sync(FULL_MASK, a, off);
}
__device__ __forceinline__ void vshfl_add(float4 &a, u32 off) {
    a.x += __shfl_down_sync(FULL_MASK, a.x, off);
    a.y += __shfl_down_sync(FULL_MASK, a.y, off);
    a.z += __shfl_down_sync(FULL_MASK, a.z, off);
    a.w += __shfl_down_sync(FULL_MASK, a.w, off);
}

// sum of squares of the components
__device__ __forceinline__ float vsumsq(float a) { return __fmul_rn(a, a); }
__device__ __forceinline__ float vsumsq(float4 a) {
    return __fmul_rn(a.x, a.x) + __fmul_rn(a.y, a.y) + __fmul_rn(a.z, a.z) + __fmul_rn(a.w, a.w);
}

// ---- gather-reduce (forward) ------------------------------------------------
//
// GR_WARPS warps per bag (a block of BLOCK threads holds BLOCK / 32 / GR_WARPS
// bags), so that even one table's batch fills the device with loads in
// flight. Each warp splits into G = 32 / L groups of L lanes (L = smallest
// power of two >= dimv, at most 32); lane l of group g of warp w adds column
// l (+ L, ...) of lookups s + w*G + g, then every GR_WARPS*G-th after it.
// With dim 64 (16 float4) eight lookups of a bag are in flight per step.
// The groups of a warp are summed with shuffles, the warps of a bag in
// shared memory, in a fixed order: the result does not depend on timing.

#define GR_WARPS 4u

// `block` of `blocks` (the grid, or the blocks given to one table in the
// table-batched launch) strides over the bags.
template <typename V>
__device__ void gather_reduce_impl(const V *__restrict__ table, u64 dimv,
                                   const u32 *__restrict__ indices,
                                   const u32 *__restrict__ offsets,
                                   const float *__restrict__ weights, u64 bags, int mode,
                                   V *__restrict__ out, u64 block, u64 blocks) {
    __shared__ float4 gr_part[BLOCK];
    V *part = reinterpret_cast<V *>(gr_part);
    const u32 lane = threadIdx.x & 31u;
    const u32 wib = threadIdx.x >> 5;
    const u32 per_block = (BLOCK / 32u) / GR_WARPS;
    const u32 slot = wib / GR_WARPS;
    const u32 w = wib % GR_WARPS;
    const u32 L = lanes_for(dimv);
    const u32 G = 32u / L;
    const u32 g = lane / L;
    const u32 l = lane % L;
    const u32 step = GR_WARPS * G;
    // The loop is uniform over the block: every thread reaches every
    // shuffle and barrier.
    for (u64 first = block * per_block; first < bags; first += blocks * per_block) {
        const u64 bag = first + slot;
        const bool has = bag < bags;
        const u32 s = has ? offsets[bag] : 0u;
        const u32 e = has ? offsets[bag + 1] : 0u;
        for (u64 c0 = 0; c0 < dimv; c0 += L) {
            const u64 c = c0 + l;
            const bool valid = c < dimv;
            V acc;
            vzero(acc);
            if (valid) {
                if (mode == POOL_WEIGHTED) {
#pragma unroll 8
                    for (u64 i = (u64)s + w * G + g; i < e; i += step) {
                        const u64 r = indices[i];
                        vaxpy(acc, weights[i], table[r * dimv + c]);
                    }
                } else {
#pragma unroll 8
                    for (u64 i = (u64)s + w * G + g; i < e; i += step) {
                        const u64 r = indices[i];
                        vadd(acc, table[r * dimv + c]);
                    }
                }
            }
            for (u32 off = 16; off >= L; off >>= 1) {
                vshfl_add(acc, off);
            }
            if (g == 0) part[wib * 32u + l] = acc;
            __syncthreads();
            if (w == 0 && g == 0 && valid && has) {
                V tot = part[(slot * GR_WARPS) * 32u + l];
                for (u32 q = 1; q < GR_WARPS; q++) vadd(tot, part[(slot * GR_WARPS + q) * 32u + l]);
                if (mode == POOL_MEAN && e > s) vdiv(tot, (float)(e - s));
                out[bag * dimv + c] = tot;
            }
            __syncthreads();
        }
    }
}

extern "C" __global__ void nmpsim_gather_reduce_vec4(const float4 *__restrict__ table, u64 dimv,
                                                     const u32 *__restrict__ indices,
                                                     const u32 *__restrict__ offsets,
                                                     const float *__restrict__ weights, u64 bags,
                                                     int mode, float4 *__restrict__ out) {
    gather_reduce_impl<float4>(table, dimv, indices, offsets, weights, bags, mode, out, blockIdx.x,
                               gridDim.x);
}

extern "C" __global__ void nmpsim_gather_reduce_scalar(const float *__restrict__ table, u64 dimv,
                                                       const u32 *__restrict__ indices,
                                                       const u32 *__restrict__ offsets,
                                                       const float *__restrict__ weights, u64 bags,
                                                       int mode, float *__restrict__ out) {
    gather_reduce_impl<float>(table, dimv, indices, offsets, weights, bags, mode, out, blockIdx.x,
                              gridDim.x);
}

// Table-batched gather-reduce: one launch for every table of a batch (same
// dimv and pooling), so that one table's bags need not fill the device and
// no launch waits for the last blocks of the one before. `desc` holds
// GR_DESC u64 per table: the table, indices, offsets, weights and output
// pointers and the table's bag count. Blocks [t * per_table, (t + 1) *
// per_table) work on table t; each table's result is the single-table
// kernel's, bit for bit.
#define GR_DESC 6u

template <typename V>
__device__ void gather_reduce_tables_impl(const u64 *__restrict__ desc, u64 tables,
                                          u64 per_table, u64 dimv, int mode) {
    const u64 t = blockIdx.x / per_table;
    if (t >= tables) return;  // whole blocks: no barrier is skipped by part of one
    const u64 *d = desc + t * GR_DESC;
    gather_reduce_impl<V>(reinterpret_cast<const V *>(d[0]), dimv,
                          reinterpret_cast<const u32 *>(d[1]),
                          reinterpret_cast<const u32 *>(d[2]),
                          reinterpret_cast<const float *>(d[3]), d[5], mode,
                          reinterpret_cast<V *>(d[4]), blockIdx.x % per_table, per_table);
}

extern "C" __global__ void nmpsim_gather_reduce_tables_vec4(const u64 *__restrict__ desc,
                                                            u64 tables, u64 per_table, u64 dimv,
                                                            int mode) {
    gather_reduce_tables_impl<float4>(desc, tables, per_table, dimv, mode);
}

extern "C" __global__ void nmpsim_gather_reduce_tables_scalar(const u64 *__restrict__ desc,
                                                              u64 tables, u64 per_table, u64 dimv,
                                                              int mode) {
    gather_reduce_tables_impl<float>(desc, tables, per_table, dimv, mode);
}

// ---- stream hold ---------------------------------------------------------------
//
// One thread that keeps its stream busy until the host writes `gen` into
// flag[0] (by a copy on another stream) or `max_ns` nanoseconds of the
// device clock have passed, then writes flag[1] = gen (released by the
// host) or 0 (timed out). Each hold has a new `gen`, so a release that lands
// before the kernel starts still counts, and an old one never does.
// Launched before a timed sequence, it holds the stream while the host
// enqueues the sequence, which then runs back to back. (Not in the CPU
// check: it needs the device's clock.)
#ifdef __CUDACC_RTC__
extern "C" __global__ void nmpsim_hold(volatile u32 *flag, u32 gen, u64 max_ns) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    u64 t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    u64 now = t0;
    while (flag[0] != gen && now - t0 < max_ns) {
        __nanosleep(500u);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    }
    flag[1] = flag[0] == gen ? gen : 0u;
}
#endif

// ---- index helpers -----------------------------------------------------------

// dst[i] = bag of lookup i (one warp per bag).
extern "C" __global__ void nmpsim_bag_ids(const u32 *__restrict__ offsets, u64 bags,
                                          u32 *__restrict__ dst) {
    const u32 lane = threadIdx.x & 31u;
    const u64 warp = global_thread() >> 5;
    const u64 nwarps = grid_threads() >> 5;
    for (u64 b = warp; b < bags; b += nwarps) {
        const u32 s = offsets[b];
        const u32 e = offsets[b + 1];
        for (u64 i = (u64)s + lane; i < e; i += 32u) dst[i] = (u32)b;
    }
}

// out[i] = i
extern "C" __global__ void nmpsim_iota(u32 *__restrict__ out, u64 n) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) out[i] = (u32)i;
}

// ---- expand (backward, before coalescing) ------------------------------------

// out[i] = scale_i * grad_out[dst[i]], one thread per output element.
template <typename V>
__device__ void expand_impl(const V *__restrict__ grad_out, u64 dimv, const u32 *__restrict__ dst,
                            const u32 *__restrict__ offsets, const float *__restrict__ weights,
                            u64 n, int mode, V *__restrict__ out) {
    const u64 total = n * dimv;
    for (u64 t = global_thread(); t < total; t += grid_threads()) {
        const u64 i = t / dimv;
        const u64 c = t - i * dimv;
        const u32 b = dst[i];
        const V gv = grad_out[(u64)b * dimv + c];
        if (mode == POOL_SUM) {
            out[t] = gv;
        } else {
            float s;
            if (mode == POOL_MEAN) {
                s = __fdiv_rn(1.0f, (float)umax32(offsets[b + 1] - offsets[b], 1u));
            } else {
                s = weights[i];
            }
            out[t] = vmul(s, gv);
        }
    }
}

extern "C" __global__ void nmpsim_expand_vec4(const float4 *__restrict__ grad_out, u64 dimv,
                                              const u32 *__restrict__ dst,
                                              const u32 *__restrict__ offsets,
                                              const float *__restrict__ weights, u64 n, int mode,
                                              float4 *__restrict__ out) {
    expand_impl<float4>(grad_out, dimv, dst, offsets, weights, n, mode, out);
}

extern "C" __global__ void nmpsim_expand_scalar(const float *__restrict__ grad_out, u64 dimv,
                                                const u32 *__restrict__ dst,
                                                const u32 *__restrict__ offsets,
                                                const float *__restrict__ weights, u64 n, int mode,
                                                float *__restrict__ out) {
    expand_impl<float>(grad_out, dimv, dst, offsets, weights, n, mode, out);
}

// ---- scan (u32, wrapping) ----------------------------------------------------
//
// Three kernels: per-tile sums, an exclusive scan of the tile sums in one
// block, then each tile scans itself from its offset. Launch all with
// BLOCK threads; the tile of block k is elements [k * TILE, (k + 1) * TILE).

// Exclusive scan of one value per thread over the block; `*total` gets the
// block's sum. Every thread of the block must call it. blockDim.x must be a
// multiple of 32, at most 1024.
__device__ u32 block_exclusive_scan(u32 v, u32 *total) {
    __shared__ u32 warp_sums[33];
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 nw = blockDim.x >> 5;
    u32 x = v;
    for (u32 off = 1; off < 32u; off <<= 1) {
        const u32 y = __shfl_up_sync(FULL_MASK, x, off);
        if (lane >= off) x += y;
    }
    if (lane == 31u) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        const u32 w = lane < nw ? warp_sums[lane] : 0u;
        u32 wi = w;
        for (u32 off = 1; off < 32u; off <<= 1) {
            const u32 y = __shfl_up_sync(FULL_MASK, wi, off);
            if (lane >= off) wi += y;
        }
        warp_sums[lane] = wi - w;
        if (lane == 31u) warp_sums[32] = wi;
    }
    __syncthreads();
    const u32 result = warp_sums[warp] + x - v;
    *total = warp_sums[32];
    __syncthreads(); // warp_sums is reused by the next call
    return result;
}

// sums[k] = sum of tile k of `in`.
extern "C" __global__ void nmpsim_scan_reduce(const u32 *__restrict__ in, u64 n,
                                              u32 *__restrict__ sums, u64 tiles) {
    for (u64 k = blockIdx.x; k < tiles; k += gridDim.x) {
        const u64 base = k * TILE;
        u32 v = 0;
        for (u32 j = 0; j < ITEMS; j++) {
            const u64 i = base + (u64)j * BLOCK + threadIdx.x;
            if (i < n) v += in[i];
        }
        u32 total;
        block_exclusive_scan(v, &total);
        if (threadIdx.x == 0) sums[k] = total;
    }
}

// In place, exclusive scan of `sums[0..tiles)`; launch with ONE block.
extern "C" __global__ void nmpsim_scan_blocks(u32 *sums, u64 tiles) {
    if (blockIdx.x != 0) return;
    u32 carry = 0;
    for (u64 base = 0; base < tiles; base += blockDim.x) {
        const u64 i = base + threadIdx.x;
        const u32 v = i < tiles ? sums[i] : 0u;
        u32 total;
        const u32 ex = block_exclusive_scan(v, &total);
        if (i < tiles) sums[i] = carry + ex;
        carry += total;
    }
}

// out[i] = tile_offsets[tile] + scan within the tile; inclusive if asked.
// `in` and `out` may be the same array.
extern "C" __global__ void nmpsim_scan_apply(const u32 *in, u32 *out, u64 n,
                                             const u32 *__restrict__ tile_offsets, u64 tiles,
                                             int inclusive) {
    for (u64 k = blockIdx.x; k < tiles; k += gridDim.x) {
        u32 carry = tile_offsets[k];
        const u64 base = k * TILE;
        for (u32 j = 0; j < ITEMS; j++) {
            const u64 i = base + (u64)j * BLOCK + threadIdx.x;
            const u32 v = i < n ? in[i] : 0u;
            u32 total;
            const u32 ex = block_exclusive_scan(v, &total);
            if (i < n) out[i] = carry + ex + (inclusive ? v : 0u);
            carry += total;
        }
    }
}

// ---- radix sort pass (stable LSD, 8-bit digits) -------------------------------
//
// Pass over bits [shift, shift + 8) of the keys: histogram of each tile's
// digits, stored digit-major (hist[d * tiles + k]) so that an exclusive scan
// of the whole array gives tile k's first output slot for digit d (all
// smaller digits, then digit d of the earlier tiles); then each tile scatters
// its pairs in order. Launch both with BLOCK (= RADIX) threads and exactly
// `tiles` blocks.

extern "C" __global__ void nmpsim_radix_histogram(const u32 *__restrict__ keys, u64 n, u32 shift,
                                                  u32 *__restrict__ hist, u64 tiles) {
    __shared__ u32 h[RADIX];
    const u64 k = blockIdx.x;
    if (k >= tiles) return;
    h[threadIdx.x] = 0;
    __syncthreads();
    const u64 base = k * TILE;
    for (u32 j = 0; j < ITEMS; j++) {
        const u64 i = base + (u64)j * BLOCK + threadIdx.x;
        if (i < n) atomicAdd(&h[(keys[i] >> shift) & (RADIX - 1)], 1u);
    }
    __syncthreads();
    hist[(u64)threadIdx.x * tiles + k] = h[threadIdx.x];
}

extern "C" __global__ void nmpsim_radix_scatter(const u32 *__restrict__ keys_in,
                                                const u32 *__restrict__ vals_in, u64 n, u32 shift,
                                                const u32 *__restrict__ hist_scanned, u64 tiles,
                                                u32 *__restrict__ keys_out,
                                                u32 *__restrict__ vals_out) {
    __shared__ u32 s_base[RADIX];
    __shared__ u32 s_warp[WARPS][RADIX];
    const u64 k = blockIdx.x;
    if (k >= tiles) return;
    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    s_base[tid] = hist_scanned[(u64)tid * tiles + k];
    const u64 base = k * TILE;
    for (u32 j = 0; j < ITEMS; j++) {
        for (u32 x = tid; x < WARPS * RADIX; x += BLOCK) (&s_warp[0][0])[x] = 0;
        __syncthreads();
        // Elements in index order: sub-chunk j, then warp, then lane.
        const u64 i = base + (u64)j * BLOCK + tid;
        const bool valid = i < n;
        const u32 key = valid ? keys_in[i] : 0u;
        const u32 val = valid ? vals_in[i] : 0u;
        const u32 digit = valid ? ((key >> shift) & (RADIX - 1)) : 0xffffffffu;
        const u32 peers = __match_any_sync(FULL_MASK, digit);
        const u32 rank = __popc(peers & ((1u << lane) - 1u));
        const u32 leader = 31u - __clz(peers);
        if (valid && lane == leader) s_warp[warp][digit] = __popc(peers);
        __syncthreads();
        // Thread `tid` owns digit `tid`: exclusive scan over the warps.
        u32 run = 0;
        for (u32 w = 0; w < WARPS; w++) {
            const u32 c = s_warp[w][tid];
            s_warp[w][tid] = run;
            run += c;
        }
        __syncthreads();
        if (valid) {
            const u32 pos = s_base[digit] + s_warp[warp][digit] + rank;
            keys_out[pos] = key;
            vals_out[pos] = val;
        }
        __syncthreads();
        s_base[tid] += run;
        // The next sub-chunk's __syncthreads orders this before any read.
    }
}

// ---- segments of a sorted key array -------------------------------------------

// flags[i] = 1 where a run of equal keys starts.
extern "C" __global__ void nmpsim_head_flags(const u32 *__restrict__ sorted, u64 n,
                                             u32 *__restrict__ flags) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        flags[i] = (i == 0 || sorted[i] != sorted[i - 1]) ? 1u : 0u;
    }
}

// From the inclusive scan of the head flags: seg[i] = run number of i
// (Alg. 2's casted_dst), unique[r] = key of run r, starts[r] = first i of run
// r, starts[runs] = n.
extern "C" __global__ void nmpsim_segments(const u32 *__restrict__ sorted,
                                           const u32 *__restrict__ flags,
                                           const u32 *__restrict__ inclusive, u64 n,
                                           u32 *__restrict__ seg, u32 *__restrict__ unique,
                                           u32 *__restrict__ starts) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u32 d = inclusive[i] - 1u;
        seg[i] = d;
        if (flags[i]) {
            unique[d] = sorted[i];
            starts[d] = (u32)i;
        }
        if (i == n - 1) starts[d + 1] = (u32)n;
    }
}

// ---- coalesce accumulate / casted gather-reduce --------------------------------
//
// Both sum, for every unique row u, the values of sorted positions
// starts[u] .. starts[u+1] (coalesce: expanded gradient rows in sorted order;
// casted: scale * output-gradient rows, the product rounded as expand rounds
// it). Work is spread over groups of L lanes (L = smallest power of two >=
// dimv, at most 32; lane l owns columns l, l + L, ...).
//
// - A short segment (at most SHORT_SEG positions) is added by one group in
//   sorted (= original: the sort is stable) order (step 1).
// - A hot row of a skewed batch can own a large share of all lookups, so a
//   long segment is listed by step 1 and cut by fixed chunks of SEG_CHUNK
//   sorted positions:
//   2. (*_long_pieces; nothing to do when step 1 listed none) one group per
//      chunk adds, in order, the piece of the segment that began before the
//      chunk (stored as partial[2k], "first") and the piece of the one that
//      goes on past it (partial[2k + 1], "last"; a segment covering the
//      chunk: both). Only these two segments of a chunk can be long, as
//      SHORT_SEG >= SEG_CHUNK;
//   3. (nmpsim_segment_combine_long_*) a block per listed segment adds its
//      pieces in a fixed tree order.
//
// Coalesce and the casted gather-reduce share this code and so perform the
// same f32 operations in the same order: their results are bit-identical.
// The host zeroes the long-segment count before step 1.

#define SEG_CHUNK 16u
#define SHORT_SEG 32u

// Expanded gradient row at sorted position j (coalesce).
template <typename V> struct CoalesceLoad {
    const V *__restrict__ grads;
    const u32 *__restrict__ sorted_pos;
    u64 dimv;
    __device__ __forceinline__ V operator()(u32 j, u64 c) const {
        return grads[(u64)sorted_pos[j] * dimv + c];
    }
};

// scale[j] * output-gradient row of the bag of sorted position j (casted).
template <typename V> struct CastedLoad {
    const V *__restrict__ grad_out;
    const u32 *__restrict__ casted_src;
    const float *__restrict__ scale;
    int scaled;
    u64 dimv;
    __device__ __forceinline__ V operator()(u32 j, u64 c) const {
        const V g = grad_out[(u64)casted_src[j] * dimv + c];
        return scaled ? vmul(scale[j], g) : g;
    }
};

// Step 2: the pieces of long segments, chunk by chunk. `seg` is the segment
// of every sorted position.
template <typename V, typename Load>
__device__ void long_pieces(const Load load, u64 dimv, const u32 *__restrict__ seg,
                            const u32 *__restrict__ starts, u64 n, V *__restrict__ partial,
                            const u32 *__restrict__ long_count) {
    const u32 L = lanes_for(dimv);
    const u32 l = threadIdx.x % L;
    const u64 group = global_thread() / L;
    const u64 groups = grid_threads() / L;
    const u64 chunks = (n + SEG_CHUNK - 1) / SEG_CHUNK;
    if (*long_count == 0u) return;
    for (u64 k = group; k < chunks; k += groups) {
        const u32 p0 = (u32)(k * SEG_CHUNK);
        const u32 p1 = (u32)((u64)p0 + SEG_CHUNK < n ? (u64)p0 + SEG_CHUNK : n);
        const u64 ua = seg[p0];
        const u64 ub = seg[p1 - 1];
        const u32 sa = starts[ua], ea = starts[ua + 1];
        const u32 sb = starts[ub], eb = starts[ub + 1];
        const bool long_a = ea - sa > SHORT_SEG;
        const bool long_b = ub != ua && eb - sb > SHORT_SEG;
        if (!long_a && !long_b) continue;
        for (u64 c = l; c < dimv; c += L) {
            if (long_a) {
                // Segment ua: from p0 (or its start) to its end or p1.
                const u32 from = sa > p0 ? sa : p0;
                const u32 to = ea < p1 ? ea : p1;
                V acc;
                vzero(acc);
#pragma unroll 16
                for (u32 j = from; j < to; j++) vadd(acc, load(j, c));
                if (sa < p0) partial[(2 * k) * dimv + c] = acc;
                if (ea > p1) partial[(2 * k + 1) * dimv + c] = acc;
            }
            if (long_b) {
                // Segment ub began inside the chunk and goes on past it.
                V acc;
                vzero(acc);
#pragma unroll 16
                for (u32 j = sb; j < p1; j++) vadd(acc, load(j, c));
                partial[(2 * k + 1) * dimv + c] = acc;
            }
        }
    }
}

// Step 1: short segments whole; long ones listed.
template <typename V, typename Load>
__device__ void segment_sums(const Load load, u64 dimv, const u32 *__restrict__ starts,
                             u64 unique, V *__restrict__ out, u32 *__restrict__ long_count,
                             u32 *__restrict__ long_list) {
    const u32 L = lanes_for(dimv);
    const u32 l = threadIdx.x % L;
    const u64 group = global_thread() / L;
    const u64 groups = grid_threads() / L;
    for (u64 u = group; u < unique; u += groups) {
        const u32 s = starts[u];
        const u32 e = starts[u + 1];
        if (e - s > SHORT_SEG) {
            if (l == 0) long_list[atomicAdd(long_count, 1u)] = (u32)u;
            continue;
        }
        for (u64 c = l; c < dimv; c += L) {
            V acc;
            vzero(acc);
            for (u32 j = s; j < e; j++) vadd(acc, load(j, c));
            out[u * dimv + c] = acc;
        }
    }
}

// Step 3: a block per listed segment. Its pieces x_0 = last of the first
// chunk, x_i = first of chunk ka + i: sub-group j of the block (S = BLOCK / L
// of them) adds x_j, x_{j+S}, ... in order, then sub-group 0 adds the S sums
// in order. The order is fixed, whatever the list's order.
template <typename V>
__device__ void combine_long_impl(u64 dimv, const u32 *__restrict__ starts,
                                  const V *__restrict__ partial, V *__restrict__ out,
                                  const u32 *__restrict__ long_count,
                                  const u32 *__restrict__ long_list) {
    __shared__ float4 cl_part[BLOCK];
    V *part = reinterpret_cast<V *>(cl_part);
    const u32 L = lanes_for(dimv);
    const u32 S = BLOCK / L;
    const u32 j = threadIdx.x / L;
    const u32 l = threadIdx.x % L;
    const u32 count = *long_count;
    for (u64 i = blockIdx.x; i < count; i += gridDim.x) {
        const u64 u = long_list[i];
        const u64 ka = starts[u] / SEG_CHUNK;
        const u64 m = (starts[u + 1] - 1) / SEG_CHUNK - ka;
        for (u64 c0 = 0; c0 < dimv; c0 += L) {
            const u64 c = c0 + l;
            const bool valid = c < dimv;
            V acc;
            vzero(acc);
            if (valid) {
#pragma unroll 4
                for (u64 x = j; x <= m; x += S) {
                    vadd(acc, x == 0 ? partial[(2 * ka + 1) * dimv + c]
                                     : partial[(2 * (ka + x)) * dimv + c]);
                }
            }
            part[threadIdx.x] = acc;
            __syncthreads();
            if (j == 0 && valid) {
                V tot = part[l];
                for (u32 q = 1; q < S; q++) vadd(tot, part[q * L + l]);
                out[u * dimv + c] = tot;
            }
            __syncthreads();
        }
    }
}

#define COALESCE_ARGS(V)                                                                    \
    const V *__restrict__ grads, u64 dimv, const u32 *__restrict__ sorted_pos
#define CASTED_ARGS(V)                                                                      \
    const V *__restrict__ grad_out, u64 dimv, const u32 *__restrict__ casted_src,           \
        const float *__restrict__ scale, int scaled

extern "C" __global__ void nmpsim_coalesce_long_pieces_vec4(
    COALESCE_ARGS(float4), const u32 *__restrict__ seg, const u32 *__restrict__ starts, u64 n,
    float4 *__restrict__ partial, const u32 *__restrict__ long_count) {
    long_pieces<float4>(CoalesceLoad<float4>{grads, sorted_pos, dimv}, dimv, seg, starts, n,
                        partial, long_count);
}

extern "C" __global__ void nmpsim_coalesce_long_pieces_scalar(
    COALESCE_ARGS(float), const u32 *__restrict__ seg, const u32 *__restrict__ starts, u64 n,
    float *__restrict__ partial, const u32 *__restrict__ long_count) {
    long_pieces<float>(CoalesceLoad<float>{grads, sorted_pos, dimv}, dimv, seg, starts, n,
                       partial, long_count);
}

extern "C" __global__ void nmpsim_casted_long_pieces_vec4(
    CASTED_ARGS(float4), const u32 *__restrict__ seg, const u32 *__restrict__ starts, u64 n,
    float4 *__restrict__ partial, const u32 *__restrict__ long_count) {
    long_pieces<float4>(CastedLoad<float4>{grad_out, casted_src, scale, scaled, dimv}, dimv,
                        seg, starts, n, partial, long_count);
}

extern "C" __global__ void nmpsim_casted_long_pieces_scalar(
    CASTED_ARGS(float), const u32 *__restrict__ seg, const u32 *__restrict__ starts, u64 n,
    float *__restrict__ partial, const u32 *__restrict__ long_count) {
    long_pieces<float>(CastedLoad<float>{grad_out, casted_src, scale, scaled, dimv}, dimv, seg,
                       starts, n, partial, long_count);
}

extern "C" __global__ void nmpsim_coalesce_accumulate_vec4(
    COALESCE_ARGS(float4), const u32 *__restrict__ starts, u64 unique, float4 *__restrict__ out,
    u32 *__restrict__ long_count, u32 *__restrict__ long_list) {
    segment_sums<float4>(CoalesceLoad<float4>{grads, sorted_pos, dimv}, dimv, starts, unique, out, long_count, long_list);
}

extern "C" __global__ void nmpsim_coalesce_accumulate_scalar(
    COALESCE_ARGS(float), const u32 *__restrict__ starts, u64 unique, float *__restrict__ out,
    u32 *__restrict__ long_count, u32 *__restrict__ long_list) {
    segment_sums<float>(CoalesceLoad<float>{grads, sorted_pos, dimv}, dimv, starts, unique, out, long_count, long_list);
}

extern "C" __global__ void nmpsim_casted_gather_reduce_vec4(
    CASTED_ARGS(float4), const u32 *__restrict__ starts, u64 unique, float4 *__restrict__ out,
    u32 *__restrict__ long_count, u32 *__restrict__ long_list) {
    segment_sums<float4>(CastedLoad<float4>{grad_out, casted_src, scale, scaled, dimv}, dimv, starts, unique, out, long_count, long_list);
}

extern "C" __global__ void nmpsim_casted_gather_reduce_scalar(
    CASTED_ARGS(float), const u32 *__restrict__ starts, u64 unique, float *__restrict__ out,
    u32 *__restrict__ long_count, u32 *__restrict__ long_list) {
    segment_sums<float>(CastedLoad<float>{grad_out, casted_src, scale, scaled, dimv}, dimv, starts, unique, out, long_count, long_list);
}

extern "C" __global__ void nmpsim_segment_combine_long_vec4(
    u64 dimv, const u32 *__restrict__ starts, const float4 *__restrict__ partial,
    float4 *__restrict__ out, const u32 *__restrict__ long_count,
    const u32 *__restrict__ long_list) {
    combine_long_impl<float4>(dimv, starts, partial, out, long_count, long_list);
}

extern "C" __global__ void nmpsim_segment_combine_long_scalar(
    u64 dimv, const u32 *__restrict__ starts, const float *__restrict__ partial,
    float *__restrict__ out, const u32 *__restrict__ long_count,
    const u32 *__restrict__ long_list) {
    combine_long_impl<float>(dimv, starts, partial, out, long_count, long_list);
}

// ---- tensor casting helpers -----------------------------------------------------

// Weighted sum: the sort carried positions; casted_src[i] = dst[pos[i]] and
// scale[i] = weights[pos[i]].
extern "C" __global__ void nmpsim_cast_permute(const u32 *__restrict__ pos,
                                               const u32 *__restrict__ dst,
                                               const float *__restrict__ weights, u64 n,
                                               u32 *__restrict__ casted_src,
                                               float *__restrict__ scale) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u32 p = pos[i];
        casted_src[i] = dst[p];
        scale[i] = weights[p];
    }
}

// Mean: scale[i] = 1 / len(bag casted_src[i]), as `lookup_scale`.
extern "C" __global__ void nmpsim_cast_mean_scale(const u32 *__restrict__ casted_src,
                                                  const u32 *__restrict__ offsets, u64 n,
                                                  float *__restrict__ scale) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        const u32 b = casted_src[i];
        scale[i] = __fdiv_rn(1.0f, (float)umax32(offsets[b + 1] - offsets[b], 1u));
    }
}

// ---- scatter with an optimizer ---------------------------------------------------
//
// Rows are unique (strictly ascending), so no two groups touch one row. The
// formulas and their f32 operation order are those of `update_row` in
// kernels/src/optimizer.rs. State: `dim` values per row (Adagrad, RMSprop),
// one (row-wise Adagrad), none (SGD; `state` is then a dummy).

__device__ __forceinline__ void update_elem(int kind, float &w, float &a, float g, float lr,
                                            float eps, float alpha) {
    if (kind == OPT_SGD) {
        w = __fsub_rn(w, __fmul_rn(lr, g));
    } else if (kind == OPT_ADAGRAD) {
        a = __fadd_rn(a, __fmul_rn(g, g));
        w = __fsub_rn(w, __fdiv_rn(__fmul_rn(lr, g), __fadd_rn(__fsqrt_rn(a), eps)));
    } else { // OPT_RMSPROP
        a = __fadd_rn(__fmul_rn(alpha, a), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, alpha), g), g));
        w = __fsub_rn(w, __fdiv_rn(__fmul_rn(lr, g), __fsqrt_rn(__fadd_rn(eps, a))));
    }
}

__device__ __forceinline__ void update_vec(int kind, float &w, float &a, float g, float lr,
                                           float eps, float alpha) {
    update_elem(kind, w, a, g, lr, eps, alpha);
}
__device__ __forceinline__ void update_vec(int kind, float4 &w, float4 &a, float4 g, float lr,
                                           float eps, float alpha) {
    update_elem(kind, w.x, a.x, g.x, lr, eps, alpha);
    update_elem(kind, w.y, a.y, g.y, lr, eps, alpha);
    update_elem(kind, w.z, a.z, g.z, lr, eps, alpha);
    update_elem(kind, w.w, a.w, g.w, lr, eps, alpha);
}

__device__ __forceinline__ void scale_sub(float &w, float step, float g) {
    w = __fsub_rn(w, __fmul_rn(step, g));
}
__device__ __forceinline__ void scale_sub(float4 &w, float step, float4 g) {
    scale_sub(w.x, step, g.x);
    scale_sub(w.y, step, g.y);
    scale_sub(w.z, step, g.z);
    scale_sub(w.w, step, g.w);
}

template <typename V>
__device__ void scatter_impl(V *__restrict__ table, float *__restrict__ state, u64 dimv, u64 dim,
                             const u32 *__restrict__ rows, const V *__restrict__ grads,
                             u64 unique, int kind, float lr, float eps, float alpha) {
    const u32 lane = threadIdx.x & 31u;
    const u32 L = lanes_for(dimv);
    const u32 G = 32u / L;
    const u32 g = lane / L;
    const u32 l = lane % L;
    const u64 warp = global_thread() >> 5;
    const u64 nwarps = grid_threads() >> 5;
    // Warp-uniform loop: every lane reaches the shuffles of row-wise Adagrad.
    for (u64 first = warp * G; first < unique; first += nwarps * G) {
        const u64 u = first + g;
        const bool valid = u < unique;
        const u64 r = valid ? (u64)rows[u] : 0;
        if (kind == OPT_ROWWISE_ADAGRAD) {
            float sq = 0.0f;
            if (valid) {
                for (u64 c = l; c < dimv; c += L) sq += vsumsq(grads[u * dimv + c]);
            }
            for (u32 off = L >> 1; off >= 1u; off >>= 1) {
                sq += __shfl_xor_sync(FULL_MASK, sq, off);
            }
            // Lane 0 of the group reads and writes the row's accumulator.
            float a = 0.0f;
            if (valid && l == 0) {
                a = __fadd_rn(state[r], __fdiv_rn(sq, (float)dim));
                state[r] = a;
            }
            a = __shfl_sync(FULL_MASK, a, g * L);
            if (valid) {
                const float step = __fdiv_rn(lr, __fadd_rn(__fsqrt_rn(a), eps));
                for (u64 c = l; c < dimv; c += L) {
                    V w = table[r * dimv + c];
                    scale_sub(w, step, grads[u * dimv + c]);
                    table[r * dimv + c] = w;
                }
            }
        } else if (valid) {
            V *st = reinterpret_cast<V *>(state);
            for (u64 c = l; c < dimv; c += L) {
                V w = table[r * dimv + c];
                V a;
                if (kind == OPT_SGD) {
                    vzero(a);
                } else {
                    a = st[r * dimv + c];
                }
                update_vec(kind, w, a, grads[u * dimv + c], lr, eps, alpha);
                table[r * dimv + c] = w;
                if (kind != OPT_SGD) st[r * dimv + c] = a;
            }
        }
    }
}

extern "C" __global__ void nmpsim_scatter_update_vec4(float4 *__restrict__ table,
                                                      float *__restrict__ state, u64 dimv,
                                                      u64 dim, const u32 *__restrict__ rows,
                                                      const float4 *__restrict__ grads,
                                                      u64 unique, int kind, float lr, float eps,
                                                      float alpha) {
    scatter_impl<float4>(table, state, dimv, dim, rows, grads, unique, kind, lr, eps, alpha);
}

extern "C" __global__ void nmpsim_scatter_update_scalar(float *__restrict__ table,
                                                        float *__restrict__ state, u64 dimv,
                                                        u64 dim, const u32 *__restrict__ rows,
                                                        const float *__restrict__ grads,
                                                        u64 unique, int kind, float lr,
                                                        float eps, float alpha) {
    scatter_impl<float>(table, state, dimv, dim, rows, grads, unique, kind, lr, eps, alpha);
}

// ---- bench support -----------------------------------------------------------------

// out[i] uniform in [lo, hi), from a SplitMix64 hash of (seed, i).
extern "C" __global__ void nmpsim_fill_uniform(float *__restrict__ out, u64 n, u64 seed, float lo,
                                               float hi) {
    for (u64 i = global_thread(); i < n; i += grid_threads()) {
        u64 z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        out[i] = lo + (hi - lo) * u;
    }
}

// ---- Eff-TT tables (kernels/src/tt/, EL-Rec) ---------------------------------------
//
// A TT table's three cores as kernels/src/tt/table.rs stores them: core k is m_k
// slices of r_k x n_k x r_{k+1} values, row-major, with ranks [1, R, R, 1]. So
// slice i1 of core 0 is n1 x R, slice i2 of core 1 is R x (n2 R), and slice i3
// of core 2 is R x n3. A row is (C0[i1] C1[i2]) C2[i3]: the prefix product
// (n1 n2) x R, then (n1 n2) x n3 = dim values.
//
// Every value is one thread's, summed in the order of the CPU code
// (kernels/src/tt/matmul.rs: `mm` and `mm_tn` over k in order from zero, `dot`
// in eight lanes summed from -0.0 and then its tail), with the round-to-nearest
// intrinsics, so each kernel equals its CPU counterpart bit for bit on the same
// inputs. The host gives the batch's structure (the prefixes and each lookup's
// slot, the backward's prefix groups, the touched slices and who contributes to
// each): the GPU computes every product and sum.
//   prefix products        nmpsim_tt_prefix
//   pooled lookups         nmpsim_tt_pool
//   backward, per prefix   nmpsim_tt_grad_prefix (dP), nmpsim_tt_grad_first (dC0, dC1)
//   backward, per row      nmpsim_tt_grad_last (dC2)
//   slice gradients        nmpsim_tt_reduce (then nmpsim_scatter_update_scalar)

// `x . y` over k values as kernels/src/tt/matmul.rs `dot`.
__device__ __forceinline__ float tt_dot(const float *__restrict__ x, const float *__restrict__ y,
                                        u64 k) {
    float lanes[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const u64 full = k / 8 * 8;
    for (u64 c = 0; c < full; c += 8) {
        for (int l = 0; l < 8; l++) lanes[l] = __fadd_rn(lanes[l], __fmul_rn(x[c + l], y[c + l]));
    }
    float s = -0.0f;
    for (int l = 0; l < 8; l++) s = __fadd_rn(s, lanes[l]);
    for (u64 c = full; c < k; c++) s = __fadd_rn(s, __fmul_rn(x[c], y[c]));
    return s;
}

// out[p] = C0[i1[p]] (n1 x R) times C1[i2[p]] (R x n2r), n2r = n2 R: count
// products of n1 x n2r values each.
extern "C" __global__ void nmpsim_tt_prefix(const float *__restrict__ c0,
                                            const float *__restrict__ c1,
                                            const u32 *__restrict__ i1, const u32 *__restrict__ i2,
                                            u64 count, u64 n1, u64 r, u64 n2r,
                                            float *__restrict__ out) {
    const u64 per = n1 * n2r;
    for (u64 t = global_thread(); t < count * per; t += grid_threads()) {
        const u64 p = t / per, e = t % per, a = e / n2r, x = e % n2r;
        const float *A = c0 + (u64)i1[p] * n1 * r + a * r;
        const float *B = c1 + (u64)i2[p] * r * n2r + x;
        float acc = 0.0f;
        for (u64 q = 0; q < r; q++) acc = __fadd_rn(acc, __fmul_rn(A[q], B[q * n2r]));
        out[t] = acc;
    }
}

// Pooled rows: out[b][i n3 + j] = sum over the lookups l of bag b, in order, of
// f_l (P[slot[l]] (pr x R) times C2[row_l % m3] (R x n3))[i][j], f_l the
// lookup's pooling scale (1, 1 / bag length, or its weight).
extern "C" __global__ void nmpsim_tt_pool(const float *__restrict__ prefix,
                                          const u32 *__restrict__ slots,
                                          const float *__restrict__ c2,
                                          const u32 *__restrict__ indices,
                                          const u32 *__restrict__ offsets,
                                          const float *__restrict__ weights, u64 has_weights,
                                          u64 bags, u64 pr, u64 r, u64 n3, u64 m3, int mode,
                                          float *__restrict__ out) {
    const u64 dim = pr * n3;
    for (u64 t = global_thread(); t < bags * dim; t += grid_threads()) {
        const u64 b = t / dim, e = t % dim, i = e / n3, j = e % n3;
        const u32 lo = offsets[b], hi = offsets[b + 1];
        const u32 len = hi - lo;
        float o = 0.0f;
        for (u32 l = lo; l < hi; l++) {
            const float *P = prefix + (u64)slots[l] * pr * r + i * r;
            const float *C = c2 + (u64)(indices[l] % m3) * r * n3 + j;
            float v = 0.0f;
            for (u64 q = 0; q < r; q++) v = __fadd_rn(v, __fmul_rn(P[q], C[q * n3]));
            float f = 1.0f;
            if (mode == POOL_MEAN) {
                f = __fdiv_rn(1.0f, (float)(len > 0u ? len : 1u));
            } else if (mode == POOL_WEIGHTED && has_weights) {
                f = weights[l];
            }
            o = f == 1.0f ? __fadd_rn(o, v) : __fadd_rn(o, __fmul_rn(f, v));
        }
        out[t] = o;
    }
}

// The prefix's gradient of each group g of unique rows (the rows
// gstart[g]..gstart[g+1] share a prefix): dP[g][i][q] = sum over its rows u,
// in order, of G_u[i] (n3 values) . C2[rows[u] % m3][q] (n3 values).
extern "C" __global__ void nmpsim_tt_grad_prefix(const float *__restrict__ grads,
                                                 const u32 *__restrict__ rows,
                                                 const u32 *__restrict__ gstart, u64 groups,
                                                 const float *__restrict__ c2, u64 pr, u64 r,
                                                 u64 n3, u64 m3, float *__restrict__ dp) {
    const u64 per = pr * r, dim = pr * n3;
    for (u64 t = global_thread(); t < groups * per; t += grid_threads()) {
        const u64 g = t / per, e = t % per, i = e / r, q = e % r;
        float acc = 0.0f;
        for (u32 u = gstart[g]; u < gstart[g + 1]; u++) {
            const float *C = c2 + (u64)(rows[u] % m3) * r * n3 + q * n3;
            acc = __fadd_rn(acc, tt_dot(grads + (u64)u * dim + i * n3, C, n3));
        }
        dp[t] = acc;
    }
}

// The last core's gradient of each unique row u of group ugroup[u]:
// dC2[u][q][j] = sum over i < pr, in order, of P[g][i][q] G_u[i][j].
extern "C" __global__ void nmpsim_tt_grad_last(const float *__restrict__ grads,
                                               const u32 *__restrict__ ugroup, u64 unique,
                                               const float *__restrict__ prefix, u64 pr, u64 r,
                                               u64 n3, float *__restrict__ dc) {
    const u64 per = r * n3, dim = pr * n3;
    for (u64 t = global_thread(); t < unique * per; t += grid_threads()) {
        const u64 u = t / per, e = t % per, q = e / n3, j = e % n3;
        const float *P = prefix + (u64)ugroup[u] * pr * r + q;
        const float *G = grads + u * dim + j;
        float acc = 0.0f;
        for (u64 i = 0; i < pr; i++) acc = __fadd_rn(acc, __fmul_rn(P[i * r], G[i * n3]));
        dc[t] = acc;
    }
}

// The first two cores' gradients of each group g, from its dP (n1 x n2r):
// dC0[g][a][q] = 0 + dP[a] . C1[i2[g]][q] (n2r values each), and
// dC1[g][q][x] = sum over a < n1, in order, of C0[i1[g]][a][q] dP[a][x].
extern "C" __global__ void nmpsim_tt_grad_first(const float *__restrict__ dp,
                                                const u32 *__restrict__ i1,
                                                const u32 *__restrict__ i2, u64 groups,
                                                const float *__restrict__ c0,
                                                const float *__restrict__ c1, u64 n1, u64 r,
                                                u64 n2r, float *__restrict__ da,
                                                float *__restrict__ db) {
    const u64 pa = n1 * r, pb = r * n2r, per = pa + pb;
    for (u64 t = global_thread(); t < groups * per; t += grid_threads()) {
        const u64 g = t / per, e = t % per;
        const float *D = dp + g * n1 * n2r;
        if (e < pa) {
            const u64 a = e / r, q = e % r;
            const float *B = c1 + (u64)i2[g] * r * n2r + q * n2r;
            da[g * pa + e] = __fadd_rn(0.0f, tt_dot(D + a * n2r, B, n2r));
        } else {
            const u64 f = e - pa, q = f / n2r, x = f % n2r;
            const float *A = c0 + (u64)i1[g] * n1 * r + q;
            float acc = 0.0f;
            for (u64 a = 0; a < n1; a++) acc = __fadd_rn(acc, __fmul_rn(A[a * r], D[a * n2r + x]));
            db[g * pb + f] = acc;
        }
    }
}

// Per touched slice s of a core (len values a slice): out[s] = the sum, in
// order, of src[from[k]] for k in cstart[s]..cstart[s+1], from zero.
extern "C" __global__ void nmpsim_tt_reduce(const float *__restrict__ src,
                                            const u32 *__restrict__ from,
                                            const u32 *__restrict__ cstart, u64 touched, u64 len,
                                            float *__restrict__ out) {
    for (u64 t = global_thread(); t < touched * len; t += grid_threads()) {
        const u64 s = t / len, e = t % len;
        float acc = 0.0f;
        for (u32 k = cstart[s]; k < cstart[s + 1]; k++) acc = __fadd_rn(acc, src[(u64)from[k] * len + e]);
        out[t] = acc;
    }
}
