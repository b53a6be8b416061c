// Precompiled header: the heavy, rarely-changing includes shared by every translation unit.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <string>
#include <vector>
#include <memory>
#include <optional>
#include <unordered_map>
