#include "spec/calibration.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "util/error.h"

namespace dspark {
using json = nlohmann::json;

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// (predicted a_k, observed) pairs for position k (1-based).
void pairs_at(const CalibrationData& data, const std::vector<double>& temps, size_t k, std::vector<double>& pred,
              std::vector<int>& obs) {
  pred.clear();
  obs.clear();
  for (size_t s = 0; s < data.conf_logits.size(); ++s) {
    const auto& z = data.conf_logits[s];
    if (z.size() < k) continue;
    double a = 1.0;
    for (size_t i = 0; i < k; ++i) a *= sigmoid(z[i] / (i < temps.size() ? temps[i] : 1.0));
    pred.push_back(a);
    obs.push_back(data.accepted[s] >= int64_t(k) ? 1 : 0);
  }
}

double ece_of(const std::vector<double>& pred, const std::vector<int>& obs) {
  if (pred.empty()) return 0;
  constexpr int kBins = 10;
  double sum_p[kBins] = {}, sum_o[kBins] = {};
  int64_t n[kBins] = {};
  for (size_t i = 0; i < pred.size(); ++i) {
    const int b = std::min(kBins - 1, int(pred[i] * kBins));
    sum_p[b] += pred[i];
    sum_o[b] += obs[i];
    ++n[b];
  }
  double ece = 0;
  for (int b = 0; b < kBins; ++b)
    if (n[b]) ece += std::abs(sum_p[b] - sum_o[b]) / double(pred.size());
  return ece;
}

double auroc_of(const std::vector<double>& pred, const std::vector<int>& obs) {
  std::vector<size_t> order(pred.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pred[a] < pred[b]; });
  // Mann-Whitney U with average ranks for ties.
  double rank_sum = 0;
  int64_t pos = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && pred[order[j]] == pred[order[i]]) ++j;
    const double avg_rank = 0.5 * double(i + 1 + j);
    for (size_t t = i; t < j; ++t)
      if (obs[order[t]]) rank_sum += avg_rank, ++pos;
    i = j;
  }
  const int64_t neg = int64_t(pred.size()) - pos;
  if (pos == 0 || neg == 0) return 0.5;
  return (rank_sum - double(pos) * double(pos + 1) / 2.0) / (double(pos) * double(neg));
}
}  // namespace

std::vector<double> Calibration::survival(const std::vector<double>& z) const {
  std::vector<double> a;
  double prod = 1.0;
  for (size_t i = 0; i < z.size(); ++i) {
    prod *= sigmoid(z[i] / (i < temperatures.size() ? temperatures[i] : 1.0));
    a.push_back(prod);
  }
  return a;
}

std::vector<PositionMetrics> calibration_metrics(const CalibrationData& data, const std::vector<double>& temps) {
  size_t g = 0;
  for (const auto& z : data.conf_logits) g = std::max(g, z.size());
  std::vector<PositionMetrics> out;
  std::vector<double> pred;
  std::vector<int> obs;
  for (size_t k = 1; k <= g; ++k) {
    pairs_at(data, temps, k, pred, obs);
    PositionMetrics m;
    m.count = int64_t(pred.size());
    m.ece = ece_of(pred, obs);
    m.auroc = auroc_of(pred, obs);
    for (size_t i = 0; i < pred.size(); ++i) m.brier += (pred[i] - obs[i]) * (pred[i] - obs[i]);
    if (!pred.empty()) m.brier /= double(pred.size());
    out.push_back(m);
  }
  return out;
}

Calibration fit_sts(const CalibrationData& data, int64_t positions) {
  if (data.conf_logits.size() != data.accepted.size() || data.conf_logits.empty())
    fail("calibration needs verify steps with confidences (got none)");
  Calibration c;
  c.temperatures.assign(size_t(positions), 1.0);
  std::vector<double> pred;
  std::vector<int> obs;
  for (size_t k = 1; k <= size_t(positions); ++k) {
    double best_t = 1.0, best_ece = 1e9;
    for (int i = 0; i <= 240; ++i) {  // T from 0.05 to 20, log-spaced
      const double t = std::exp(std::log(0.05) + (std::log(20.0) - std::log(0.05)) * i / 240.0);
      c.temperatures[k - 1] = t;
      pairs_at(data, c.temperatures, k, pred, obs);
      if (pred.empty()) break;
      const double e = ece_of(pred, obs);
      if (e < best_ece - 1e-12) best_ece = e, best_t = t;
    }
    c.temperatures[k - 1] = best_t;
  }
  return c;
}

void save_calibration(const std::string& path, const Calibration& c, const std::vector<PositionMetrics>& before,
                      const std::vector<PositionMetrics>& after) {
  auto metrics = [](const std::vector<PositionMetrics>& m) {
    json a = json::array();
    for (const auto& p : m) a.push_back({{"count", p.count}, {"ece", p.ece}, {"auroc", p.auroc}, {"brier", p.brier}});
    return a;
  };
  json j = {{"kind", "dspark-calibration"}, {"method", "sequential temperature scaling"}, {"drafter", c.drafter},
            {"temperatures", c.temperatures}, {"before", metrics(before)}, {"after", metrics(after)}};
  io::write_text_atomic(path, j.dump(2) + "\n");
}

Calibration load_calibration(const std::string& path, const std::string& fingerprint) {
  json j = json::parse(io::read_text_file(path), nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "dspark-calibration")
    fail("{} is not a calibration file (run dspark calibrate)", path);
  Calibration c;
  try {
    c.drafter = j.at("drafter").get<std::string>();
    c.temperatures = j.at("temperatures").get<std::vector<double>>();
  } catch (const json::exception&) {
    fail("{}: malformed calibration file", path);
  }
  for (double t : c.temperatures)
    if (!(t > 0) || !std::isfinite(t)) fail("{}: temperatures must be positive", path);
  if (c.drafter != fingerprint) fail("{} was fitted for another drafter; run dspark calibrate again", path);
  return c;
}

void write_reliability_svg(const std::string& path, const CalibrationData& data, const Calibration& calibration) {
  size_t g = 0;
  for (const auto& z : data.conf_logits) g = std::max(g, z.size());
  const int W = 220, H = 220, pad = 30;
  std::string svg = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='10'>\n",
                                W * int(std::max<size_t>(g, 1)), H + 20);
  std::vector<double> ones(g, 1.0), pred;
  std::vector<int> obs;
  for (size_t k = 1; k <= g; ++k) {
    const int x0 = int(k - 1) * W;
    svg += fmt::format("<g transform='translate({},10)'><rect x='{}' y='0' width='{}' height='{}' fill='none' stroke='#999'/>"
                       "<line x1='{}' y1='{}' x2='{}' y2='0' stroke='#ccc'/><text x='{}' y='{}'>position {}</text>\n",
                       x0, pad, W - pad - 10, H - pad, pad, H - pad, W - 10, pad + 4, 12, k);
    for (int pass = 0; pass < 2; ++pass) {
      pairs_at(data, pass == 0 ? ones : calibration.temperatures, k, pred, obs);
      double sp[10] = {}, so[10] = {};
      int n[10] = {};
      for (size_t i = 0; i < pred.size(); ++i) {
        const int b = std::min(9, int(pred[i] * 10));
        sp[b] += pred[i], so[b] += obs[i], ++n[b];
      }
      std::string points;
      for (int b = 0; b < 10; ++b)
        if (n[b] > 0) {
          const double px = pad + (W - pad - 10) * sp[b] / n[b], py = (H - pad) * (1 - so[b] / n[b]);
          points += fmt::format("{:.1f},{:.1f} ", px, py);
        }
      svg += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='1.5'/>\n", points,
                         pass == 0 ? "#d62728" : "#1f77b4");
    }
    svg += "</g>\n";
  }
  svg += fmt::format("<text x='5' y='{}'>x: predicted survival, y: observed acceptance; red: raw, blue: STS</text></svg>\n", H + 15);
  io::write_text_atomic(path, svg);
}

}  // namespace dspark
