// The kernels of dense.cu run on the CPU: every CUDA thread is a std::thread,
// a block's threads share a barrier for __syncthreads, blocks run one after
// another. Each kernel is checked against a plain C++ reference: bias and
// ReLU, the bias gradient for several grid shapes, the dot and cat
// interactions forward and backward (0 to 26 tables), the loss, SGD and
// Adagrad. The Rust launch arguments are checked on a GPU
// (dlrm/tests/cuda_dense.rs).
//
// Run by dlrm/tests/cuda_on_cpu.rs:  c++ -std=c++20 -O1 -pthread dense_check.cpp
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>
#include <algorithm>
using std::fmax; using std::sqrt; using std::log1p; using std::exp; using std::fabs;
struct dim3u { unsigned x = 1, y = 1, z = 1; };
thread_local dim3u threadIdx, blockIdx;
dim3u blockDim, gridDim;
std::barrier<> *bar;
inline void __syncthreads() { bar->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#include "../dense.cu"

void launch(dim3u g, dim3u b, std::function<void()> k) {
  gridDim = g; blockDim = b;
  for (unsigned bx = 0; bx < g.x; ++bx) {
    std::barrier<> br(b.x * b.y);
    bar = &br;
    std::vector<std::thread> ts;
    for (unsigned ty = 0; ty < b.y; ++ty)
      for (unsigned tx = 0; tx < b.x; ++tx)
        ts.emplace_back([=] { blockIdx = {bx, 0, 0}; threadIdx = {tx, ty, 0}; k(); });
    for (auto &t : ts) t.join();
  }
}
static unsigned long long st = 12345;
float rnd() { st = st * 6364136223846793005ULL + 1442695040888963407ULL; return ((st >> 40) / float(1 << 24)) * 2 - 1; }
int fails = 0;
void check(const char *w, const std::vector<float> &a, const std::vector<float> &b, float tol = 1e-5f) {
  if (a.size() != b.size()) { printf("%s: size\n", w); fails++; return; }
  for (size_t i = 0; i < a.size(); ++i)
    if (!(fabsf(a[i] - b[i]) <= tol * (1 + fabsf(b[i])))) { printf("%s[%zu]: %g vs %g\n", w, i, a[i], b[i]); fails++; return; }
  printf("%s ok (%zu)\n", w, a.size());
}
const float *feat(const std::vector<float> &x, const std::vector<float> &p, i64 B, i64 D, i64 b, i64 f) {
  return f == 0 ? &x[b * D] : &p[((f - 1) * B + b) * D];
}
int main() {
  dim3u g3{3}, b64{64};
  // bias_act
  for (int relu = 0; relu < 2; ++relu) {
    i64 R = 37, C = 11; std::vector<float> y(R * C), bias(C);
    for (auto &v : y) v = rnd(); for (auto &v : bias) v = rnd();
    auto want = y; for (i64 i = 0; i < R * C; ++i) { float v = y[i] + bias[i % C]; want[i] = relu ? std::max(v, 0.f) : v; }
    launch(g3, b64, [&] { nmpsim_dense_bias_act(y.data(), bias.data(), R, C, relu); });
    check(relu ? "bias_act relu" : "bias_act", y, want, 0);
  }
  { // relu backward
    i64 n = 777; std::vector<float> g(n), y(n); for (auto &v : g) v = rnd(); for (auto &v : y) v = rnd() > 0 ? rnd() : 0.f;
    auto want = g; for (i64 i = 0; i < n; ++i) if (y[i] <= 0) want[i] = 0;
    launch(g3, b64, [&] { nmpsim_dense_relu_backward(g.data(), y.data(), n); });
    check("relu_backward", g, want, 0);
  }
  for (auto [R, C, G, BY] : std::vector<std::tuple<i64, i64, unsigned, unsigned>>{{300, 70, 2, 16}, {1, 1, 1, 16}, {53, 33, 1, 8}, {9, 100, 5, 20}}) {
    std::vector<float> g(R * C), db(C, -99.f), want(C, 0);
    for (auto &v : g) v = rnd();
    for (i64 r = 0; r < R; ++r) for (i64 c = 0; c < C; ++c) want[c] += g[r * C + c];
    launch({G}, {32, BY}, [&] { nmpsim_dense_bias_grad(g.data(), db.data(), R, C); });
    char w[64]; snprintf(w, 64, "bias_grad %lldx%lld grid %u by %u", R, C, G, BY);
    check(w, db, want, 1e-5f);
  }
  for (auto [B, T, D] : std::vector<std::tuple<i64, i64, i64>>{{5, 6, 7}, {3, 1, 4}, {2, 26, 3}, {4, 0, 5}}) {
    i64 n = T + 1, w = D + n * (n - 1) / 2;
    std::vector<float> x(B * D), p(std::max<i64>(T * B * D, 1)), z(B * w, -9), wz(B * w);
    for (auto &v : x) v = rnd(); for (auto &v : p) v = rnd();
    for (i64 b = 0; b < B; ++b) {
      for (i64 e = 0; e < D; ++e) wz[b * w + e] = x[b * D + e];
      i64 k = D;
      for (i64 i = 1; i < n; ++i) for (i64 j = 0; j < i; ++j) {
        float a = 0; for (i64 e = 0; e < D; ++e) a += feat(x, p, B, D, b, i)[e] * feat(x, p, B, D, b, j)[e];
        wz[b * w + k++] = a;
      }
    }
    launch({2}, {32}, [&] { nmpsim_dense_dot_forward(x.data(), p.data(), z.data(), B, T, D); });
    check("dot_forward", z, wz, 1e-6f);
    std::vector<float> dz(B * w); for (auto &v : dz) v = rnd();
    std::vector<float> dx(B * D, -9), dp(std::max<i64>(T * B * D, 1), -9), wdx(B * D, 0), wdp(std::max<i64>(T * B * D, 1), 0);
    auto G = [&](i64 f, i64 b) -> float * { return f == 0 ? &wdx[b * D] : &wdp[((f - 1) * B + b) * D]; };
    for (i64 b = 0; b < B; ++b) {
      for (i64 e = 0; e < D; ++e) wdx[b * D + e] += dz[b * w + e];
      i64 k = D;
      for (i64 i = 1; i < n; ++i) for (i64 j = 0; j < i; ++j) {
        float s = dz[b * w + k++];
        for (i64 e = 0; e < D; ++e) { G(i, b)[e] += s * feat(x, p, B, D, b, j)[e]; G(j, b)[e] += s * feat(x, p, B, D, b, i)[e]; }
      }
    }
    if (T == 0) { dp[0] = 0; }
    launch(g3, b64, [&] { nmpsim_dense_dot_backward(x.data(), p.data(), dz.data(), dx.data(), dp.data(), B, T, D); });
    check("dot_backward dx", dx, wdx, 1e-5f); check("dot_backward dpooled", dp, wdp, 1e-5f);
    // cat
    i64 wc = n * D; std::vector<float> zc(B * wc, -9), wzc(B * wc);
    for (i64 b = 0; b < B; ++b) for (i64 f = 0; f < n; ++f) for (i64 e = 0; e < D; ++e) wzc[b * wc + f * D + e] = feat(x, p, B, D, b, f)[e];
    launch(g3, b64, [&] { nmpsim_dense_cat_forward(x.data(), p.data(), zc.data(), B, T, D); });
    check("cat_forward", zc, wzc, 0);
    std::vector<float> cdx(B * D, -9), cdp(std::max<i64>(T * B * D, 1), -9);
    if (T == 0) cdp[0] = p[0];
    launch(g3, b64, [&] { nmpsim_dense_cat_backward(zc.data(), cdx.data(), cdp.data(), B, T, D); });
    check("cat_backward dx", cdx, x, 0); check("cat_backward dpooled", cdp, p, 0);
  }
  { // bce
    i64 n = 300; std::vector<float> z(n), y(n), dz(n, -9), wdz(n); std::vector<double> t(n, -9);
    for (i64 i = 0; i < n; ++i) { z[i] = rnd() * (i % 7 == 0 ? 200 : 5); y[i] = rnd() > 0; }
    double wl = 0;
    for (i64 i = 0; i < n; ++i) { double zd = z[i], yd = y[i]; wl += std::max(zd, 0.0) - zd * yd + log1p(exp(-fabs(zd)));
      double s = zd >= 0 ? 1 / (1 + exp(-zd)) : exp(zd) / (1 + exp(zd)); wdz[i] = float((s - yd) / n); }
    launch(g3, b64, [&] { nmpsim_dense_bce(z.data(), y.data(), dz.data(), t.data(), n); });
    double l = 0; for (auto v : t) l += v;
    printf("bce loss %.12g vs %.12g\n", l / n, wl / n); if (fabs(l - wl) > 1e-9 * fabs(wl)) fails++;
    check("bce grad", dz, wdz, 0);
  }
  { // optimizers
    i64 n = 1000; std::vector<float> w(n), g(n), a(n); for (i64 i = 0; i < n; ++i) { w[i] = rnd(); g[i] = rnd(); a[i] = fabsf(rnd()); }
    auto ws = w; for (i64 i = 0; i < n; ++i) ws[i] -= 0.1f * g[i];
    auto w2 = w; launch(g3, b64, [&] { nmpsim_dense_sgd(w2.data(), g.data(), 0.1f, n); }); check("sgd", w2, ws, 0);
    auto wa = w, aa = a; for (i64 i = 0; i < n; ++i) { aa[i] += g[i] * g[i]; wa[i] -= 0.1f * g[i] / (sqrtf(aa[i]) + 1e-10f); }
    auto w3 = w, a3 = a; launch(g3, b64, [&] { nmpsim_dense_adagrad(w3.data(), g.data(), a3.data(), 0.1f, 1e-10f, n); });
    check("adagrad w", w3, wa, 1e-6f); check("adagrad a", a3, aa, 1e-6f);
  }
  printf(fails ? "FAILED %d\n" : "all ok\n", fails);
  return fails != 0;
}
