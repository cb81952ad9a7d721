// Einsum equation parsing and term expansion (graph/ops/einsum_equation.h).
#include "graph/ops/einsum_equation.h"

#include <algorithm>
#include <cctype>

#include "graph/error.h"

namespace otter::einsum {

std::string Term::text() const {
  if (!has_ellipsis()) return letters;
  return letters.substr(0, ellipsis) + "..." + letters.substr(ellipsis);
}

int letter_index(char c) { return c >= 'a' ? 26 + (c - 'a') : c - 'A'; }

namespace {

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Parses one term (no ',' or "->" in it); returns an error or "".
std::string parse_term(const std::string& s, const char* what, Term* t) {
  for (size_t i = 0; i < s.size();) {
    if (is_letter(s[i])) {
      t->letters += s[i++];
    } else if (s.compare(i, 3, "...") == 0) {
      if (t->has_ellipsis()) return str_cat(what, " '", s, "' has more than one ellipsis");
      t->ellipsis = static_cast<int>(t->letters.size());
      i += 3;
    } else {
      return str_cat(what, " '", s, "' has '", s[i], "': terms hold letters a-z, A-Z and one '...'");
    }
  }
  return "";
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep) parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

}  // namespace

std::string parse(const std::string& eq, size_t num_operands, Equation* out) {
  std::string s;
  for (char c : eq)
    if (!std::isspace(static_cast<unsigned char>(c))) s += c;
  const size_t arrow = s.find("->");
  if (arrow != std::string::npos && s.find("->", arrow + 2) != std::string::npos) return "it has more than one '->'";
  out->explicit_output = arrow != std::string::npos;
  const std::vector<std::string> terms = split(s.substr(0, arrow), ',');
  if (terms.size() != num_operands)
    return str_cat("it has ", terms.size(), " input terms for ", num_operands, " operands");
  out->inputs.assign(terms.size(), Term());
  int count[52] = {};
  bool any_ellipsis = false;
  for (size_t k = 0; k < terms.size(); ++k) {
    std::string err = parse_term(terms[k], "input term", &out->inputs[k]);
    if (!err.empty()) return err;
    for (char c : out->inputs[k].letters) ++count[letter_index(c)];
    any_ellipsis = any_ellipsis || out->inputs[k].has_ellipsis();
  }
  out->output = Term();
  if (out->explicit_output) {
    const std::string o = s.substr(arrow + 2);
    std::string err = parse_term(o, "the output term", &out->output);
    if (!err.empty()) return err;
    for (size_t i = 0; i < out->output.letters.size(); ++i) {
      const char c = out->output.letters[i];
      if (count[letter_index(c)] == 0) return str_cat("output letter '", c, "' is in no input term");
      if (out->output.letters.find(c, i + 1) != std::string::npos)
        return str_cat("output letter '", c, "' appears twice");
    }
    return "";
  }
  // Implicit output: the ellipsis, then the letters that appear once, in ASCII order.
  if (any_ellipsis) out->output.ellipsis = 0;
  for (int i = 0; i < 52; ++i)
    if (count[i] == 1) out->output.letters += static_cast<char>(i < 26 ? 'A' + i : 'a' + (i - 26));
  return "";
}

std::string expand(const Equation& e, const std::vector<int64_t>& ranks, Axes* out) {
  out->ellipsis_rank = 0;
  std::vector<int64_t> erank(e.inputs.size(), 0);
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    const Term& t = e.inputs[k];
    const int64_t letters = static_cast<int64_t>(t.letters.size());
    if (t.has_ellipsis() ? ranks[k] < letters : ranks[k] != letters)
      return str_cat("operand ", k, " has rank ", ranks[k], " but its term '", t.text(), "' names ", letters,
                     t.has_ellipsis() ? " or more" : "", " axes");
    erank[k] = ranks[k] - letters;
    out->ellipsis_rank = std::max(out->ellipsis_rank, static_cast<int>(erank[k]));
  }
  const int E = out->ellipsis_rank;
  // Letters then (at the ellipsis) the last `n` ellipsis labels.
  auto labels = [E](const Term& t, int64_t n) {
    std::vector<int> v;
    for (size_t i = 0; i <= t.letters.size(); ++i) {
      if (static_cast<int>(i) == t.ellipsis)
        for (int64_t j = E - n; j < E; ++j) v.push_back(static_cast<int>(j));
      if (i < t.letters.size()) v.push_back(E + letter_index(t.letters[i]));
    }
    return v;
  };
  out->operands.clear();
  for (size_t k = 0; k < e.inputs.size(); ++k) out->operands.push_back(labels(e.inputs[k], erank[k]));
  out->output = labels(e.output, E);
  return "";
}

}  // namespace otter::einsum
