#include "exposition.h"

#include <cstdlib>
#include <sstream>

namespace ltserve::testing {

namespace {

// Reads `"value"` at text[pos] (pos at the opening quote), undoing \\, \" and \n.
bool ReadQuoted(const std::string& text, std::size_t& pos, std::string* out) {
  if (pos >= text.size() || text[pos] != '"') return false;
  for (++pos; pos < text.size(); ++pos) {
    char c = text[pos];
    if (c == '"') {
      ++pos;
      return true;
    }
    if (c == '\\') {
      if (++pos == text.size()) return false;
      c = text[pos] == 'n' ? '\n' : text[pos];
    }
    out->push_back(c);
  }
  return false;
}

bool ReadLabels(const std::string& line, std::size_t& pos, LabelSet* labels) {
  ++pos;  // '{'
  while (pos < line.size() && line[pos] != '}') {
    const std::size_t eq = line.find('=', pos);
    if (eq == std::string::npos) return false;
    std::string name = line.substr(pos, eq - pos);
    pos = eq + 1;
    std::string value;
    if (!ReadQuoted(line, pos, &value)) return false;
    if (!labels->emplace(std::move(name), std::move(value)).second) return false;  // duplicate
    if (pos < line.size() && line[pos] == ',') ++pos;
  }
  if (pos >= line.size()) return false;
  ++pos;  // '}'
  return true;
}

bool ReadSample(const std::string& line, Sample* sample) {
  std::size_t pos = line.find_first_of("{ ");
  if (pos == std::string::npos || pos == 0) return false;
  sample->name = line.substr(0, pos);
  if (line[pos] == '{' && !ReadLabels(line, pos, &sample->labels)) return false;
  if (pos >= line.size() || line[pos] != ' ') return false;
  const std::string value = line.substr(pos + 1);
  char* end = nullptr;
  sample->value = std::strtod(value.c_str(), &end);  // also reads +Inf, -Inf and NaN
  return end != value.c_str() && *end == '\0';
}

}  // namespace

Exposition ParseExposition(const std::string& text) {
  Exposition result;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      result.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    Sample sample;
    if (ReadSample(line, &sample)) {
      result.samples.push_back(std::move(sample));
    } else {
      result.errors.push_back(line);
    }
  }
  return result;
}

std::optional<double> Exposition::Value(const std::string& name, const LabelSet& labels) const {
  std::optional<double> found;
  for (const Sample& s : samples) {
    if (s.name != name || s.labels != labels) continue;
    if (found.has_value()) return std::nullopt;  // a duplicate series is an error too
    found = s.value;
  }
  return found;
}

std::vector<Sample> Exposition::Matching(const std::string& name, const LabelSet& subset) const {
  std::vector<Sample> out;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [key, value] : subset) {
      auto it = s.labels.find(key);
      all = all && it != s.labels.end() && it->second == value;
    }
    if (all) out.push_back(s);
  }
  return out;
}

bool Exposition::HasFamily(const std::string& prefix) const {
  for (const Sample& s : samples) {
    if (s.name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace ltserve::testing
