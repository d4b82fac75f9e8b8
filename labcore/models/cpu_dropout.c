/* Inverted dropout in one pass over memory, for the CPU (see labcore/models/cpu_kernels.py).
 *
 * y[i] = x[i] * (keep(i) ? scale : 0), where keep(i) compares the i-th 16-bit quarter of a SplitMix64 stream
 * with a threshold. The stream is a pure function of (seed, i): the mask needs no storage, the backward pass
 * recomputes it from the seed, and the result does not depend on how many threads share the work.
 *
 * Built by labcore/machine/native.py with the machine's C compiler (-O3 -march=native -fopenmp). The OpenMP
 * runtime resolves to the one torch has already loaded (the same soname), so no second thread pool starts.
 */
#include <stdint.h>
#include <string.h>

/* Elements a thread handles at a time: the random words for a block are made in one vectorised loop, then
 * applied in another. */
#define BLOCK 1024
#define WORDS (BLOCK / 4)
#define GOLDEN 0x9e3779b97f4a7c15ULL

/* SplitMix64's output function: state seed + k * GOLDEN gives the k-th 64-bit word of the stream. */
static inline uint64_t splitmix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void quarters(uint64_t seed, int64_t block, uint16_t *out) {
    uint64_t words[WORDS];
    uint64_t first = (uint64_t)block * WORDS;
    for (int w = 0; w < WORDS; ++w) words[w] = splitmix64(seed + (first + (uint64_t)w) * GOLDEN);
    memcpy(out, words, sizeof words); /* little-endian: quarter i of the block is bits 16*(i%4) of word i/4 */
}

static inline int64_t block_length(int64_t n, int64_t block) {
    int64_t rest = n - block * BLOCK;
    return rest < BLOCK ? rest : BLOCK;
}

/* bf16 travels as 16-bit words: the product is formed in fp32 and rounded to nearest, ties to even, as torch
 * rounds; a NaN stays a NaN. */
static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float times_f32(float x, float s) { return x * s; }
static inline uint16_t times_bf16(uint16_t x, float s) { return f32_to_bf16(bf16_to_f32(x) * s); }

/* y[i] = x[i] * (scale where kept, else 0) for one element type; TIMES(x, s) multiplies an element. */
#define LAB_DROPOUT(NAME, TYPE, TIMES)                                                                          \
    void NAME(const TYPE *restrict x, TYPE *restrict y, int64_t n, uint64_t seed, uint32_t threshold,          \
              float scale, int threads) {                                                                      \
        int64_t blocks = (n + BLOCK - 1) / BLOCK;                                                              \
        _Pragma("omp parallel for schedule(static) num_threads(threads)")                                     \
        for (int64_t b = 0; b < blocks; ++b) {                                                                 \
            uint16_t q[BLOCK];                                                                                 \
            quarters(seed, b, q);                                                                              \
            const TYPE *xb = x + b * BLOCK;                                                                    \
            TYPE *yb = y + b * BLOCK;                                                                          \
            int64_t len = block_length(n, b);                                                                  \
            for (int64_t i = 0; i < len; ++i) yb[i] = TIMES(xb[i], q[i] >= threshold ? scale : 0.0f);        \
        }                                                                                                      \
    }

LAB_DROPOUT(lab_dropout_f32, float, times_f32)
LAB_DROPOUT(lab_dropout_bf16, uint16_t, times_bf16)
