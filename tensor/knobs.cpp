#include "tensor/knobs.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tensor/env.h"

namespace loom {
namespace {

#if defined(__AVX512F__)
constexpr bool kAvx512 = true;
#else
constexpr bool kAvx512 = false;
#endif

// A Once knob's text, read at its first use. Constant-initialized, so a knob read while other
// files' statics are initialized (before main) finds it ready.
struct Slot {
  std::once_flag once;
  std::atomic<bool> read{false};
  const char* text = nullptr;  // null: unset or empty; never freed (kept for the process)
};
constinit Slot g_slots[kNumKnobs];

// The knob's text under the rule (null where unset or empty); `keep`: read a Once knob for good.
const char* text_of(Knob k, bool keep = true) {
  const KnobInfo& info = knob_info(k);
  if (info.read != KnobRead::Once) return env_text(info.name);
  Slot& s = g_slots[int(k)];
  if (!keep && !s.read.load(std::memory_order_acquire)) return env_text(info.name);
  std::call_once(s.once, [&] {
    const char* v = env_text(info.name);
    s.text = v ? strdup(v) : nullptr;
    s.read.store(true, std::memory_order_release);
  });
  return s.text;
}

bool default_flag(const KnobInfo& info) {
  return std::strcmp(info.dflt, "avx512") ? parse_flag(info.dflt) : kAvx512;
}

}  // namespace

bool knob_flag(KnobOf<KnobType::Flag> k) {
  const char* v = text_of(k.k);
  return v ? parse_flag(v) : default_flag(knob_info(k.k));
}

long long knob_int(KnobOf<KnobType::Int> k) {
  const char* v = text_of(k.k);
  return parse_int(v ? v : knob_info(k.k).dflt);
}

std::string knob_str(KnobOf<KnobType::Str> k) {
  const char* v = text_of(k.k);
  return v ? v : knob_info(k.k).dflt;
}

bool knob_set(Knob k) { return text_of(k) != nullptr; }

long long knob_default_int(KnobOf<KnobType::Int> k) { return parse_int(knob_info(k.k).dflt); }

const char* knob_type_name(KnobType t) {
  switch (t) {
    case KnobType::Flag:
      return "flag";
    case KnobType::Int:
      return "int";
    case KnobType::Str:
      return "str";
  }
  return "?";
}

const char* knob_read_name(KnobRead r) {
  switch (r) {
    case KnobRead::Once:
      return "once";
    case KnobRead::Each:
      return "each";
    case KnobRead::Device:
      return "device";
  }
  return "?";
}

std::vector<KnobState> knobs() {
  std::vector<KnobState> out;
  out.reserve(kNumKnobs);
  for (int i = 0; i < kNumKnobs; ++i) {
    const KnobInfo& info = kKnobs[i];
    const char* v = text_of(Knob(i), false);
    std::string value;
    switch (info.type) {
      case KnobType::Flag:
        value = (v ? parse_flag(v) : default_flag(info)) ? "1" : "0";
        break;
      case KnobType::Int:
        value = std::to_string(parse_int(v ? v : info.dflt));
        break;
      case KnobType::Str:
        value = v ? v : info.dflt;
        break;
    }
    out.push_back({Knob(i), &info, v != nullptr, std::move(value)});
  }
  return out;
}

}  // namespace loom
