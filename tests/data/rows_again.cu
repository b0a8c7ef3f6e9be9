// every block walks every (b, h) row (as llm.c's naive attention backward does): each thread
// loops over B * H * T * T steps, which no tensor shape shows. Two kernels, one macro (TERM is
// what a step adds): `rows_again`, and `rows_again_measured`, which reads each row through its
// pointer alone (the extent of x is measured)
#define ROWS_AGAIN(NAME, TERM)                                                               \
    __global__ void NAME(float* out, const float* x, int B, int T, int C, int H) {           \
        int c = blockIdx.x * blockDim.x + threadIdx.x;                                       \
        if (c < T) {                                                                         \
            float scale = 1.0f / sqrtf(C / H);                                               \
            for (int b = 0; b < B; b++) {                                                    \
                for (int h = 0; h < H; h++) {                                                \
                    for (int r = c; r < T; r++) {                                            \
                        const float* row = x + (b * H + h) * T * T + r * T;                  \
                        float acc = 0.0f;                                                    \
                        for (int k = 0; k <= r; k++) {                                       \
                            acc += TERM;                                                     \
                        }                                                                    \
                        out[(b * H + h) * T * T + r * T + c] = acc;                          \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }

ROWS_AGAIN(rows_again, scale * row[k] * ((k == c ? 1.0f : 0.0f) - row[c]))
ROWS_AGAIN(rows_again_measured, scale * row[k] * (k == c ? 1.0f : 0.5f))

void launch(float* out, const float* x, int B, int T, int C, int H) {
    rows_again<<<dim3((T + 255) / 256, B * H), 256>>>(out, x, B, T, C, H);
}

void launch_measured(float* out, const float* x, int B, int T, int C, int H) {
    rows_again_measured<<<dim3((T + 255) / 256, B * H), 256>>>(out, x, B, T, C, H);
}
