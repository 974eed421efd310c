// loom_fuzz: runs random programs fused, fusion-off and in float64, and compares them.
//   loom_fuzz --seed S --count N [--minutes M] [--save-dir DIR] [--ops MIN,MAX]
//   loom_fuzz --replay FILE...     check saved programs
//   loom_fuzz --print S            print the program of seed S
//   --device cuda                  run the fused side on the GPU (compared with the CPU)
// A mismatch is shrunk and written to DIR/<seed>.txt. The exit status is 1 on any mismatch.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "exec.h"
#include "patterns.h"
#include "program.h"
#include "shrink.h"

using namespace loom::fuzz;

namespace {

struct Args {
  uint64_t seed = 1;
  int64_t count = -1;
  double minutes = 0;
  std::string save_dir, fault;
  loom::Device device = loom::kCPU;
  GenOptions gen;
  std::vector<std::string> replay;
  bool print = false, quiet = false, grads = false;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: loom_fuzz [--seed S] [--count N] [--minutes M] [--save-dir DIR] "
               "[--ops MIN,MAX] [--fault OP] [--device cpu|cuda] [--grads] [--quiet]\n"
               "       loom_fuzz --replay FILE...\n"
               "       loom_fuzz --print SEED\n");
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (k == "--seed")
      a.seed = std::stoull(next());
    else if (k == "--count")
      a.count = std::stoll(next());
    else if (k == "--minutes")
      a.minutes = std::stod(next());
    else if (k == "--save-dir")
      a.save_dir = next();
    else if (k == "--fault")
      a.fault = next();
    else if (k == "--device")
      a.device = loom::Device::parse(next());
    else if (k == "--quiet")
      a.quiet = true;
    else if (k == "--grads")  // differentiate too (programs without in-place families)
      a.grads = true, a.gen.inplace = false;
    else if (k == "--print")
      a.print = true, a.seed = std::stoull(next());
    else if (k == "--ops") {
      auto v = parse_ints(next());
      if (v.size() != 2) usage();
      a.gen.min_ops = int(v[0]), a.gen.max_ops = int(v[1]);
    } else if (k == "--replay") {
      while (i + 1 < argc && argv[i + 1][0] != '-') a.replay.push_back(argv[++i]);
    } else {
      usage();
    }
  }
  if (a.count < 0 && a.minutes <= 0) a.count = 1000;
  return a;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int replay(const Args& a) {
  int bad = 0;
  RunOptions ro{a.fault, a.device};
  ro.grads = a.grads;
  for (auto& f : a.replay) {
    Program p = parse(read_file(f));
    Verdict v = check(p, ro);
    std::printf("%s: %s\n", f.c_str(), report(p, v).c_str());
    bad += v.kind != Verdict::Kind::Pass;
  }
  return bad ? 1 : 0;
}

// Shrinks a failing program, prints it and saves it to DIR/<seed>.txt. A failure that the
// shrunk program no longer shows (it depends on memory or cache state) saves the original.
void on_mismatch(const Args& a, const Program& p, const Verdict& v, const RunOptions& ro) {
  std::printf("\n=== seed %llu: %s\n", (unsigned long long)p.seed, report(p, v).c_str());
  ShrinkStats st;
  Program s = shrink(p, same_failure(v.what, ro), 3000, &st);
  Verdict sv = check(s, ro);
  std::printf("--- shrunk (%d tries, %d accepted): %s\n", st.tries, st.accepted,
              report(s, sv).c_str());
  bool flaky = sv.kind != Verdict::Kind::Mismatch;
  if (flaky) s = p, sv = v;
  if (a.save_dir.empty()) return;
  std::string path = a.save_dir + "/" + std::to_string(p.seed) + ".txt";
  std::ofstream f(path);
  if (flaky) f << "# not shrunk: the shrunk program passed when checked again (state-dependent)\n";
  f << "# " << sv.what << ": " << sv.msg << "\n" << to_text(s);
  std::printf("saved %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  try {  // an unusable device is a usage error, not a mismatch per program
    loom::zeros({1}, loom::Options(a.device)).item<float>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom_fuzz: %s\n", e.what());
    return 2;
  }
  if (!a.replay.empty()) return replay(a);
  if (a.print) {
    std::printf("%s", to_text(generate(a.seed, a.gen)).c_str());
    return 0;
  }
  RunOptions ro{a.fault, a.device};
  ro.grads = a.grads;
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  int64_t n = 0, bad = 0, invalid = 0, f64 = 0, pending = 0, between = 0;
  double last_note = 0;
  for (; a.count < 0 || n < a.count; ++n) {
    if (a.minutes > 0 && elapsed() > a.minutes * 60) break;
    if (n % 2000 == 1999) loom::clear_kernel_cache();  // distinct signatures pile up
    Program p = generate(a.seed + uint64_t(n), a.gen);
    if (!a.save_dir.empty()) std::ofstream(a.save_dir + "/last.txt") << to_text(p);  // crashes
    Verdict v = check(p, ro);
    f64 += !has_discontinuous(p);
    pending += updates_pending(p);
    between += reads_between_writes(p);
    if (v.kind == Verdict::Kind::Invalid) {
      ++invalid;
      if (!a.quiet) std::printf("invalid program (generator bug): %s\n", report(p, v).c_str());
    } else if (v.kind == Verdict::Kind::Mismatch) {
      ++bad;
      on_mismatch(a, p, v, ro);
    }
    if (!a.quiet && elapsed() - last_note > 30) {
      last_note = elapsed();
      std::printf("... %lld programs, %lld mismatches, %.0f s\n", (long long)n + 1, (long long)bad,
                  last_note);
      std::fflush(stdout);
    }
  }
  std::printf(
      "fuzz: %lld programs, %lld mismatches (%lld invalid, %lld compared to float64, "
      "%lld update a pending value in place, %lld of them reading a buffer between two writes "
      "of it, %.1f s)\n",
      (long long)n, (long long)bad, (long long)invalid, (long long)f64, (long long)pending,
      (long long)between, elapsed());
  return bad || invalid ? 1 : 0;
}
