// llama3 RoPE scaling factors, as stored in GGUF's rope_freqs.weight (f32, [head_dim / 2]).
// For pair i, theta_i = base^(-2i / head_dim) and wavelength 2π / theta_i:
//   wavelength < original_context / high_freq_factor  -> 1          (high frequencies untouched)
//   wavelength > original_context / low_freq_factor   -> factor     (low frequencies stretched)
//   otherwise, with s = (original_context / wavelength - low) / (high - low) in [0, 1]:
//                                                      1 / ((1 - s) / factor + s)
// The rotation of pair i then uses theta_i / rope_freqs[i]. Computed in double, stored as float.
#pragma once
#include <vector>

#include "model/shapes.h"

namespace polykv {

std::vector<float> llama3_rope_freqs(const Llama3RopeScaling& scaling, double rope_theta, int head_dim);

// A layer's RoPE frequencies, [n_rot / 2]: inv_freq_i = base^(-2i / n_rot) in float32 as transformers computes
// it, divided by llama3's factors (rope_freqs.weight) and by YaRN's divisors (ModelConfig::rope_freq_divisors)
// where those are not empty. The decoder's layers and the MTP block both take theirs from here.
std::vector<float> rope_inv_freq(float base, int n_rot, const std::vector<float>& llama3_factors,
                                 const std::vector<float>& yarn_divisors);

}  // namespace polykv
