// loom.knobs(): every LOOM_* environment knob (tensor/knobs.h) with the value in effect.
#include "bindings/common.h"

namespace loom::py {
namespace {

// A knob's value text (KnobState::value) as the Python value it stands for.
nb::object typed(KnobType t, const std::string& v) {
  switch (t) {
    case KnobType::Flag:
      return nb::bool_(v == "1");
    case KnobType::Int:
      return nb::int_(std::stoll(v));
    case KnobType::Str:
      return nb::str(v.c_str());
  }
  return nb::none();
}

nb::list knobs_list() {
  nb::list out;
  for (const KnobState& k : knobs()) {
    nb::dict d;
    d["name"] = k.info->name;
    d["type"] = knob_type_name(k.info->type);
    d["default"] = k.info->dflt;
    d["read"] = knob_read_name(k.info->read);
    d["set"] = k.set;
    d["value"] = typed(k.info->type, k.value);
    d["description"] = k.info->doc;
    out.append(d);
  }
  return out;
}

}  // namespace

void init_knobs(nb::module_& m) {
  m.def("knobs", &knobs_list,
        "Every LOOM_* environment knob, one dict each: name, type ('flag', 'int' or 'str'), "
        "default (as text), read ('once': at first use, 'each': at every use, 'device': when "
        "each CUDA device is set up), set (whether the environment sets it), value (in effect, "
        "as bool, int or str) and description.");
}

}  // namespace loom::py
