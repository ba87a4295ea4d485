// pipeplan/cost.hpp — the cost tier: the cost_model concept, the profile model, the analytic
// transformer model, hardware and model presets, model-state memory (ZeRO) and dense tables.
// Needs only the C++20 standard library. Calibration (Eigen) is separate:
// #include "pipeplan/cost/calibrate.hpp".
#pragma once

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/estimate.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/hardware.hpp"
#include "pipeplan/cost/model_state.hpp"
#include "pipeplan/cost/profile.hpp"
#include "pipeplan/cost/table.hpp"
#include "pipeplan/cost/transformer_shape.hpp"
#include "pipeplan/cost/types.hpp"
