// Keys [B, T, H, D] -> [B, H, D, T] (K^T per head, as attention's scores read it): the
// innermost axis D becomes the third, T becomes innermost. One thread per element.
__global__ void k_transpose_heads(const float* k, float* kt, int B, int T, int H, int D) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= B * T * H * D) return;
    int d = n % D;
    int h = (n / D) % H;
    int t = (n / (D * H)) % T;
    int b = n / (D * H * T);
    kt[((b * H + h) * D + d) * T + t] = k[n];
}
