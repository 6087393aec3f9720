"""Output files as every rnn_dist command writes them: the rule of include/rnn_dist/util/atomic_file.h, for
the Python programs (rnn_dist_onnx, rnn_dist_plot).

- A regular file, or a path that does not exist yet: written under a temporary name beside it, then
  renamed over it, so a failed run leaves the old file (or none) behind.
- A symbolic link: followed to its last target, which is replaced that way; the link stays.
- "-" (standard output, also as /dev/stdout or /dev/fd/N: a pipe, or a file the shell opened, even
  with >>), a character device, a FIFO or a socket: written through directly, never renamed over.
- An output that is one of the command's inputs (the same file, or the same path once links are resolved)
  is refused before anything is read: refuse_output_over_inputs raises OutputError.
"""
import contextlib
import os
import stat
import sys


class OutputError(ValueError):
    """An output path that must not be written (one of the inputs, a directory)."""


def _follow_links(path):
    for _ in range(40):
        if not os.path.islink(path):
            return path
        target = os.readlink(path)
        path = target if os.path.isabs(target) else os.path.join(os.path.dirname(path), target)
    raise OutputError(f"{path}: too many levels of symbolic links")


def _is_stream(path):
    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing, or a parent that is not a directory: open() will say so
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _names_descriptor(path):
    return path in ("-", "/dev/stdout", "/dev/stderr") or path.startswith(("/dev/fd/", "/proc/self/fd/"))


def refuse_output_over_inputs(output, output_option, inputs):
    """inputs: {option: path}. Raises OutputError naming both options when the output is one of them."""
    if _names_descriptor(output) or _is_stream(output):
        return
    out = os.path.realpath(_follow_links(output))
    for option, path in inputs.items():
        same = os.path.exists(output) and os.path.exists(path) and os.path.samefile(output, path)
        if same or out == os.path.realpath(path):
            raise OutputError(f"{output_option} {output}: is the input {option} {path}, which writing it would "
                              "destroy: give another output path")


@contextlib.contextmanager
def output_path(path, option):
    """Yields what to write to: a temporary path (on success it replaces the final file, on failure it is
    removed), a stream's path, or for a file descriptor a binary file object that appends."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if _names_descriptor(path):
        with open(path, "ab") as f:
            yield f
        return
    final = _follow_links(path)
    if os.path.isdir(final):
        raise OutputError(f"{option} {path}: is a directory")
    if _is_stream(final):
        yield final
        return
    tmp = f"{final}.tmp.{os.getpid()}{os.path.splitext(final)[1]}"
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
