// A gain and shift staged in dynamic shared memory declared as bytes (`extern __shared__ char`),
// written and read as float4 through reinterpret_cast, then applied to each row:
// y[r, c] = x[r, c] * gain[c] + shift[c]. Rows are one warp each; C is a multiple of 4.
#include <cuda_runtime.h>

__global__ void scale_rows_staged(float* y, const float* x, const float* gain, const float* shift,
                                  int rows, int C) {
    extern __shared__ char stage[];
    float4* s_gain = reinterpret_cast<float4*>(stage);
    float4* s_shift = reinterpret_cast<float4*>(stage) + C / 4;
    for (int i = threadIdx.x + blockDim.x * threadIdx.y; i < C / 4; i += blockDim.x * blockDim.y) {
        s_gain[i] = reinterpret_cast<const float4*>(gain)[i];
        s_shift[i] = reinterpret_cast<const float4*>(shift)[i];
    }
    __syncthreads();
    int r = blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)r * C);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)r * C);
    for (int i = threadIdx.x; i < C / 4; i += blockDim.x) {
        float4 v = xr[i], g = s_gain[i], b = s_shift[i];
        yr[i] = make_float4(v.x * g.x + b.x, v.y * g.y + b.y, v.z * g.z + b.z, v.w * g.w + b.w);
    }
}

void scale_rows(float* y, const float* x, const float* gain, const float* shift, int rows, int C) {
    dim3 block(32, 4);
    size_t smem = 2 * C * sizeof(float);
    scale_rows_staged<<<(rows + 3) / 4, block, smem>>>(y, x, gain, shift, rows, C);
}

int main() {
    const int rows = 100, C = 256;
    float *y, *x, *gain, *shift;
    cudaMalloc(&y, rows * C * sizeof(float));
    cudaMalloc(&x, rows * C * sizeof(float));
    cudaMalloc(&gain, C * sizeof(float));
    cudaMalloc(&shift, C * sizeof(float));
    scale_rows(y, x, gain, shift, rows, C);
    cudaDeviceSynchronize();
    return 0;
}
