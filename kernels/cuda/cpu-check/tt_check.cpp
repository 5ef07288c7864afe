// The Eff-TT kernels of embedding.cu run on the CPU (shim.h) and checked bit for
// bit against C++ transcriptions of the Rust code they follow
// (kernels/src/tt/: `prefix_into` and `last_into` with `mm`, the backward's
// `mm_nt_acc` with its eight-lane `dot` and `mm_tn`, the reductions in prefix
// order): prefix products and pooled lookups with and without reuse, every
// pooling, and the backward's dP, dC0, dC1, dC2 and slice sums, for dims 16, 32
// and 64, ranks with and without a tail of the eight lanes, on shapes where
// prefixes repeat. The host side repeats the launch order of
// kernels/src/cuda/backend/tt.rs.
//
// Run by kernels/tests/cuda_on_cpu.rs:  c++ -std=c++20 -O1 -pthread tt_check.cpp
#include "shim.h"
#include "../embedding.cu"
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
typedef std::vector<u32> VU; typedef std::vector<float> VF;
static unsigned gridfor(u64 threads, unsigned cap = 5) { u64 b = (threads + 255) / 256; if (b < 1) b = 1; if (b > cap) b = cap; return (unsigned)b; }
int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)
static bool same_bits(const VF &a, const VF &b) { return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0); }

// ---- the Rust code, transcribed (kernels/src/tt/matmul.rs) ----
static float r_dot(const float *x, const float *y, size_t k) {
    float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t full = k / 8 * 8;
    for (size_t c = 0; c < full; c += 8) for (int l = 0; l < 8; l++) lanes[l] += x[c + l] * y[c + l];
    float s = -0.0f;
    for (int l = 0; l < 8; l++) s += lanes[l];
    for (size_t c = full; c < k; c++) s += x[c] * y[c];
    return s;
}
// c = a b (beta 0): a m x k, b k x n.
static void r_mm(size_t m, size_t k, size_t n, const float *a, const float *b, float *c) {
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) c[i * n + j] = 0.0f;
        for (size_t r = 0; r < k; r++) { float x = a[i * k + r]; for (size_t j = 0; j < n; j++) c[i * n + j] += x * b[r * n + j]; }
    }
}
// c += a b^T: a m x k, b n x k.
static void r_mm_nt_acc(size_t m, size_t k, size_t n, const float *a, const float *b, float *c) {
    for (size_t i = 0; i < m; i++) for (size_t r = 0; r < n; r++) c[i * n + r] += r_dot(a + i * k, b + r * k, k);
}
// c = a^T b: a k x m, b k x n.
static void r_mm_tn(size_t m, size_t k, size_t n, const float *a, const float *b, float *c) {
    for (size_t i = 0; i < m * n; i++) c[i] = 0.0f;
    for (size_t i = 0; i < k; i++) for (size_t r = 0; r < m; r++) { float x = a[i * m + r]; for (size_t j = 0; j < n; j++) c[r * n + j] += x * b[i * n + j]; }
}

struct Shape { u64 m1, m2, m3; u64 n1, n2, n3; u64 R; };
struct Tt { Shape s; VF c0, c1, c2; };
static void split(const Shape &s, u32 row, u32 &i1, u32 &i2, u32 &i3) { i1 = row / (s.m2 * s.m3); i2 = (row / s.m3) % s.m2; i3 = row % s.m3; }
static float rnd(std::mt19937 &g) { return std::uniform_real_distribution<float>(-1.0f, 1.0f)(g); }
static Tt make(const Shape &s, std::mt19937 &g) {
    Tt t{s, VF(s.m1 * s.n1 * s.R), VF(s.m2 * s.R * s.n2 * s.R), VF(s.m3 * s.R * s.n3)};
    for (auto *v : {&t.c0, &t.c1, &t.c2}) for (auto &x : *v) x = rnd(g);
    return t;
}
static void r_prefix(const Tt &t, u32 i1, u32 i2, float *out) {
    const Shape &s = t.s;
    r_mm(s.n1, s.R, s.n2 * s.R, &t.c0[i1 * s.n1 * s.R], &t.c1[i2 * s.R * s.n2 * s.R], out);
}

void check_shape(const Shape &s, std::mt19937 &g) {
    Tt t = make(s, g);
    const u64 rows = s.m1 * s.m2 * s.m3, pr = s.n1 * s.n2, dim = pr * s.n3, P = pr * s.R, n2r = s.n2 * s.R;
    // A batch of 9 bags (one empty), rows drawn from few prefixes so they repeat.
    VU offsets{0}, indices; VF weights;
    for (int b = 0; b < 9; b++) {
        int len = b == 4 ? 0 : 1 + (int)(g() % 5);
        for (int l = 0; l < len; l++) {
            u32 row = (u32)(g() % std::min<u64>(rows, s.m3 * 3 + 1));
            if (g() % 3 == 0) row = (u32)(g() % rows);
            indices.push_back(row); weights.push_back(rnd(g));
        }
        offsets.push_back((u32)indices.size());
    }
    const u64 n = indices.size(), bags = offsets.size() - 1;
    for (int reuse = 0; reuse < 2; reuse++) {
        // The prefixes computed: the distinct (i1, i2) of the batch, or one per lookup.
        VU p1, p2, slots(n);
        std::map<std::pair<u32, u32>, u32> seen;
        for (u64 l = 0; l < n; l++) {
            u32 i1, i2, i3; split(s, indices[l], i1, i2, i3);
            if (reuse) {
                auto it = seen.find({i1, i2});
                if (it == seen.end()) { it = seen.insert({{i1, i2}, (u32)p1.size()}).first; p1.push_back(i1); p2.push_back(i2); }
                slots[l] = it->second;
            } else { slots[l] = (u32)l; p1.push_back(i1); p2.push_back(i2); }
        }
        VF buf(p1.size() * P), want_buf(p1.size() * P);
        launch(gridfor(p1.size() * P), 256, [&] { nmpsim_tt_prefix(t.c0.data(), t.c1.data(), p1.data(), p2.data(), p1.size(), s.n1, s.R, n2r, buf.data()); });
        for (size_t p = 0; p < p1.size(); p++) r_prefix(t, p1[p], p2[p], &want_buf[p * P]);
        CHECK(same_bits(buf, want_buf), "prefix products, R %llu dim %llu reuse %d", s.R, dim, reuse);
        for (int mode = 0; mode < 3; mode++) {
            VF out(bags * dim, 7.0f), want(bags * dim, 0.0f), row(dim);
            launch(gridfor(bags * dim), 256, [&] { nmpsim_tt_pool(buf.data(), slots.data(), t.c2.data(), indices.data(), offsets.data(), weights.data(), 1, bags, pr, s.R, s.n3, s.m3, mode, out.data()); });
            for (u64 b = 0; b < bags; b++) {
                u32 lo = offsets[b], hi = offsets[b + 1];
                for (u32 l = lo; l < hi; l++) {
                    u32 i1, i2, i3; split(s, indices[l], i1, i2, i3);
                    VF pre(P); r_prefix(t, i1, i2, pre.data());
                    r_mm(pr, s.R, s.n3, pre.data(), &t.c2[i3 * s.R * s.n3], row.data());
                    float f = mode == 0 ? 1.0f : mode == 1 ? 1.0f / (float)std::max<u32>(hi - lo, 1) : weights[l];
                    for (u64 e = 0; e < dim; e++) want[b * dim + e] += f == 1.0f ? row[e] : f * row[e];
                }
            }
            CHECK(same_bits(out, want), "pooled rows, R %llu dim %llu reuse %d mode %d", s.R, dim, reuse, mode);
        }
    }
    // The backward on the batch's unique rows (ascending) and a gradient each.
    std::set<u32> uniq(indices.begin(), indices.end());
    VU urows(uniq.begin(), uniq.end());
    const u64 U = urows.size();
    VF ug(U * dim); for (auto &x : ug) x = rnd(g);
    VU gstart{0}, ugroup(U), g1, g2;
    for (u64 u = 0; u < U; u++) {
        if (u > 0 && urows[u] / s.m3 != urows[u - 1] / s.m3) gstart.push_back((u32)u);
        ugroup[u] = (u32)gstart.size() - 1;
    }
    gstart.push_back((u32)U);
    const u64 G = gstart.size() - 1;
    for (u64 k = 0; k < G; k++) { u32 i1, i2, i3; split(s, urows[gstart[k]], i1, i2, i3); g1.push_back(i1); g2.push_back(i2); }
    VF prods(G * P), dp(G * P), dc(U * s.R * s.n3), da(G * s.n1 * s.R), db(G * s.R * n2r);
    launch(gridfor(G * P), 256, [&] { nmpsim_tt_prefix(t.c0.data(), t.c1.data(), g1.data(), g2.data(), G, s.n1, s.R, n2r, prods.data()); });
    launch(gridfor(G * P), 256, [&] { nmpsim_tt_grad_prefix(ug.data(), urows.data(), gstart.data(), G, t.c2.data(), pr, s.R, s.n3, s.m3, dp.data()); });
    launch(gridfor(U * s.R * s.n3), 256, [&] { nmpsim_tt_grad_last(ug.data(), ugroup.data(), U, prods.data(), pr, s.R, s.n3, dc.data()); });
    launch(gridfor(G * (s.n1 * s.R + s.R * n2r)), 256, [&] { nmpsim_tt_grad_first(dp.data(), g1.data(), g2.data(), G, t.c0.data(), t.c1.data(), s.n1, s.R, n2r, da.data(), db.data()); });
    // The Rust order (kernels/src/tt/backward.rs `tt_core_grads`).
    VF w_dp(G * P, 0.0f), w_dc(U * s.R * s.n3), w_da(G * s.n1 * s.R, 0.0f), w_db(G * s.R * n2r);
    std::map<u32, VF> acc[3];
    auto add_into = [](std::map<u32, VF> &m, u32 i, const float *v, size_t len) {
        auto it = m.find(i); if (it == m.end()) it = m.insert({i, VF(len, 0.0f)}).first;
        for (size_t e = 0; e < len; e++) it->second[e] += v[e];
    };
    for (u64 k = 0; k < G; k++) {
        VF pre(P); r_prefix(t, g1[k], g2[k], pre.data());
        for (u32 u = gstart[k]; u < gstart[k + 1]; u++) {
            u32 i1, i2, i3; split(s, urows[u], i1, i2, i3);
            r_mm_nt_acc(pr, s.n3, s.R, &ug[u * dim], &t.c2[i3 * s.R * s.n3], &w_dp[k * P]);
            r_mm_tn(s.R, pr, s.n3, pre.data(), &ug[u * dim], &w_dc[u * s.R * s.n3]);
        }
        r_mm_nt_acc(s.n1, n2r, s.R, &w_dp[k * P], &t.c1[g2[k] * s.R * n2r], &w_da[k * s.n1 * s.R]);
        r_mm_tn(s.R, s.n1, n2r, &t.c0[g1[k] * s.n1 * s.R], &w_dp[k * P], &w_db[k * s.R * n2r]);
    }
    CHECK(same_bits(dp, w_dp), "dP, R %llu dim %llu", s.R, dim);
    CHECK(same_bits(dc, w_dc), "dC2, R %llu dim %llu", s.R, dim);
    CHECK(same_bits(da, w_da), "dC0, R %llu dim %llu", s.R, dim);
    CHECK(same_bits(db, w_db), "dC1, R %llu dim %llu", s.R, dim);
    // Slice sums in prefix order, as the BTreeMaps of the Rust code.
    for (u64 k = 0; k < G; k++) {
        add_into(acc[0], g1[k], &w_da[k * s.n1 * s.R], s.n1 * s.R);
        add_into(acc[1], g2[k], &w_db[k * s.R * n2r], s.R * n2r);
        for (u32 u = gstart[k]; u < gstart[k + 1]; u++) add_into(acc[2], urows[u] % s.m3, &w_dc[u * s.R * s.n3], s.R * s.n3);
    }
    const VF *src[3] = {&da, &db, &dc};
    const u64 lens[3] = {s.n1 * s.R, s.R * n2r, s.R * s.n3};
    for (int c = 0; c < 3; c++) {
        // Who contributes to each touched slice, in order (kernels/src/cuda/backend/tt.rs).
        std::map<u32, VU> by;
        if (c < 2) { for (u64 k = 0; k < G; k++) by[c == 0 ? g1[k] : g2[k]].push_back((u32)k); }
        else { for (u64 u = 0; u < U; u++) by[urows[u] % s.m3].push_back((u32)u); }
        VU cstart{0}, from; VF want;
        for (auto &[slice, v] : by) { for (u32 x : v) from.push_back(x); cstart.push_back((u32)from.size()); const VF &a = acc[c][slice]; want.insert(want.end(), a.begin(), a.end()); }
        CHECK(by.size() == acc[c].size(), "touched slices of core %d", c);
        VF out(by.size() * lens[c]);
        launch(gridfor(out.size()), 256, [&] { nmpsim_tt_reduce(src[c]->data(), from.data(), cstart.data(), by.size(), lens[c], out.data()); });
        CHECK(same_bits(out, want), "slice sums of core %d, R %llu dim %llu", c, s.R, dim);
    }
}

int main() {
    std::mt19937 g(7);
    const Shape shapes[] = {
        {3, 4, 5, 2, 2, 4, 3},    // dim 16, R 3: dot's tail only
        {2, 3, 7, 2, 4, 4, 8},    // dim 32, R 8: one full lane pass
        {4, 4, 6, 4, 4, 4, 12},   // dim 64, R 12: lanes and a tail
        {2, 2, 3, 2, 2, 4, 17},   // dim 16, R 17
    };
    for (const Shape &s : shapes) check_shape(s, g);
    printf("%s (%d failures)\n", fails ? "FAILED" : "all ok", fails);
    return fails != 0;
}
