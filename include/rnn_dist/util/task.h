// What a model is trained for, shared by the data files and the model: next-token prediction (lm), a
// label per sequence (classify) or a tag per token (tag).
#pragma once

#include <string_view>

namespace rnn_dist {

enum class Task { lm, classify, tag };
// "lm", "classify" or "tag"; anything else is an InputError naming `what`.
Task parse_task(std::string_view name, std::string_view what);
const char* task_name(Task task);

}  // namespace rnn_dist
