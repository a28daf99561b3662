// Field paths back to line:column in config.pbtxt.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/util/message_differencer.h>

#include "config/config_internal.h"

namespace ltserve::config::internal {
namespace {

namespace pb = google::protobuf;
using ParseInfoTree = pb::TextFormat::ParseInfoTree;

std::string MapKeyText(const pb::Message& entry) {
  const pb::FieldDescriptor* key = entry.GetDescriptor()->map_key();
  const pb::Reflection* reflection = entry.GetReflection();
  switch (key->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING: return reflection->GetString(entry, key);
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(reflection->GetUInt64(entry, key));
    default: return {};
  }
}

// Index of the map entry with `key` in the text: the parser appends entries in text order and
// the last duplicate wins, as it does for the map itself.
int MapEntryIndex(const pb::Message& message, const pb::FieldDescriptor* field,
                  const std::string& key) {
  const pb::Reflection* reflection = message.GetReflection();
  for (int i = reflection->FieldSize(message, field) - 1; i >= 0; --i) {
    if (MapKeyText(reflection->GetRepeatedMessage(message, field, i)) == key) return i;
  }
  return -1;
}

}  // namespace

std::string FieldPathName(const FieldPath& path) {
  std::string name;
  for (const FieldStep& step : path) {
    if (!name.empty()) name += ".";
    name += step.field;
    if (!step.map_key.empty()) {
      name += "[" + step.map_key + "]";
    } else if (step.index >= 0) {
      name += "[" + std::to_string(step.index) + "]";
    }
  }
  return name;
}

ConfigErrors ConfigErrors::ForFile(const std::filesystem::path& config_file,
                                   const inference::ModelConfig& config) {
  ConfigErrors errors;
  errors.file_ = config_file;
  auto text = ReadConfigText(config_file);
  if (!text.ok()) return errors;
  auto locations = std::make_unique<ParseInfoTree>();
  auto parsed = ParseConfigText(text.value(), config_file, locations.get());
  if (parsed.ok() && pb::util::MessageDifferencer::Equals(*parsed, config)) {
    errors.located_ = std::move(parsed).value();
    errors.locations_ = std::move(locations);
  }
  return errors;
}

std::string ConfigErrors::Locate(const FieldPath& path) const {
  // The deepest step written in the text: a missing field points at its parent.
  std::string found;
  if (locations_ == nullptr) return found;
  const ParseInfoTree* tree = locations_.get();
  const pb::Message* message = &located_;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const FieldStep& step = path[i];
    const pb::FieldDescriptor* field = message->GetDescriptor()->FindFieldByName(step.field);
    if (field == nullptr) return found;
    int index = field->is_map() ? MapEntryIndex(*message, field, step.map_key) : step.index;
    if (!field->is_repeated()) index = -1;
    if (field->is_repeated() && !field->is_map() && index < 0) index = 0;  // the whole list
    if (field->is_repeated() && index < 0) return found;
    auto location = tree->GetLocation(field, index);
    // A list `dims: [1, 2]` may record only its first element.
    if (location.line < 0 && index > 0) location = tree->GetLocation(field, 0);
    if (location.line < 0) return found;
    found = std::to_string(location.line + 1) + ":" + std::to_string(location.column + 1);
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) return found;
    const ParseInfoTree* nested = tree->GetTreeForNested(field, index);
    if (nested == nullptr) return found;
    const pb::Reflection* reflection = message->GetReflection();
    message = field->is_repeated() ? &reflection->GetRepeatedMessage(*message, field, index)
                                   : &reflection->GetMessage(*message, field);
    tree = nested;
  }
  return found;
}

Status ConfigErrors::Error(StatusCode code, const FieldPath& path, std::string_view what) const {
  std::string message = file_.string();
  std::string location = Locate(path);
  if (!location.empty()) message += ":" + location;
  message += ": ";
  if (!path.empty()) message += "field '" + FieldPathName(path) + "': ";
  message += what;
  return Status(code, std::move(message));
}

}  // namespace ltserve::config::internal
