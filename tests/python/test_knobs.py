"""loom.knobs(): the table of LOOM_* environment knobs (tensor/knobs.h) with current values."""
import os

import loom


def by_name():
    return {k["name"]: k for k in loom.knobs()}


def test_rows_have_every_field():
    rows = loom.knobs()
    assert len(rows) == len({k["name"] for k in rows}) > 40
    for k in rows:
        assert set(k) == {"name", "type", "default", "read", "set", "value", "description"}
        assert k["name"].startswith("LOOM_")
        assert k["type"] in ("flag", "int", "str")
        assert k["read"] in ("once", "each", "device")
        assert isinstance(k["value"], {"flag": bool, "int": int, "str": str}[k["type"]])
        assert k["description"]
    assert by_name()["LOOM_FUSION"]["value"] == loom.fusion_enabled()


def test_values_follow_the_environment_for_knobs_read_at_every_use():
    names = ("LOOM_DISK_CACHE", "LOOM_CUDA_BLOCK_CACHE")
    old = {n: os.environ.pop(n, None) for n in names}
    try:
        k = by_name()["LOOM_DISK_CACHE"]
        assert (k["read"], k["default"], k["set"], k["value"]) == ("each", "1", False, True)
        for text, value in (("0", False), ("off", False), ("false", False), ("yes", True)):
            os.environ["LOOM_DISK_CACHE"] = text
            k = by_name()["LOOM_DISK_CACHE"]
            assert k["set"] and k["value"] is value
        os.environ["LOOM_CUDA_BLOCK_CACHE"] = "12abc"  # read as std::atoll reads it
        assert by_name()["LOOM_CUDA_BLOCK_CACHE"]["value"] == 12
    finally:
        for n, v in old.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v
