// The dense path of DLRM on the GPU (nmpsim-dlrm's CudaDense): the element-wise
// parts of the MLPs (the GEMMs are cuBLAS), the feature interaction, the loss
// and the dense optimizers. Compiled at run time by NVRTC; no CUDA headers.
//
// Every array is row-major, as on the CPU path. Sizes arrive as 64-bit
// integers and every index is computed in 64 bits; every kernel is a
// grid-stride loop with bounds checks, so any grid covers any size.
//
// Feature layout of the interaction: feature 0 of sample b is row b of `x`
// (the bottom MLP's output, B x dim); feature t + 1 is row b of table t's
// pooled embedding, stored at `pooled + (t * B + b) * dim` (the tables one
// after another, each B x dim).

typedef long long i64;

#define GRID_STRIDE(i, n)                                                      \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
         i += (i64)blockDim.x * gridDim.x)

__device__ __forceinline__ const float *feature(const float *x, const float *pooled,
                                                i64 batch, i64 dim, i64 b, i64 f) {
    return f == 0 ? x + b * dim : pooled + ((f - 1) * batch + b) * dim;
}

// y[r][c] = act(y[r][c] + bias[c]) over a rows x cols matrix.
extern "C" __global__ void nmpsim_dense_bias_act(float *y, const float *bias, i64 rows,
                                                 i64 cols, int relu) {
    if (cols <= 0) return;
    GRID_STRIDE(i, rows * cols) {
        float v = y[i] + bias[i % cols];
        y[i] = relu ? fmaxf(v, 0.0f) : v;
    }
}

// g[i] = 0 where the layer's output y[i] is not positive (through the ReLU).
extern "C" __global__ void nmpsim_dense_relu_backward(float *g, const float *y, i64 n) {
    GRID_STRIDE(i, n) {
        if (!(y[i] > 0.0f)) g[i] = 0.0f;
    }
}

// db[c] = sum over rows of g[r][c]. Block (32, up to COLSUM_BY): threadIdx.x
// picks a column of a group of 32, threadIdx.y strides over the rows; the
// partial sums are added in shared memory in a fixed order. Grid-stride over
// column groups; threads past (32, COLSUM_BY) only take part in the barriers.
#define COLSUM_BY 16
extern "C" __global__ void nmpsim_dense_bias_grad(const float *g, float *db, i64 rows,
                                                  i64 cols) {
    __shared__ float part[COLSUM_BY][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ny = blockDim.y < COLSUM_BY ? (int)blockDim.y : COLSUM_BY;
    const bool active = tx < 32 && ty < ny;
    for (i64 c0 = (i64)blockIdx.x * 32; c0 < cols; c0 += (i64)gridDim.x * 32) {
        const i64 c = c0 + tx;
        if (active) {
            float s = 0.0f;
            if (c < cols) {
                for (i64 r = ty; r < rows; r += ny) s += g[r * cols + c];
            }
            part[ty][tx] = s;
        }
        __syncthreads();
        if (active && ty == 0 && c < cols) {
            float t = 0.0f;
            for (int k = 0; k < ny; ++k) t += part[k][tx];
            db[c] = t;
        }
        __syncthreads();
    }
}

// Index of the strictly-lower-triangle pair p = i (i - 1) / 2 + j (j < i).
__device__ __forceinline__ void pair_of(i64 p, i64 *pi, i64 *pj) {
    i64 i = (i64)((1.0 + sqrt(1.0 + 8.0 * (double)p)) * 0.5);
    // Correct the floating-point guess.
    while (i * (i - 1) / 2 > p) --i;
    while ((i + 1) * i / 2 <= p) ++i;
    *pi = i;
    *pj = p - i * (i - 1) / 2;
}

// The `dot` interaction: z (B x w), w = dim + n (n - 1) / 2, n = tables + 1.
// z[b][0..dim] = x[b]; z[b][dim + i (i - 1) / 2 + j] = <f_i, f_j> for j < i,
// pairs in the order (1,0), (2,0), (2,1), (3,0), ... as interaction.rs.
// One block per sample (grid-stride over samples); threads over the pairs.
extern "C" __global__ void nmpsim_dense_dot_forward(const float *x, const float *pooled,
                                                    float *z, i64 batch, i64 tables,
                                                    i64 dim) {
    const i64 n = tables + 1;
    const i64 pairs = n * (n - 1) / 2;
    const i64 w = dim + pairs;
    for (i64 b = blockIdx.x; b < batch; b += gridDim.x) {
        float *zb = z + b * w;
        const float *xb = x + b * dim;
        for (i64 e = threadIdx.x; e < dim; e += blockDim.x) zb[e] = xb[e];
        for (i64 p = threadIdx.x; p < pairs; p += blockDim.x) {
            i64 i, j;
            pair_of(p, &i, &j);
            const float *fi = feature(x, pooled, batch, dim, b, i);
            const float *fj = feature(x, pooled, batch, dim, b, j);
            float acc = 0.0f;
            for (i64 e = 0; e < dim; ++e) acc += fi[e] * fj[e];
            zb[dim + p] = acc;
        }
    }
}

// Backward of the `dot` interaction: for feature m of sample b,
// df_m = [m == 0] dz[b][0..dim] + sum_{k != m} s(m, k) f_k, with s(i, j) the
// output gradient of pair (max, min), summed in ascending k as the CPU path.
// dx is B x dim; dpooled holds the tables one after another (as `pooled`).
// Grid-stride over (sample, feature, element).
extern "C" __global__ void nmpsim_dense_dot_backward(const float *x, const float *pooled,
                                                     const float *dz, float *dx,
                                                     float *dpooled, i64 batch,
                                                     i64 tables, i64 dim) {
    const i64 n = tables + 1;
    const i64 w = dim + n * (n - 1) / 2;
    GRID_STRIDE(idx, batch * n * dim) {
        const i64 e = idx % dim;
        const i64 m = (idx / dim) % n;
        const i64 b = idx / (dim * n);
        const float *dzb = dz + b * w;
        float acc = m == 0 ? dzb[e] : 0.0f;
        for (i64 k = 0; k < n; ++k) {
            if (k == m) continue;
            const i64 hi = k > m ? k : m, lo = k > m ? m : k;
            const float s = dzb[dim + hi * (hi - 1) / 2 + lo];
            acc += s * feature(x, pooled, batch, dim, b, k)[e];
        }
        if (m == 0)
            dx[b * dim + e] = acc;
        else
            dpooled[((m - 1) * batch + b) * dim + e] = acc;
    }
}

// The `cat` interaction: z[b] = [x[b], e_1[b], ..., e_T[b]] (B x n dim).
extern "C" __global__ void nmpsim_dense_cat_forward(const float *x, const float *pooled,
                                                    float *z, i64 batch, i64 tables,
                                                    i64 dim) {
    const i64 n = tables + 1;
    GRID_STRIDE(idx, batch * n * dim) {
        const i64 e = idx % dim;
        const i64 f = (idx / dim) % n;
        const i64 b = idx / (dim * n);
        z[idx] = feature(x, pooled, batch, dim, b, f)[e];
    }
}

// Backward of `cat`: the output gradient split back into x's and each table's.
extern "C" __global__ void nmpsim_dense_cat_backward(const float *dz, float *dx,
                                                     float *dpooled, i64 batch,
                                                     i64 tables, i64 dim) {
    const i64 n = tables + 1;
    GRID_STRIDE(idx, batch * n * dim) {
        const i64 e = idx % dim;
        const i64 f = (idx / dim) % n;
        const i64 b = idx / (dim * n);
        const float v = dz[idx];
        if (f == 0)
            dx[b * dim + e] = v;
        else
            dpooled[((f - 1) * batch + b) * dim + e] = v;
    }
}

// Binary cross-entropy from logits, stable, in double as loss.rs: per-sample
// loss terms (the host adds them in order and divides by n) and the gradient
// (sigmoid(z) - y) / n of each logit.
extern "C" __global__ void nmpsim_dense_bce(const float *logits, const float *labels,
                                            float *dlogits, double *terms, i64 n) {
    const double inv = 1.0 / (double)(n > 0 ? n : 1);
    GRID_STRIDE(i, n) {
        const double z = (double)logits[i], y = (double)labels[i];
        terms[i] = fmax(z, 0.0) - z * y + log1p(exp(-fabs(z)));
        double s;
        if (z >= 0.0) {
            s = 1.0 / (1.0 + exp(-z));
        } else {
            const double ez = exp(z);
            s = ez / (1.0 + ez);
        }
        dlogits[i] = (float)((s - y) * inv);
    }
}

// SGD: w -= lr * g.
extern "C" __global__ void nmpsim_dense_sgd(float *w, const float *g, float lr, i64 n) {
    GRID_STRIDE(i, n) { w[i] -= lr * g[i]; }
}

// Adagrad as PyTorch: a += g^2; w -= lr * g / (sqrt(a) + eps).
extern "C" __global__ void nmpsim_dense_adagrad(float *w, const float *g, float *a,
                                                float lr, float eps, i64 n) {
    GRID_STRIDE(i, n) {
        const float d = g[i];
        const float acc = a[i] + d * d;
        a[i] = acc;
        w[i] -= lr * d / (sqrtf(acc) + eps);
    }
}
