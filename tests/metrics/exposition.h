// A reader of the Prometheus text format for the tests: enough of it to check what
// Metrics::Serialize writes, written from the format's specification rather than from the
// serializer, so that the two can disagree.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ltserve::testing {

using LabelSet = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  LabelSet labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // from "# TYPE name type"
  std::vector<std::string> errors;           // lines that could not be read

  // The value of the one sample with exactly this name and these labels.
  std::optional<double> Value(const std::string& name, const LabelSet& labels) const;
  // Every sample of `name` whose labels include `subset`.
  std::vector<Sample> Matching(const std::string& name, const LabelSet& subset) const;
  bool HasFamily(const std::string& prefix) const;  // any sample whose name starts so
};

Exposition ParseExposition(const std::string& text);

}  // namespace ltserve::testing
