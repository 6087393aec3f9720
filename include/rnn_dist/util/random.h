// Deterministic randomness. Everything random in training is a pure function of (seed, counters) so
// that runs are reproducible at any thread or rank count and a resumed run needs no saved RNG stream:
// counter-based uniform01() for dropout masks, and a small seeded generator (Rng) for initialisation,
// shuffling and sampling.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace rnn_dist {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Combines seeds/counters into one well-mixed seed.
inline uint64_t mix_seed(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b + 0x632BE59BD9B4E019ull)); }

// Uniform float in [0, 1) as a function of (seed, i).
inline float uniform01(uint64_t seed, uint64_t i) {
  return static_cast<float>(splitmix64(seed ^ splitmix64(i)) >> 40) * (1.0f / 16777216.0f);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(splitmix64(seed)) {}
  uint64_t next() { return splitmix64(state_++); }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t below(uint64_t n) { return next() % n; }  // bias negligible for the sizes used here
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  uint64_t state_;
};

}  // namespace rnn_dist
