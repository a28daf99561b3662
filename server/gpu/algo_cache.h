// The cuBLASLt algorithms chosen by timing at load, keyed by GemmShape::Key, which kernel
// runs each GEMM shape (gemm_kernel.h), and other choices timed at load that change results
// (whether a bucket runs as two halves: a word per key), optionally kept in a text file so that a restart on the
// same GPU and cuBLASLt version skips the timing and runs the same kernels, bit for bit.
// A file written for another GPU or library version is ignored as a whole.
//
// Thread-safety: none; the executor fills and reads it during model load only.
#pragma once

#include <cublasLt.h>

#include <filesystem>
#include <map>
#include <string>

#include "common/status.h"
#include "gpu/gemm_kernel.h"

namespace ltserve::gpu {

class AlgoCache {
 public:
  // `fingerprint` names the GPU and library version; entries of another fingerprint are ignored.
  explicit AlgoCache(std::string fingerprint) : fingerprint_(std::move(fingerprint)) {}

  // A missing file is an empty cache; an unreadable or malformed one is an error.
  Status Load(const std::filesystem::path& path);
  Status Save(const std::filesystem::path& path) const;

  const cublasLtMatmulAlgo_t* Find(const std::string& key) const;
  void Put(const std::string& key, const cublasLtMatmulAlgo_t& algo) { entries_[key] = algo; }
  const GemmKernel* FindKernel(const std::string& key) const;
  void PutKernel(const std::string& key, const GemmKernel& kernel) { kernels_[key] = kernel; }
  // A choice is one word (letters, digits, '-' and '_'); Save writes what Put was given.
  const std::string* FindChoice(const std::string& key) const;
  void PutChoice(const std::string& key, const std::string& word) { choices_[key] = word; }
  std::size_t size() const { return entries_.size() + kernels_.size() + choices_.size(); }

 private:
  std::string fingerprint_;
  std::map<std::string, cublasLtMatmulAlgo_t> entries_;
  std::map<std::string, GemmKernel> kernels_;
  std::map<std::string, std::string> choices_;
};

}  // namespace ltserve::gpu
