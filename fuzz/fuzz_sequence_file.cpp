// libFuzzer target: the sequence-file reader's validation (SequenceFile::open and every read) on an HDF5
// file made from the input: edits of a valid seed image, or a whole image (see sequence_image in harness.h).
#include <cstddef>
#include <cstdint>

#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rnn_dist::fuzz::sequence_file({data, size});
  return 0;
}
