// Parsing of the input-describing flags shared by ltserve-cli and ltserve-bench.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "model_inputs.h"

namespace ltserve::client {

// "--shape INPUT:d1,d2,..." values -> input name -> dimensions (without the batch dimension).
Result<std::map<std::string, std::vector<std::int64_t>>> ParseShapeFlags(const std::vector<std::string>& items);

// "--input-file PATH" (a one-input model) or "INPUT=PATH" values -> input name -> path.
Result<std::map<std::string, std::string>> ParseInputFileFlags(const std::vector<std::string>& items,
                                                               const std::vector<InputSpec>& specs);

// "--value-range INPUT=MIN:MAX" values -> input name -> range (integers, both included).
Result<std::map<std::string, ValueRange>> ParseValueRangeFlags(const std::vector<std::string>& items);

}  // namespace ltserve::client
