// Mean and sample standard deviation, as the benchmark commands report
// their repeated runs (llama-bench's "mean ± std").
#ifndef KVAULT_BENCH_SCENARIOS_MEAN_STD_H_
#define KVAULT_BENCH_SCENARIOS_MEAN_STD_H_

#include <cmath>
#include <vector>

namespace kvault::bench {

// Sets *mean and *std (n - 1 in the denominator; 0 for one value) of the
// non-empty `values`.
inline void MeanStd(const std::vector<double>& values, double* mean,
                    double* std) {
  double sum = 0;
  for (double v : values) sum += v;
  *mean = sum / values.size();
  double sq = 0;
  for (double v : values) sq += (v - *mean) * (v - *mean);
  *std = values.size() > 1 ? std::sqrt(sq / (values.size() - 1)) : 0;
}

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_MEAN_STD_H_
