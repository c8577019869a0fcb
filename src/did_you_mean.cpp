#include "did_you_mean.hpp"

#include <algorithm>

namespace qexact {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Three rows of the dynamic programme: the swap looks two rows back.
  const std::size_t n = b.size();
  std::vector<std::size_t> before(n + 1), prev(n + 1), cur(n + 1);
  for (std::size_t j = 0; j <= n; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= n; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[n];
}

std::string nearest_name(const std::string& word, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::min<std::size_t>(3, std::max<std::size_t>(1, word.size() / 4));
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    if (c == word) return "";
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string n = nearest_name(word, candidates);
  return n.empty() ? "" : ": did you mean '" + n + "'?";
}

}  // namespace qexact
