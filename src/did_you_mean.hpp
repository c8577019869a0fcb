// "Did you mean": the known name nearest a mistyped one, for the errors that name an unknown
// preset, parameter, value or family. Nearest by the optimal string alignment distance
// (insertions, deletions, substitutions and swaps of two neighbours each cost 1), accepted only
// when the distance is small for the word's length: a typo, not a different name.
#pragma once
#include <string>
#include <vector>

namespace qexact {

// The optimal string alignment distance between a and b.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest `word` when its distance is at most max(1, |word| / 4) (capped at 3),
// the first of equally near ones; "" when none is that near (or word is one of them).
std::string nearest_name(const std::string& word, const std::vector<std::string>& candidates);

// ": did you mean 'X'?" for nearest_name(word, candidates) = X, else "": appended to an error.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace qexact
