// Backward of a token + position embedding: each thread takes one (row, channel) element of
// the output gradient and adds it to the token's row of the table gradient and to the
// position's row of the position gradient, with atomics (tokens repeat).
#include <cuda_runtime.h>

__global__ void embedding_backward(float* d_table, float* d_pos, const float* grad,
                                   const int* tokens, int rows, int seq, int width) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= rows * width) return;
    int r = e / width, c = e % width;
    int tok = tokens[r];
    atomicAdd(&d_table[tok * width + c], grad[e]);
    atomicAdd(&d_pos[(r % seq) * width + c], grad[e]);
}

// one thread per channel, walking the rows in order: no atomics, same sums
__global__ void embedding_backward_cols(float* d_table, const float* grad, const int* tokens,
                                        int rows, int width) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= width) return;
    for (int r = 0; r < rows; ++r)
        d_table[tokens[r] * width + c] += grad[r * width + c];
}

void embedding_backward_all(float* d_table, float* d_pos, const float* grad, const int* tokens,
                            int batch, int seq, int width) {
    int rows = batch * seq;
    embedding_backward<<<(rows * width + 255) / 256, 256>>>(d_table, d_pos, grad, tokens, rows,
                                                            seq, width);
    embedding_backward_cols<<<(width + 127) / 128, 128>>>(d_table, grad, tokens, rows, width);
}

int main() {
    const int batch = 4, seq = 64, width = 96, vocab = 500;
    float *d_table, *d_pos, *grad;
    int* tokens;
    cudaMalloc(&d_table, vocab * width * sizeof(float));
    cudaMalloc(&d_pos, seq * width * sizeof(float));
    cudaMalloc(&grad, batch * seq * width * sizeof(float));
    cudaMalloc(&tokens, batch * seq * sizeof(int));
    embedding_backward_all(d_table, d_pos, grad, tokens, batch, seq, width);
    cudaDeviceSynchronize();
    return 0;
}
