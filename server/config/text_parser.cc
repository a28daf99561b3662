// config.pbtxt text -> inference::ModelConfig, with errors a user can act on.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <system_error>

#include "config/config_internal.h"
#include "config/model_config.h"

namespace ltserve::config {
namespace internal {
namespace {

namespace pb = google::protobuf;

// Keeps every parse error with its position; protobuf's numbers are zero-based.
class CollectingErrors : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    errors_.push_back({line + 1, column + 1, message});
  }
  struct Entry {
    int line;
    int column;
    std::string message;
  };
  const std::vector<Entry>& errors() const { return errors_; }

 private:
  std::vector<Entry> errors_;
};

std::string FieldNames(const pb::Descriptor& message) {
  std::string names;
  for (int i = 0; i < message.field_count(); ++i) {
    if (i > 0) names += ", ";
    names += message.field(i)->name();
  }
  return names;
}

// Rewrites protobuf's wording into what the user should do about it.
std::string Explain(const std::string& message, const std::string& field_before) {
  static const std::regex kNoField(R"re(Message type "([\w.]+)" has no field named "(\w+)")re");
  std::smatch match;
  if (std::regex_search(message, match, kNoField)) {
    const pb::Descriptor* type =
        pb::DescriptorPool::generated_pool()->FindMessageTypeByName(match[1].str());
    std::string supported = type == nullptr ? "see docs/model_repository.md" : FieldNames(*type);
    std::string where = type == nullptr ? match[1].str() : type->name();
    return "field '" + match[2].str() + "' is not supported by ltserve (supported in " + where +
           ": " + supported + "); remove it";
  }
  if (message.size() >= 5 && message.compare(message.size() - 5, 5, "got: ") == 0) {
    return message + "end of file (is a closing '}' or ']' missing?)";
  }
  std::string in_field;
  if (!field_before.empty() && message.find("\"" + field_before + "\"") == std::string::npos) {
    in_field = "field '" + field_before + "': ";
  }
  return in_field + message + " (fix the value or the syntax; docs/model_repository.md shows " +
         "a full example)";
}

// Protobuf reports a bad name or value at the token after it; point at the name itself.
int NameColumn(const std::string& line, int column, const std::string& message) {
  static const std::regex kQuoted(R"re("(\w+)")re");
  std::smatch match;
  if (!std::regex_search(message, match, kQuoted)) return column;
  const std::size_t end = std::min<std::size_t>(static_cast<std::size_t>(column), line.size());
  const std::size_t at = line.rfind(match[1].str(), end == 0 ? 0 : end - 1);
  return at == std::string::npos ? column : static_cast<int>(at) + 1;
}

// The field whose value was being read: the last "name:" before `column` on the line.
std::string FieldBefore(const std::string& line, int column) {
  static const std::regex kFieldName(R"re(([A-Za-z_]\w*)\s*:)re");
  const std::string head = line.substr(0, std::min<std::size_t>(column - 1, line.size()));
  std::string last;
  for (std::sregex_iterator it(head.begin(), head.end(), kFieldName), end; it != end; ++it) {
    last = (*it)[1].str();
  }
  return last;
}

std::string Line(const std::string& text, int line_number) {
  std::istringstream in(text);
  std::string line;
  for (int i = 0; i < line_number && std::getline(in, line); ++i) {
  }
  return line;
}

}  // namespace

Result<std::string> ReadConfigText(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) {
    return FailedPrecondition(file.string() + ": cannot be read; check its permissions");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<inference::ModelConfig> ParseConfigText(const std::string& text,
                                               const std::filesystem::path& file,
                                               pb::TextFormat::ParseInfoTree* locations) {
  CollectingErrors errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(locations);
  inference::ModelConfig config;
  if (parser.ParseFromString(text, &config)) return config;
  std::string message;
  for (const auto& error : errors.errors()) {
    if (!message.empty()) message += "\n";
    const std::string line = Line(text, error.line);
    const int column = NameColumn(line, error.column, error.message);
    message += file.string() + ":" + std::to_string(error.line) + ":" + std::to_string(column) +
               ": " + Explain(error.message, FieldBefore(line, column));
  }
  if (message.empty()) message = file.string() + ": not a valid model configuration";
  return InvalidArgument(std::move(message));
}

}  // namespace internal

Result<inference::ModelConfig> ParseModelConfigFile(const std::filesystem::path& config_path) {
  std::error_code ec;
  if (!std::filesystem::exists(config_path, ec)) {
    return NotFound(config_path.string() +
                    ": no model configuration; every model directory needs a " +
                    std::string(internal::kConfigFileName) + " (see docs/model_repository.md)");
  }
  if (!std::filesystem::is_regular_file(config_path, ec)) {
    return InvalidArgument(config_path.string() + ": is not a regular file; it must hold the " +
                           "model configuration in protobuf text format");
  }
  LTSERVE_ASSIGN_OR_RETURN(std::string text, internal::ReadConfigText(config_path));
  return internal::ParseConfigText(text, config_path, nullptr);
}

}  // namespace ltserve::config
