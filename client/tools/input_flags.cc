#include "input_flags.h"

#include <charconv>
#include <string_view>

namespace ltserve::client {

Result<std::map<std::string, std::vector<std::int64_t>>> ParseShapeFlags(
    const std::vector<std::string>& items) {
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const std::string& spec : items) {
    const auto colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("--shape '" + spec + "': expected INPUT:d1,d2,...");
    }
    std::vector<std::int64_t>& dims = shapes[spec.substr(0, colon)];
    dims.clear();  // a repeated flag replaces the earlier one
    std::string_view rest = std::string_view(spec).substr(colon + 1);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      std::int64_t dim = -1;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), dim);
      if (error != std::errc() || end != item.data() + item.size() || dim < 0) {
        return InvalidArgument("--shape '" + spec + "': '" + std::string(item) + "' is not a dimension");
      }
      dims.push_back(dim);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return shapes;
}

Result<std::map<std::string, std::string>> ParseInputFileFlags(const std::vector<std::string>& items,
                                                               const std::vector<InputSpec>& specs) {
  std::map<std::string, std::string> files;
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    if (eq != std::string::npos) {
      files[item.substr(0, eq)] = item.substr(eq + 1);
    } else if (specs.size() == 1) {
      files[specs[0].name] = item;
    } else {
      return InvalidArgument("the model has " + std::to_string(specs.size()) +
                             " inputs: name the input of '" + item + "' as INPUT=path");
    }
  }
  return files;
}

Result<std::map<std::string, ValueRange>> ParseValueRangeFlags(const std::vector<std::string>& items) {
  std::map<std::string, ValueRange> ranges;
  const auto parse = [](std::string_view text, std::int64_t* value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
    return error == std::errc() && end == text.data() + text.size() && !text.empty();
  };
  for (const std::string& item : items) {
    const auto eq = item.rfind('=');
    const auto colon = eq == std::string::npos ? std::string::npos : item.find(':', eq);
    ValueRange range;
    if (eq == std::string::npos || eq == 0 || colon == std::string::npos ||
        !parse(std::string_view(item).substr(eq + 1, colon - eq - 1), &range.min) ||
        !parse(std::string_view(item).substr(colon + 1), &range.max) || range.min > range.max) {
      return InvalidArgument("--value-range '" + item + "': expected INPUT=MIN:MAX with MIN <= MAX");
    }
    ranges[item.substr(0, eq)] = range;
  }
  return ranges;
}

}  // namespace ltserve::client
