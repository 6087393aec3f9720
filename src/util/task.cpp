// The names of the tasks (see task.h).
#include "rnn_dist/util/task.h"

#include "rnn_dist/util/error.h"

namespace rnn_dist {

Task parse_task(std::string_view name, std::string_view what) {
  for (Task t : {Task::lm, Task::classify, Task::tag})
    if (name == task_name(t)) return t;
  throw InputError(cat(what, ": unknown task '", name, "' (lm, classify or tag)"));
}

const char* task_name(Task task) {
  switch (task) {
    case Task::classify: return "classify";
    case Task::tag: return "tag";
    default: return "lm";
  }
}

}  // namespace rnn_dist
