// The copy plans of a batch whose requests hold some rows in GPU memory (gpu/row_copies.h):
// pure arithmetic, so checked here without a GPU by running each plan as memcpy over host
// buffers that stand for the staging, device and request memory.
#include "gpu/row_copies.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace ltserve::gpu {
namespace {

constexpr std::size_t kRowBytes = 12;  // three floats: odd against any alignment a copy might assume

std::vector<std::byte> Random(std::size_t bytes) {
  std::mt19937 rng(std::random_device{}());
  std::vector<std::byte> out(bytes);
  for (std::byte& b : out) b = static_cast<std::byte>(rng());
  return out;
}

void Perform(const std::vector<PlannedCopy>& copies) {
  for (const PlannedCopy& copy : copies) std::memcpy(copy.destination, copy.source, copy.bytes);
}

std::span<const std::byte> Rows(const std::vector<std::byte>& buffer, std::int64_t first,
                                std::int64_t rows) {
  return std::span(buffer).subspan(first * kRowBytes, rows * kRowBytes);
}

bool Same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

TEST(RowCopies, InputRowsComeFromTheRequestsOrFromStaging) {
  // 10 rows: 0-1 staged, 2-4 on the device, 5 staged, 6-7 on the device, 8-9 staged.
  std::vector<std::byte> staged = Random(10 * kRowBytes), device(10 * kRowBytes, std::byte{0xEE});
  std::vector<std::byte> first = Random(3 * kRowBytes), second = Random(2 * kRowBytes);
  const std::vector<DeviceCopy> in_device = {{0, 2, 3, first.data(), first.size()},
                                             {0, 6, 2, second.data(), second.size()}};
  std::vector<PlannedCopy> copies;
  ASSERT_TRUE(PlanInputCopies(in_device, 10, kRowBytes, staged.data(), device.data(), &copies).ok());
  EXPECT_EQ(copies.size(), 5u);  // three staged runs, two requests
  Perform(copies);
  EXPECT_TRUE(Same(Rows(device, 0, 2), Rows(staged, 0, 2)));
  EXPECT_TRUE(Same(Rows(device, 2, 3), first));
  EXPECT_TRUE(Same(Rows(device, 5, 1), Rows(staged, 5, 1)));
  EXPECT_TRUE(Same(Rows(device, 6, 2), second));
  EXPECT_TRUE(Same(Rows(device, 8, 2), Rows(staged, 8, 2)));
}

TEST(RowCopies, AWholeBatchOnTheDeviceCopiesNothingFromStaging) {
  std::vector<std::byte> staged = Random(4 * kRowBytes), device(4 * kRowBytes);
  std::vector<std::byte> a = Random(1 * kRowBytes), b = Random(3 * kRowBytes);
  const std::vector<DeviceCopy> in_device = {{0, 0, 1, a.data(), a.size()},
                                             {0, 1, 3, b.data(), b.size()}};
  std::vector<PlannedCopy> copies;
  ASSERT_TRUE(PlanInputCopies(in_device, 4, kRowBytes, staged.data(), device.data(), &copies).ok());
  ASSERT_EQ(copies.size(), 2u);
  for (const PlannedCopy& copy : copies) EXPECT_TRUE(copy.source == a.data() || copy.source == b.data());
}

TEST(RowCopies, OutputRowsGoToTheRequestsThatFitOrToStaging) {
  std::vector<std::byte> device = Random(6 * kRowBytes), staged(6 * kRowBytes, std::byte{0xEE});
  std::vector<std::byte> fits(2 * kRowBytes + 5, std::byte{0xEE});   // room to spare
  std::vector<std::byte> too_small(2 * kRowBytes - 1, std::byte{0xEE});
  const std::vector<DeviceCopy> to_device = {{0, 1, 2, fits.data(), fits.size()},
                                             {0, 4, 2, too_small.data(), too_small.size()}};
  std::vector<PlannedCopy> copies;
  ASSERT_TRUE(PlanOutputCopies(to_device, 6, kRowBytes, device.data(), staged.data(), &copies).ok());
  Perform(copies);
  EXPECT_TRUE(Same(std::span(fits).first(2 * kRowBytes), Rows(device, 1, 2)));
  EXPECT_EQ(fits.back(), std::byte{0xEE});  // nothing past the rows
  for (std::byte b : too_small) EXPECT_EQ(b, std::byte{0xEE});
  // Every row not written to a request's memory is in staging, the misfit's rows included.
  EXPECT_TRUE(Same(Rows(staged, 0, 1), Rows(device, 0, 1)));
  EXPECT_TRUE(Same(Rows(staged, 3, 3), Rows(device, 3, 3)));
}

TEST(RowCopies, AnInputOfTheWrongSizeIsRefused) {
  std::vector<std::byte> staged(4 * kRowBytes), device(4 * kRowBytes), a(kRowBytes);
  const std::vector<DeviceCopy> in_device = {{0, 0, 2, a.data(), a.size()}};
  std::vector<PlannedCopy> copies;
  const Status status = PlanInputCopies(in_device, 4, kRowBytes, staged.data(), device.data(), &copies);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("12 bytes for 2 rows of 12"), std::string::npos) << status.message();
}

TEST(RowCopies, RowsOutsideTheBatchOrOutOfOrderAreRefused) {
  std::vector<std::byte> staged(4 * kRowBytes), device(4 * kRowBytes), a(2 * kRowBytes);
  std::vector<PlannedCopy> copies;
  const std::vector<std::vector<DeviceCopy>> bad = {
      {{0, 3, 2, a.data(), a.size()}},                                  // past the end
      {{0, 2, 2, a.data(), a.size()}, {0, 0, 2, a.data(), a.size()}},   // before the one ahead
      {{0, 1, 2, a.data(), a.size()}, {0, 2, 2, a.data(), a.size()}},   // overlapping
      {{1, 0, 2, a.data(), a.size()}},                                  // an input that is not there
      {{0, 0, 2, nullptr, a.size()}}};
  for (const auto& in_device : bad) {
    EXPECT_EQ(PlanInputCopies(in_device, 4, kRowBytes, staged.data(), device.data(), &copies).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(PlanOutputCopies(in_device, 4, kRowBytes, device.data(), staged.data(), &copies).code(),
              StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ltserve::gpu
