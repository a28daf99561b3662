// Client-side helpers for the HTTP server tests.
#pragma once

#include <cstddef>
#include <string>

#include <httplib.h>

namespace ltserve::testing {

// The status of GET `path`, or -1 when no response came.
int GetStatus(httplib::Client& client, const std::string& path);

// A body unlike the last one, so that a test sees the handler's current answer.
std::string RandomMetricsText();

// Several clients on their own connections GET every endpoint repeatedly from parallel threads,
// expecting live, ready, model "mlp" ready and `metrics_text`. Returns how many answers were
// wrong or missing.
int HammerAllEndpoints(int port, const std::string& metrics_text);

// Static TLS of the loaded objects whose file name contains `name`; 0 when none is loaded. Here
// rather than next to its user because CUDA's headers define a macro that breaks <link.h>.
std::size_t StaticTlsBytes(const char* name);

}  // namespace ltserve::testing
