// The kernels of embedding.cu run on the CPU (shim.h: one std::thread per
// CUDA thread, blocks one after another, warp shuffles and matches through
// shared slots) and checked against plain C++ references: scans across tile
// boundaries, the stable radix sort against std::stable_sort (one to four
// passes), segments, gather-reduce for dims 1 to 200 and every pooling,
// expand, coalesce against the casted gather-reduce (bit for bit), and
// scatter with every optimizer. The host side repeats the launch order of
// kernels/src/cuda/backend/; the Rust launch arguments themselves are
// checked on a GPU (kernels/tests/cuda.rs).
//
// Run by kernels/tests/cuda_on_cpu.rs:  c++ -std=c++20 -O1 -pthread embedding_check.cpp
#include "shim.h"
#include "../embedding.cu"
#include <algorithm>
#include <cstdio>
#include <random>
#include <map>
typedef std::vector<u32> VU; typedef std::vector<float> VF;
static unsigned gridfor(u64 threads, unsigned cap = 7) { u64 b = (threads + 255) / 256; if (b < 1) b = 1; if (b > cap) b = cap; return (unsigned)b; }
void scan(VU &in, VU &out, u64 n, bool incl) {
    u64 tiles = (n + TILE - 1) / TILE; VU sums(tiles);
    unsigned g = (unsigned)std::min<u64>(tiles, 3);
    launch(g, 256, [&] { nmpsim_scan_reduce(in.data(), n, sums.data(), tiles); });
    launch(1, 1024, [&] { nmpsim_scan_blocks(sums.data(), tiles); });
    launch(g, 256, [&] { nmpsim_scan_apply(in.data(), out.data(), n, sums.data(), tiles, incl); });
}
void sort_pairs(VU &k, VU &v, u64 n, u32 bits) {
    u32 passes = (bits + 7) / 8; if (passes == 0 || n < 2) return;
    u64 tiles = (n + TILE - 1) / TILE; VU k2(n), v2(n), hist(RADIX * tiles);
    for (u32 p = 0; p < passes; p++) {
        u32 shift = p * 8;
        launch(tiles, 256, [&] { nmpsim_radix_histogram(k.data(), n, shift, hist.data(), tiles); });
        scan(hist, hist, RADIX * tiles, false);
        launch(tiles, 256, [&] { nmpsim_radix_scatter(k.data(), v.data(), n, shift, hist.data(), tiles, k2.data(), v2.data()); });
        std::swap(k, k2); std::swap(v, v2);
    }
}
int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)
int main() {
    std::mt19937_64 rng(5);
    // scan
    for (u64 n : {1ull, 5ull, 2048ull, 2049ull, 10000ull}) {
        VU a(n), o(n); for (auto &x : a) x = rng() % 3;
        scan(a, o, n, true); u32 s = 0; bool ok = true;
        for (u64 i = 0; i < n; i++) { s += a[i]; ok &= o[i] == s; }
        CHECK(ok, "incl scan n=%llu", n);
        scan(a, a, n, false); s = 0; ok = true; VU b(n); // in place exclusive: recompute from copy
    }
    // sort + segments
    for (auto [n, rows] : std::vector<std::pair<u64, u64>>{{3, 7}, {100, 5}, {5000, 300}, {9000, 100000}, {6000, 20000000}}) {
        VU keys(n), vals(n);
        for (u64 i = 0; i < n; i++) { keys[i] = (rng() % 10 < 3) ? rng() % 4 : rng() % rows; vals[i] = i; }
        u32 bits = rows <= 1 ? 0 : 64 - __builtin_clzll(rows - 1);
        VU k = keys, v = vals; sort_pairs(k, v, n, bits);
        std::vector<std::pair<u32, u32>> ref; for (u64 i = 0; i < n; i++) ref.push_back({keys[i], vals[i]});
        std::stable_sort(ref.begin(), ref.end(), [](auto a, auto b) { return a.first < b.first; });
        bool ok = true; for (u64 i = 0; i < n; i++) ok &= k[i] == ref[i].first && v[i] == ref[i].second;
        CHECK(ok, "sort n=%llu rows=%llu", n, rows);
        VU flags(n), incl(n), seg(n);
        launch(gridfor(n), 256, [&] { nmpsim_head_flags(k.data(), n, flags.data()); });
        scan(flags, incl, n, true);
        u32 count = incl[n - 1]; VU uniq(count), starts(count + 1);
        launch(gridfor(n), 256, [&] { nmpsim_segments(k.data(), flags.data(), incl.data(), n, seg.data(), uniq.data(), starts.data()); });
        VU ru; VU rseg; VU rst;
        for (u64 i = 0; i < n; i++) { if (i == 0 || k[i] != k[i - 1]) { ru.push_back(k[i]); rst.push_back(i); } rseg.push_back(ru.size() - 1); }
        rst.push_back(n);
        CHECK(ru == uniq && rseg == seg && rst == starts, "segments n=%llu", n);
    }
    // gather-reduce, every dim, vec4 and scalar, every pooling
    for (u64 dim : {1ull, 3ull, 4ull, 8ull, 64ull, 128ull, 136ull, 200ull}) for (int mode = 0; mode < 3; mode++) {
        u64 rows = 50, bags = 37; VU off{0}; VU idx; VF w;
        // With dims 3 and 4 some bags are long, and the hot row's segment spans
        // ~90 chunks of 16: more pieces than the combine block has sub-groups.
        bool big = dim == 3 || dim == 4;
        for (u64 b = 0; b < bags; b++) { u32 len = big && b % 3 == 0 ? 300 + rng() % 100 : b % 5 == 0 ? rng() % 100 : rng() % 9; // some bags span several 32-lookup chunks
             for (u32 j = 0; j < len; j++) { idx.push_back(rng() % 10 < 3 ? 7 : rng() % rows); // row 7 hot: segments over many chunks
                w.push_back((rng() % 100) / 50.0f - 1); } off.push_back(idx.size()); }
        if (w.empty()) w.push_back(0);
        VF table(rows * dim); for (auto &x : table) x = (rng() % 1000) / 500.0f - 1;
        VF out(bags * dim, -9);
        bool vec4 = dim % 4 == 0; u64 dimv = vec4 ? dim / 4 : dim;
        if (vec4) launch(gridfor(bags * 32, 3), 256, [&] { nmpsim_gather_reduce_vec4((float4 *)table.data(), dimv, idx.data(), off.data(), w.data(), bags, mode, (float4 *)out.data()); });
        else launch(gridfor(bags * 32, 3), 256, [&] { nmpsim_gather_reduce_scalar(table.data(), dimv, idx.data(), off.data(), w.data(), bags, mode, out.data()); });
        double worst = 0;
        for (u64 b = 0; b < bags; b++) for (u64 c = 0; c < dim; c++) {
            double acc = 0; for (u32 i = off[b]; i < off[b + 1]; i++) acc += (mode == 2 ? w[i] : 1.0) * table[idx[i] * dim + c];
            if (mode == 1 && off[b + 1] > off[b]) acc /= off[b + 1] - off[b];
            worst = std::max(worst, std::abs(acc - out[b * dim + c]));
        }
        CHECK(worst < 1e-4, "gather dim=%llu mode=%d err=%g", dim, mode, worst);
        // The table-batched launch: this table, a table of no bags, and the
        // same batch over a second table (other values, half the grid),
        // each bit for bit the single-table kernel's result.
        {
            VF table2(rows * dim); for (auto &x : table2) x = (rng() % 1000) / 250.0f - 2;
            VF ref2(bags * dim, -9);
            if (vec4) launch(gridfor(bags * 32, 2), 256, [&] { nmpsim_gather_reduce_vec4((float4 *)table2.data(), dimv, idx.data(), off.data(), w.data(), bags, mode, (float4 *)ref2.data()); });
            else launch(gridfor(bags * 32, 2), 256, [&] { nmpsim_gather_reduce_scalar(table2.data(), dimv, idx.data(), off.data(), w.data(), bags, mode, ref2.data()); });
            VF o1(bags * dim, -7), o2(bags * dim, -7), o0(1, -7); VU off0{0};
            std::vector<u64> desc{(u64)table.data(), (u64)idx.data(), (u64)off.data(), (u64)w.data(), (u64)o1.data(), bags,
                                  (u64)table2.data(), (u64)idx.data(), (u64)off0.data(), (u64)w.data(), (u64)o0.data(), 0,
                                  (u64)table2.data(), (u64)idx.data(), (u64)off.data(), (u64)w.data(), (u64)o2.data(), bags};
            for (u64 per : {1ull, 2ull}) {
                std::fill(o1.begin(), o1.end(), -7.0f); std::fill(o2.begin(), o2.end(), -7.0f);
                if (vec4) launch(3 * per, 256, [&] { nmpsim_gather_reduce_tables_vec4(desc.data(), 3, per, dimv, mode); });
                else launch(3 * per, 256, [&] { nmpsim_gather_reduce_tables_scalar(desc.data(), 3, per, dimv, mode); });
                CHECK(std::memcmp(o1.data(), out.data(), o1.size() * 4) == 0 && std::memcmp(o2.data(), ref2.data(), o2.size() * 4) == 0
                          && o0[0] == -7.0f, "gather tables dim=%llu mode=%d per_table=%llu", dim, mode, per);
            }
        }
        // expand
        u64 n = idx.size(); VU dst(n);
        launch(gridfor(bags * 32, 2), 256, [&] { nmpsim_bag_ids(off.data(), bags, dst.data()); });
        VF g(bags * dim); for (auto &x : g) x = (rng() % 1000) / 500.0f - 1;
        VF ex(n * dim);
        if (vec4) launch(gridfor(n * dimv, 3), 256, [&] { nmpsim_expand_vec4((float4 *)g.data(), dimv, dst.data(), off.data(), w.data(), n, mode, (float4 *)ex.data()); });
        else launch(gridfor(n * dimv, 3), 256, [&] { nmpsim_expand_scalar(g.data(), dimv, dst.data(), off.data(), w.data(), n, mode, ex.data()); });
        bool ok = true;
        for (u64 b = 0; b < bags; b++) for (u32 i = off[b]; i < off[b + 1]; i++) for (u64 c = 0; c < dim; c++) {
            float s = mode == 0 ? 1.0f : mode == 1 ? 1.0f / (float)(off[b + 1] - off[b]) : w[i];
            float want = mode == 0 ? g[b * dim + c] : s * g[b * dim + c];
            ok &= ex[i * dim + c] == want && dst[i] == b;
        }
        CHECK(ok, "expand dim=%llu mode=%d", dim, mode);
        // coalesce accumulate vs casted (sum / scale) bit identity, and scatter
        if (n == 0) continue;
        VU k = idx, pos(n); for (u64 i = 0; i < n; i++) pos[i] = i;
        sort_pairs(k, pos, n, 6);
        VU flags(n), incl(n), seg(n);
        launch(gridfor(n), 256, [&] { nmpsim_head_flags(k.data(), n, flags.data()); });
        scan(flags, incl, n, true);
        u32 U = incl[n - 1]; VU uniq(U), starts(U + 1);
        launch(gridfor(n), 256, [&] { nmpsim_segments(k.data(), flags.data(), incl.data(), n, seg.data(), uniq.data(), starts.data()); });
        VF co(U * dim, 1e30f), ca(U * dim, 1e30f);
        VU csrc(n); VF scale(n);
        for (u64 i = 0; i < n; i++) { csrc[i] = dst[pos[i]]; u32 b = csrc[i]; scale[i] = mode == 1 ? 1.0f / (float)(off[b + 1] - off[b]) : w[pos[i]]; }
        u64 L = 1; while (L < 32 && L < dimv) L <<= 1;
        // Chunks of 16 sorted positions; scratch poisoned so that reading
        // what no step wrote shows.
        u64 chunks = (n + 15) / 16;
        VF pa(2 * chunks * dim, 1e30f), pb(2 * chunks * dim, 1e30f);
        VU la(2 + n / 33, 99), lb(2 + n / 33, 99);
        unsigned lblocks = std::max<u64>(1, std::min<u64>(n / 33, 7)); // fewer blocks than segments: the block loop strides
        // Steps: every segment (long ones listed), long pieces per chunk,
        // long segments a block each. The count starts at zero (the host
        // zeroes it).
        la[0] = lb[0] = 0;
        if (vec4) {
            launch(gridfor(U * L, 3), 256, [&] { nmpsim_coalesce_accumulate_vec4((float4 *)ex.data(), dimv, pos.data(), starts.data(), U, (float4 *)co.data(), la.data(), la.data() + 1); });
            launch(gridfor(chunks * L, 3), 256, [&] { nmpsim_coalesce_long_pieces_vec4((float4 *)ex.data(), dimv, pos.data(), seg.data(), starts.data(), n, (float4 *)pa.data(), la.data()); });
            launch(lblocks, 256, [&] { nmpsim_segment_combine_long_vec4(dimv, starts.data(), (float4 *)pa.data(), (float4 *)co.data(), la.data(), la.data() + 1); });
            launch(gridfor(U * L, 3), 256, [&] { nmpsim_casted_gather_reduce_vec4((float4 *)g.data(), dimv, csrc.data(), scale.data(), mode != 0, starts.data(), U, (float4 *)ca.data(), lb.data(), lb.data() + 1); });
            launch(gridfor(chunks * L, 3), 256, [&] { nmpsim_casted_long_pieces_vec4((float4 *)g.data(), dimv, csrc.data(), scale.data(), mode != 0, seg.data(), starts.data(), n, (float4 *)pb.data(), lb.data()); });
            launch(lblocks, 256, [&] { nmpsim_segment_combine_long_vec4(dimv, starts.data(), (float4 *)pb.data(), (float4 *)ca.data(), lb.data(), lb.data() + 1); });
        } else {
            launch(gridfor(U * L, 3), 256, [&] { nmpsim_coalesce_accumulate_scalar(ex.data(), dimv, pos.data(), starts.data(), U, co.data(), la.data(), la.data() + 1); });
            launch(gridfor(chunks * L, 3), 256, [&] { nmpsim_coalesce_long_pieces_scalar(ex.data(), dimv, pos.data(), seg.data(), starts.data(), n, pa.data(), la.data()); });
            launch(lblocks, 256, [&] { nmpsim_segment_combine_long_scalar(dimv, starts.data(), pa.data(), co.data(), la.data(), la.data() + 1); });
            launch(gridfor(U * L, 3), 256, [&] { nmpsim_casted_gather_reduce_scalar(g.data(), dimv, csrc.data(), scale.data(), mode != 0, starts.data(), U, ca.data(), lb.data(), lb.data() + 1); });
            launch(gridfor(chunks * L, 3), 256, [&] { nmpsim_casted_long_pieces_scalar(g.data(), dimv, csrc.data(), scale.data(), mode != 0, seg.data(), starts.data(), n, pb.data(), lb.data()); });
            launch(lblocks, 256, [&] { nmpsim_segment_combine_long_scalar(dimv, starts.data(), pb.data(), ca.data(), lb.data(), lb.data() + 1); });
        }
        CHECK(la[0] > 0 && la[0] == lb[0], "a long segment expected: n=%llu listed %u, %u", n, la[0], lb[0]);
        CHECK(memcmp(co.data(), ca.data(), co.size() * 4) == 0, "casted vs coalesce dim=%llu mode=%d", dim, mode);
        // Error relative to the sum of the terms' magnitudes (at least 1):
        // f32 sums of the hot row's ~1500 terms round by more than 1e-4.
        std::map<u32, std::vector<double>> ref, mag;
        for (u64 i = 0; i < n; i++) {
            auto &r = ref[idx[i]], &m = mag[idx[i]]; r.resize(dim); m.resize(dim);
            for (u64 c = 0; c < dim; c++) { r[c] += ex[i * dim + c]; m[c] += std::abs(ex[i * dim + c]); }
        }
        worst = 0; u32 u = 0;
        for (auto &[row, r] : ref) { CHECK(uniq[u] == row, "uniq"); for (u64 c = 0; c < dim; c++) worst = std::max(worst, std::abs(r[c] - co[u * dim + c]) / std::max(1.0, mag[row][c])); u++; }
        CHECK(worst < 1e-5, "coalesce dim=%llu err=%g", dim, worst);
        for (int kind = 0; kind < 4; kind++) {
            VF t = table, st(kind == 2 ? rows : rows * dim, 0.5f), t0 = table, st0 = st;
            float lr = 0.01f, eps = 1e-8f, alpha = 0.99f;
            u64 G = 32 / L;
            if (vec4) launch(gridfor((U + G - 1) / G * 32, 3), 256, [&] { nmpsim_scatter_update_vec4((float4 *)t.data(), st.data(), dimv, dim, uniq.data(), (float4 *)co.data(), U, kind, lr, eps, alpha); });
            else launch(gridfor((U + G - 1) / G * 32, 3), 256, [&] { nmpsim_scatter_update_scalar(t.data(), st.data(), dimv, dim, uniq.data(), co.data(), U, kind, lr, eps, alpha); });
            double werr = 0;
            for (u32 uu = 0; uu < U; uu++) {
                u32 r = uniq[uu]; const float *gg = &co[uu * dim];
                double msq = 0; for (u64 c = 0; c < dim; c++) msq += (double)gg[c] * gg[c]; msq /= dim;
                for (u64 c = 0; c < dim; c++) {
                    double w0 = t0[r * dim + c], gv = gg[c], wn;
                    if (kind == 0) wn = w0 - lr * gv;
                    else if (kind == 1) { double a = st0[r * dim + c] + gv * gv; wn = w0 - lr * gv / (std::sqrt(a) + eps); werr = std::max(werr, std::abs(a - st[r * dim + c]) / std::max(1.0, a)); }
                    else if (kind == 2) { double a = st0[r] + msq; wn = w0 - lr * gv / (std::sqrt(a) + eps); werr = std::max(werr, std::abs(a - st[r]) / a); }
                    else { double a = alpha * st0[r * dim + c] + (1 - alpha) * gv * gv; wn = w0 - lr * gv / std::sqrt(eps + a); werr = std::max(werr, std::abs(a - st[r * dim + c]) / std::max(1.0, a)); }
                    werr = std::max(werr, std::abs(wn - t[r * dim + c]));
                }
            }
            // (state errors relative once above 1: the hot row's squared
            // gradient is large)
            // untouched rows unchanged
            bool same = true; for (u64 r = 0; r < rows; r++) if (!ref.count(r)) for (u64 c = 0; c < dim; c++) same &= t[r * dim + c] == t0[r * dim + c];
            CHECK(werr < 1e-5 && same, "scatter kind=%d dim=%llu err=%g", kind, dim, werr);
        }
    }
    printf("%s (%d failures)\n", fails ? "FAILED" : "all ok", fails);
    return fails != 0;
}
