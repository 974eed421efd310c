#pragma once
// loom: an eager-mode tensor runtime whose ops record lazily and run as fused kernels.
#include "cuda/stream.h"
#include "tensor/counters.h"
#include "fusion/checks.h"
#include "fusion/kernel_cache.h"
#include "fusion/trace.h"
#include "tensor/fault.h"
#include "tensor/knobs.h"
#include "ops/tensor.h"
#include "ops/checkpoint.h"
#include "ops/autocast.h"
#include "ops/optim.h"
