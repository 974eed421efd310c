#pragma once
// What a call writes to stderr (the fusion log of the flushes it runs), captured through a
// temporary file: the stand-in driver's programs read loom's own account of a flush from it.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

inline std::string stderr_of(const std::function<void()>& f) {
  std::fflush(stderr);
  char path[] = "/tmp/loom_mock_stderr_XXXXXX";
  const int fd = mkstemp(path), saved = dup(2);
  dup2(fd, 2);
  f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::remove(path);
  return s.str();
}
