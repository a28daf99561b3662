// libprotobuf logs through its own handler to stderr, unthrottled: every request with an invalid
// UTF-8 string wrote an ERROR line, so a client could fill the log at will. This routes those
// lines through spdlog, at most a few per interval, and keeps the last one per thread so that the
// parse failure it explains can say why to the client.
#pragma once

#include <string>

namespace ltserve {

// Installs the handler for the process; call once, before serving.
void InstallProtobufLogHandler();

// The last line libprotobuf logged on this thread since the previous call, or "" if none; the
// handler keeps it even when the rate limit drops the line from the log.
std::string TakeProtobufLogLine();

}  // namespace ltserve
