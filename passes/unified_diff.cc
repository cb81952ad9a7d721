// Unified diff by Myers' algorithm (see unified_diff.h).
#include "passes/unified_diff.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace otter {

namespace {

enum class Op : uint8_t { kEqual, kDelete, kInsert };
struct Edit {
  Op op;
  std::string_view line;
};

std::vector<std::string_view> split_lines(const std::string& s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    out.emplace_back(s.data() + start, end - start);
    start = end + 1;
  }
  return out;
}

using Lines = std::vector<std::string_view>;

// The shortest edit script of a[lo_a, lo_a + n) into b[lo_b, lo_b + m), appended to `out`.
void myers(const Lines& a, size_t lo_a, int n, const Lines& b, size_t lo_b, int m, std::vector<Edit>& out) {
  const int max = n + m;
  std::vector<int> v(2 * max + 3, 0);
  auto at = [&](int k) -> int& { return v[k + max + 1]; };
  std::vector<std::vector<int>> trace;  // trace[d][k + d]: furthest x on diagonal k after d edits
  int found_d = 0;
  for (int d = 0; d <= max; ++d) {
    bool done = false;
    for (int k = -d; k <= d; k += 2) {
      int x = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? at(k + 1) : at(k - 1) + 1;
      int y = x - k;
      while (x < n && y < m && a[lo_a + x] == b[lo_b + y]) ++x, ++y;
      at(k) = x;
      if (x >= n && y >= m) done = true;
    }
    trace.emplace_back(v.begin() + (max + 1 - d), v.begin() + (max + 1 + d + 1));
    if (done) {
      found_d = d;
      break;
    }
  }
  std::vector<Edit> rev;
  int x = n, y = m;
  for (int d = found_d; d > 0; --d) {
    const std::vector<int>& prev = trace[d - 1];
    auto pv = [&](int k) { return prev[k + d - 1]; };
    int k = x - y;
    int prev_k = (k == -d || (k != d && pv(k - 1) < pv(k + 1))) ? k + 1 : k - 1;
    int prev_x = pv(prev_k), prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) rev.push_back({Op::kEqual, a[lo_a + --x]}), --y;
    if (prev_k == k + 1) rev.push_back({Op::kInsert, b[lo_b + prev_y]});
    else rev.push_back({Op::kDelete, a[lo_a + prev_x]});
    x = prev_x;
    y = prev_y;
  }
  while (x > 0) rev.push_back({Op::kEqual, a[lo_a + --x]});
  out.insert(out.end(), rev.rbegin(), rev.rend());
}

std::vector<Edit> edit_script(const Lines& a, const Lines& b) {
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  std::vector<Edit> out;
  for (size_t i = 0; i < pre; ++i) out.push_back({Op::kEqual, a[i]});
  myers(a, pre, static_cast<int>(a.size() - pre - suf), b, pre, static_cast<int>(b.size() - pre - suf), out);
  for (size_t i = a.size() - suf; i < a.size(); ++i) out.push_back({Op::kEqual, a[i]});
  return out;
}

std::string range(size_t start, size_t len) {
  // diff -u: 1-based start; an empty range names the line before it; ",1" is left out.
  size_t first = len == 0 ? start : start + 1;
  return len == 1 ? std::to_string(first) : std::to_string(first) + "," + std::to_string(len);
}

}  // namespace

std::string unified_diff(const std::string& a, const std::string& b, const std::string& label_a,
                         const std::string& label_b, int context) {
  if (a == b) return "";
  std::vector<Edit> e = edit_script(split_lines(a), split_lines(b));
  std::string out = "--- " + label_a + "\n+++ " + label_b + "\n";
  const size_t ctx = static_cast<size_t>(std::max(context, 0));
  size_t i = 0, line_a = 0, line_b = 0;  // lines of a and b before e[i]
  while (i < e.size()) {
    size_t first = i;
    while (first < e.size() && e[first].op == Op::kEqual) ++first;
    if (first == e.size()) break;
    // Hunk: from ctx lines before the first change to ctx lines after the last change that is
    // followed by fewer than 2*ctx+1 equal lines before the next one.
    size_t start = first - std::min(ctx, first - i);
    size_t end = first;
    while (true) {
      while (end < e.size() && e[end].op != Op::kEqual) ++end;
      size_t next = end;
      while (next < e.size() && e[next].op == Op::kEqual) ++next;
      if (next == e.size() || next - end > 2 * ctx) {
        end = std::min(end + ctx, e.size());
        break;
      }
      end = next;
    }
    for (size_t k = i; k < start; ++k) ++line_a, ++line_b;
    size_t len_a = 0, len_b = 0;
    std::string body;
    for (size_t k = start; k < end; ++k) {
      char mark = e[k].op == Op::kEqual ? ' ' : e[k].op == Op::kDelete ? '-' : '+';
      len_a += e[k].op != Op::kInsert;
      len_b += e[k].op != Op::kDelete;
      body += mark;
      body.append(e[k].line);
      body += '\n';
    }
    out += "@@ -" + range(line_a, len_a) + " +" + range(line_b, len_b) + " @@\n" + body;
    line_a += len_a;
    line_b += len_b;
    i = end;
  }
  return out;
}

}  // namespace otter
