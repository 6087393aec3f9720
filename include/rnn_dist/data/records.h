// Record readers of rnn_prep: stream the records of one input file (one per line, fortune-style records
// between separator lines, or a string field of JSON Lines) without holding the file in memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rnn_dist {

enum class RecordFormat { lines, records, jsonl, tsv, conll };

// "lines", "records", "jsonl", "tsv" or "conll"; anything else is an InputError.
RecordFormat parse_record_format(std::string_view name);

struct RecordOptions {
  RecordFormat format = RecordFormat::lines;
  std::string separator = "%";      // records: a line holding only this ends a record
  std::string text_field = "text";  // jsonl: the top-level string member holding the text
  bool utf8_replace = false;        // jsonl: ill-formed UTF-8 and lone surrogates become U+FFFD
  bool keep_cr = false;             // keep the '\r' of a CRLF line end as part of the line
  std::string label_field;          // jsonl: the top-level member holding the label ("" = none)
  int tag_column = -1;              // conll: the column of the tag (0-based; -1 = the last)
  bool conll_tags = true;           // conll: every line has a tag (false: tokens only, as to predict; tags = tokens)
  bool conll_comments = false;      // conll: keep '#' lines before a sentence as tokens (false: skip them, counted)
};

struct Record {
  std::string_view text;  // valid until the next call of next() (empty for conll), as the views below
  int64_t line = 0;       // 1-based line of the file where the record starts
  // Byte offset of the record in the file. For lines and records, text is exactly the file's bytes from
  // here, so offset + position in text is the file position; for jsonl it is where the line starts.
  uint64_t offset = 0;
  std::string_view label;                      // tsv, and jsonl with a label_field: the record's label
  std::vector<std::string_view> tokens, tags;  // conll: the sentence's tokens and their tags
};

// Reads one file record by record. A line ends at '\n'; the '\r' of a CRLF line end is not part of it
// (unless keep_cr), and a UTF-8 byte-order mark at the start of the file is skipped, in every format.
//  lines:   every line is a record (an empty line is an empty record); a last line needs no '\n'.
//  records: records are separated by lines holding only the separator; a record's text is its lines
//           joined with '\n' (no trailing newline); a final separator is optional; a record must fit
//           in memory.
//  jsonl:   every non-blank line is a JSON object; the record is its text_field string, and with a
//           label_field the label is that member's string or integer. The line must be valid UTF-8 (JSON
//           text is), checked here so errors can name the file position.
//  tsv:     every line is `label<TAB>text`.
//  conll:   one token per line, whitespace-separated columns (the token first, its tag in tag_column), a
//           blank line after each sentence; -DOCSTART- lines are skipped, and so are comment lines before
//           a sentence's first token (the first character '#', as CoNLL-U's "# sent_id = 3") unless
//           conll_comments; inside a sentence a '#' line is a token (PTB's). A record is a sentence.
// Errors are InputError "<path>: ..." naming the line.
class RecordReader {
 public:
  RecordReader(std::string path, RecordOptions options);
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;
  ~RecordReader();

  const std::string& path() const { return path_; }
  // The next record, or false at the end of the file.
  bool next(Record& record);
  // Bytes of the file consumed so far.
  uint64_t bytes_read() const { return consumed_; }
  // conll: comment lines skipped so far.
  int64_t comment_lines() const { return comments_; }

 private:
  bool next_line(std::string_view& line, uint64_t& offset);
  std::string path_;
  RecordOptions options_;
  int fd_ = -1;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;  // unconsumed bytes of buf_
  bool eof_ = false;
  uint64_t consumed_ = 0;
  int64_t line_ = 0;
  int64_t comments_ = 0;
  std::string text_;   // records and jsonl: the current record's text; conll: its tokens and tags
  std::string fixed_;  // jsonl: the line with ill-formed UTF-8 replaced
  std::string label_;  // jsonl: the current record's label
  std::vector<std::pair<size_t, size_t>> spans_;  // conll: (offset, size) in text_ of each token, then tag
  std::vector<std::string_view> columns_;         // conll: the columns of the current line
};

// Parses one JSON object (json, a whole JSONL line) and stores the value of its top-level member `field`
// in out (unescaped, \uXXXX surrogate pairs combined; lone surrogates become U+FFFD when replace is set).
// Returns false if there is no such member (the last one wins when repeated). Malformed JSON, a non-string
// value or a lone surrogate throws InputError "<where>: ..." naming the column.
bool json_string_field(std::string_view json, std::string_view field, std::string& out, std::string_view where,
                       bool replace = false);
// The same for a member that may also be an integer (its digits become out): a label.
bool json_label_field(std::string_view json, std::string_view field, std::string& out, std::string_view where,
                      bool replace = false);

}  // namespace rnn_dist
