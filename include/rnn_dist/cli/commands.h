// The subcommands of the rnn_dist program. Each takes its arguments (without the program and subcommand
// names) and returns the process exit code; errors are thrown as rnn_dist::Error / InputError.
#pragma once

#include <string>
#include <vector>

namespace rnn_dist {

using Args = std::vector<std::string>;

int cmd_info(const Args& args);
int cmd_train(const Args& args);
int cmd_eval(const Args& args);
int cmd_sample(const Args& args);
int cmd_predict(const Args& args);
int cmd_check(const Args& args);

}  // namespace rnn_dist
