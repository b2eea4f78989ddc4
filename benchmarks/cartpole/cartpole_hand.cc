// A hand-written CartPole rollout for the CPU: what a careful C++ programmer writes, and the
// limit fusionjit's generated code is measured against (benchmarks/loops.py,
// benchmarks/cartpole). Gymnasium's CartPole-v1 physics (explicit Euler) in float32, with
// the float operations in the order of the Python step (same rounding), actions from a
// pool [steps, envs] and reset states from a pool [pool, 4, envs] (row step % pool).
//
// Environment blocks outer, steps inner: a block of kBlock environments keeps its state in
// registers for all steps; sin and cos vectorised through glibc's libmvec; the blocks are
// split over `threads` threads. Each block counts its resets per step; the counts are
// summed after, in block order.
//
// Build: g++ -O3 -march=native -fopenmp-simd -fno-math-errno -fno-tree-sink -shared -fPIC -o x.so x.cc
//        -lmvec -lm (hand.py; -fno-tree-sink: see there)
#include <cstdint>
#include <thread>
#include <vector>

extern "C" {
// Declared with their SIMD variants (glibc's math.h does so only under -ffast-math, which
// would also change divisions): the vectoriser then calls libmvec.
__attribute__((simd("notinbranch"))) float sinf(float);
__attribute__((simd("notinbranch"))) float cosf(float);
}

namespace {

constexpr int kBlock = 64;
constexpr float kGravity = 9.8f, kMassPole = 0.1f, kLength = 0.5f, kForce = 10.0f, kTau = 0.02f;
constexpr float kTotalMass = 1.1f;                       // float(1.0 + 0.1)
constexpr float kPoleMassLength = 0.05f;                 // float(0.1 * 0.5)
constexpr float kFourThirds = 1.3333333333333333f;       // float(4.0 / 3.0)
constexpr float kThetaThreshold = 0.20943951023931953f;  // 12 * 2 * pi / 360
constexpr float kXThreshold = 2.4f;

void RunBlocks(float* x, float* x_dot, float* theta, float* theta_dot, const uint8_t* actions,
               const float* resets, int64_t pool, int64_t envs, int64_t steps, int64_t first_block,
               int64_t last_block, int32_t* counts /* [blocks, steps] */) {
  for (int64_t blk = first_block; blk < last_block; ++blk) {
    int64_t lo = blk * kBlock;
    int n = static_cast<int>(envs - lo < kBlock ? envs - lo : kBlock);
    float s0[kBlock], s1[kBlock], s2[kBlock], s3[kBlock];
    for (int i = 0; i < n; ++i) {
      s0[i] = x[lo + i];
      s1[i] = x_dot[lo + i];
      s2[i] = theta[lo + i];
      s3[i] = theta_dot[lo + i];
    }
    int32_t* count = counts + blk * steps;
    float cos_theta[kBlock], sin_theta[kBlock];
    for (int64_t t = 0; t < steps; ++t) {
      const uint8_t* a = actions + t * envs + lo;
      const float* r = resets + (t % pool) * 4 * envs + lo;
      // cos and sin in loops of their own: in one loop GCC merges them into a scalar
      // sincosf call and gives up vectorising.
#pragma omp simd
      for (int i = 0; i < n; ++i) cos_theta[i] = cosf(s2[i]);
#pragma omp simd
      for (int i = 0; i < n; ++i) sin_theta[i] = sinf(s2[i]);
      int32_t done_count = 0;
#pragma omp simd reduction(+ : done_count)
      for (int i = 0; i < n; ++i) {
        float force = a[i] != 0 ? kForce : -kForce;
        float c = cos_theta[i], s = sin_theta[i];
        float temp = (force + kPoleMassLength * (s3[i] * s3[i]) * s) / kTotalMass;
        float thetaacc = (kGravity * s - c * temp) / (kLength * (kFourThirds - kMassPole * (c * c) / kTotalMass));
        float xacc = temp - kPoleMassLength * thetaacc * c / kTotalMass;
        float n0 = s0[i] + kTau * s1[i];
        float n1 = s1[i] + kTau * xacc;
        float n2 = s2[i] + kTau * s3[i];
        float n3 = s3[i] + kTau * thetaacc;
        int done = (n0 < -kXThreshold) | (n0 > kXThreshold) | (n2 < -kThetaThreshold) | (n2 > kThetaThreshold);
        // The reset rows are read whatever `done` is: a load under a condition is control
        // flow, which GCC vectorises only with AVX-512's masked loads (with AVX2 this loop
        // stayed scalar: 4x slower).
        float r0 = r[i], r1 = r[envs + i], r2 = r[2 * envs + i], r3 = r[3 * envs + i];
        s0[i] = done ? r0 : n0;
        s1[i] = done ? r1 : n1;
        s2[i] = done ? r2 : n2;
        s3[i] = done ? r3 : n3;
        done_count += done;
      }
      count[t] = done_count;
    }
    for (int i = 0; i < n; ++i) {
      x[lo + i] = s0[i];
      x_dot[lo + i] = s1[i];
      theta[lo + i] = s2[i];
      theta_dot[lo + i] = s3[i];
    }
  }
}

}  // namespace

extern "C" void cartpole_rollout(float* x, float* x_dot, float* theta, float* theta_dot,
                                 const uint8_t* actions, const float* resets, int64_t pool,
                                 int64_t envs, int64_t steps, int32_t* resets_per_step, int threads) {
  int64_t blocks = (envs + kBlock - 1) / kBlock;
  std::vector<int32_t> counts(static_cast<size_t>(blocks * steps), 0);
  if (threads < 1) threads = 1;
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    int64_t first = blocks * w / threads, last = blocks * (w + 1) / threads;
    workers.emplace_back(RunBlocks, x, x_dot, theta, theta_dot, actions, resets, pool, envs, steps, first,
                         last, counts.data());
  }
  for (std::thread& t : workers) t.join();
  for (int64_t t = 0; t < steps; ++t) {
    int32_t total = 0;
    for (int64_t b = 0; b < blocks; ++b) total += counts[b * steps + t];
    resets_per_step[t] = total;
  }
}
