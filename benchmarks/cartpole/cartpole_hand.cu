// A hand-written CartPole rollout for the GPU: what a careful CUDA programmer writes, and
// the limit fusionjit's generated GPU code is measured against (benchmarks/cartpole/gpu.py).
// One thread per environment, all steps in one launch, the state in registers; Gymnasium's
// CartPole-v1 physics in float32 with the operations in the order of the Python step
// (precise sin, cos and division: no fast math), actions from a pool [steps, envs], reset
// states from a pool [pool, 4, envs] (row step % pool). Each warp counts its resets per step
// with a warp reduction; the host (or a second kernel) sums the warps' counts in order.
//
// Compiled at run time by NVRTC (CuPy's RawModule) or by nvcc.
// No headers: NVRTC compiles this without the C++ library.
typedef long long int64_t;
typedef int int32_t;
typedef unsigned char uint8_t;

namespace {
constexpr float kGravity = 9.8f, kMassPole = 0.1f, kLength = 0.5f, kForce = 10.0f, kTau = 0.02f;
constexpr float kTotalMass = 1.1f;                       // float(1.0 + 0.1)
constexpr float kPoleMassLength = 0.05f;                 // float(0.1 * 0.5)
constexpr float kFourThirds = 1.3333333333333333f;       // float(4.0 / 3.0)
constexpr float kThetaThreshold = 0.20943951023931953f;  // 12 * 2 * pi / 360
constexpr float kXThreshold = 2.4f;
}  // namespace

extern "C" __global__ void cartpole_rollout(float* x, float* x_dot, float* theta, float* theta_dot,
                                            const uint8_t* actions, const float* resets, int64_t pool,
                                            int64_t envs, int64_t steps, int32_t* warp_counts /* [warps, steps] */) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t warp = i / 32;
  bool active = i < envs;
  int64_t e = active ? i : envs - 1;
  float s0 = x[e], s1 = x_dot[e], s2 = theta[e], s3 = theta_dot[e];
  for (int64_t t = 0; t < steps; ++t) {
    float force = actions[t * envs + e] != 0 ? kForce : -kForce;
    float c = cosf(s2), s = sinf(s2);
    float temp = (force + kPoleMassLength * (s3 * s3) * s) / kTotalMass;
    float thetaacc = (kGravity * s - c * temp) / (kLength * (kFourThirds - kMassPole * (c * c) / kTotalMass));
    float xacc = temp - kPoleMassLength * thetaacc * c / kTotalMass;
    float n0 = s0 + kTau * s1;
    float n1 = s1 + kTau * xacc;
    float n2 = s2 + kTau * s3;
    float n3 = s3 + kTau * thetaacc;
    bool done = (n0 < -kXThreshold) | (n0 > kXThreshold) | (n2 < -kThetaThreshold) | (n2 > kThetaThreshold);
    const float* r = resets + (t % pool) * 4 * envs + e;
    s0 = done ? r[0] : n0;
    s1 = done ? r[envs] : n1;
    s2 = done ? r[2 * envs] : n2;
    s3 = done ? r[3 * envs] : n3;
    unsigned count = __popc(__ballot_sync(0xffffffffu, done && active));
    if ((threadIdx.x & 31) == 0) warp_counts[warp * steps + t] = static_cast<int32_t>(count);
  }
  if (active) {
    x[e] = s0;
    x_dot[e] = s1;
    theta[e] = s2;
    theta_dot[e] = s3;
  }
}

// The reset counts per step: the warps' counts summed in warp order.
extern "C" __global__ void sum_warp_counts(const int32_t* warp_counts, int64_t warps, int64_t steps,
                                           int32_t* resets_per_step) {
  int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= steps) return;
  int32_t total = 0;
  for (int64_t w = 0; w < warps; ++w) total += warp_counts[w * steps + t];
  resets_per_step[t] = total;
}
