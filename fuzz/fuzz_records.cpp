// libFuzzer target: rnn_prep's record readers (lines, records, jsonl) and tokenizers (char, byte, word) on
// one input file; byte 0 chooses the options (see text_case in harness.h).
#include <cstddef>
#include <cstdint>

#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rnn_dist::fuzz::records_and_tokenizers({data, size});
  return 0;
}
