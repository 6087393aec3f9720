// Record readers and the small JSON string-field extractor of rnn_prep (see records.h).
#include "rnn_dist/data/records.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

constexpr size_t kReadSize = 1 << 20;
constexpr int kMaxJsonDepth = 512;  // deeper nesting is rejected rather than risking the stack

// Recursive-descent JSON reader over one line; only the wanted member's string is decoded, the rest is
// checked and skipped.
class JsonParser {
 public:
  JsonParser(std::string_view s, std::string_view where, bool replace) : s_(s), where_(where), replace_(replace) {}

  // allow_integer: an integer value is taken too, as its text.
  bool find_member(std::string_view field, std::string& out, bool allow_integer = false) {
    bool found = false;
    ws();
    expect('{');
    ws();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        if (peek() != '"') fail("expected a member name in double quotes");
        string(&key_);
        ws();
        expect(':');
        ws();
        if (key_ == field) {
          const size_t start = i_;
          if (peek() != '"') {
            value(1);  // malformed JSON is reported as such first
            const std::string_view v = s_.substr(start, i_ - start);
            const bool integer = !v.empty() && v.find_first_not_of("-0123456789") == std::string_view::npos;
            if (!allow_integer || !integer)
              throw InputError(cat(where_, ": member \"", field, "\" is not a string", allow_integer ? " or an integer" : ""));
            out.assign(v);
            found = true;
          } else {
            out.clear();
            string(&out);
            found = true;
          }
        } else {
          value(1);
        }
        ws();
        if (peek() == ',') {
          ++i_;
          ws();
          continue;
        }
        expect('}');
        break;
      }
    }
    ws();
    if (i_ != s_.size()) fail("unexpected characters after the object");
    return found;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw InputError(cat(where_, ": malformed JSON at column ", i_ + 1, ": ", what));
  }
  // The current character, or '\0' at the end (never valid where a character is expected).
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c)
      fail(i_ < s_.size() ? cat("expected '", c, "'") : cat("expected '", c, "' before the end of the line"));
    ++i_;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  void value(int depth) {
    if (depth > kMaxJsonDepth) fail("nested too deeply");
    switch (peek()) {
      case '"': string(nullptr); return;
      case '{':
      case '[': {
        const char close = peek() == '{' ? '}' : ']';
        ++i_;
        ws();
        if (peek() == close) {
          ++i_;
          return;
        }
        for (;;) {
          if (close == '}') {
            if (peek() != '"') fail("expected a member name in double quotes");
            string(nullptr);
            ws();
            expect(':');
            ws();
          }
          value(depth + 1);
          ws();
          if (peek() != ',') break;
          ++i_;
          ws();
        }
        expect(close);
        return;
      }
      case 't': literal("true"); return;
      case 'f': literal("false"); return;
      case 'n': literal("null"); return;
      default: number(); return;
    }
  }

  void literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) fail("invalid literal");
    i_ += word.size();
  }

  void digits() {
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    if (i_ == start) fail("expected a value");
  }

  void number() {
    if (peek() == '-') ++i_;
    if (peek() == '0')
      ++i_;
    else
      digits();
    if (peek() == '.') {
      ++i_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      digits();
    }
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = peek();
      unsigned d;
      if (c >= '0' && c <= '9')
        d = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<unsigned>(c - 'A' + 10);
      else
        fail("expected four hex digits after \\u");
      v = v * 16 + d;
      ++i_;
    }
    return v;
  }

  // A string starting at the opening quote; decoded into out unless out is null.
  void string(std::string* out) {
    ++i_;
    if (out) out->clear();
    for (;;) {
      size_t run = i_;
      while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\\' && static_cast<unsigned char>(s_[i_]) >= 0x20) ++i_;
      if (out) out->append(s_.substr(run, i_ - run));
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_];
      if (c == '"') {
        ++i_;
        return;
      }
      if (c != '\\') fail("control character in a string (must be escaped)");
      ++i_;
      char e = peek();
      char plain = 0;
      switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': break;
        default: fail("invalid escape sequence");
      }
      ++i_;
      if (plain) {
        if (out) *out += plain;
        continue;
      }
      size_t escape_at = i_ - 2;
      char32_t cp = hex4();
      if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(i_, 2) == "\\u") {
        size_t save = i_;
        i_ += 2;
        char32_t low = hex4();
        if (low >= 0xDC00 && low <= 0xDFFF)
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        else
          i_ = save;  // not a pair: the high surrogate is lone, the next escape is read on its own
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) {
        if (!replace_) {
          i_ = escape_at;
          fail("lone surrogate in a \\u escape (use --utf8-replace to substitute U+FFFD)");
        }
        cp = kReplacementChar;
      }
      if (out) append_utf8(*out, cp);
    }
  }

  std::string_view s_;
  std::string_view where_;
  bool replace_;
  size_t i_ = 0;
  std::string key_;
};

// A record's fields for a new record, keeping the vectors' capacity.
void reset(Record& r, std::string_view text, int64_t line, uint64_t offset) {
  r.text = text;
  r.line = line;
  r.offset = offset;
  r.label = {};
  r.tokens.clear();
  r.tags.clear();
}

bool blank(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

}  // namespace

RecordFormat parse_record_format(std::string_view name) {
  if (name == "lines") return RecordFormat::lines;
  if (name == "records") return RecordFormat::records;
  if (name == "jsonl") return RecordFormat::jsonl;
  if (name == "tsv") return RecordFormat::tsv;
  if (name == "conll") return RecordFormat::conll;
  throw InputError(cat("--format: unknown format '", name, "' (expected lines, records, jsonl, tsv or conll)"));
}

bool json_string_field(std::string_view json, std::string_view field, std::string& out, std::string_view where,
                       bool replace) {
  return JsonParser(json, where, replace).find_member(field, out);
}

bool json_label_field(std::string_view json, std::string_view field, std::string& out, std::string_view where,
                      bool replace) {
  return JsonParser(json, where, replace).find_member(field, out, true);
}

RecordReader::RecordReader(std::string path, RecordOptions options)
    : path_(std::move(path)), options_(std::move(options)), buf_(kReadSize) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(cat(path_, ": cannot open: ", std::strerror(errno)));
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

RecordReader::~RecordReader() { ::close(fd_); }

bool RecordReader::next_line(std::string_view& line, uint64_t& offset) {
  size_t scanned = begin_;  // no '\n' in [begin_, scanned)
  for (;;) {
    const void* nl = std::memchr(buf_.data() + scanned, '\n', end_ - scanned);
    if (nl || (eof_ && begin_ < end_)) {
      size_t stop = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf_.data()) : end_;
      line = std::string_view(buf_.data() + begin_, stop - begin_);
      offset = consumed_;
      size_t used = (nl ? stop + 1 : stop) - begin_;
      begin_ += used;
      consumed_ += used;
      // Windows line ends, and the byte-order mark some editors put first: neither is text.
      if (!options_.keep_cr && line.ends_with('\r')) line.remove_suffix(1);
      if (line_ == 0 && line.starts_with("\xEF\xBB\xBF")) {
        line.remove_prefix(3);
        offset += 3;
      }
      ++line_;
      return true;
    }
    if (eof_) return false;
    // Keep the partial line, growing the buffer when one line fills it, and read more.
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    scanned = end_;
    if (buf_.size() - end_ < kReadSize / 2) buf_.resize(buf_.size() * 2);
    ssize_t r;
    do r = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
    while (r < 0 && errno == EINTR);
    if (r < 0) throw InputError(cat(path_, ": read failed: ", std::strerror(errno)));
    if (r == 0) eof_ = true;
    end_ += static_cast<size_t>(r);
  }
}

bool RecordReader::next(Record& record) {
  std::string_view line;
  uint64_t offset = 0;
  switch (options_.format) {
    case RecordFormat::lines:
      if (!next_line(line, offset)) return false;
      reset(record, line, line_, offset);
      return true;

    case RecordFormat::records: {
      text_.clear();
      bool any = false;
      for (;;) {
        if (!next_line(line, offset)) {
          if (!any) return false;
          break;  // the last record needs no separator after it
        }
        if (!any) reset(record, {}, line_, offset);
        if (line == options_.separator) break;
        if (any) text_ += '\n';
        text_.append(line);
        any = true;
      }
      record.text = text_;
      return true;
    }

    case RecordFormat::jsonl:
      do {
        if (!next_line(line, offset)) return false;
      } while (blank(line));
      reset(record, {}, line_, offset);
      if (size_t bad = find_invalid_utf8(line); bad != std::string_view::npos) {
        if (!options_.utf8_replace)
          throw InputError(cat(path_, ": line ", line_, ": invalid UTF-8 at byte offset ", offset + bad,
                               " (use --utf8-replace to substitute U+FFFD)"));
        fixed_ = replace_invalid_utf8(line);
        line = fixed_;
      }
      if (!json_string_field(line, options_.text_field, text_, cat(path_, ": line ", line_), options_.utf8_replace))
        throw InputError(cat(path_, ": line ", line_, ": no string member \"", options_.text_field, "\""));
      record.text = text_;
      if (!options_.label_field.empty()) {
        if (!json_label_field(line, options_.label_field, label_, cat(path_, ": line ", line_), options_.utf8_replace))
          throw InputError(cat(path_, ": line ", line_, ": no member \"", options_.label_field, "\" (the label)"));
        if (label_.empty()) throw InputError(cat(path_, ": line ", line_, ": the label is empty"));
        record.label = label_;
      }
      return true;

    case RecordFormat::tsv: {
      if (!next_line(line, offset)) return false;
      const size_t tab = line.find('\t');
      if (tab == std::string_view::npos)
        throw InputError(cat(path_, ": line ", line_, ": no tab between the label and the text"));
      if (tab == 0) throw InputError(cat(path_, ": line ", line_, ": the label is empty"));
      if (size_t bad = find_invalid_utf8(line.substr(0, tab)); bad != std::string_view::npos)
        throw InputError(cat(path_, ": line ", line_, ": invalid UTF-8 in the label at byte offset ", offset + bad));
      reset(record, line.substr(tab + 1), line_, offset + tab + 1);
      record.label = line.substr(0, tab);
      return true;
    }

    case RecordFormat::conll: {
      text_.clear();
      spans_.clear();
      int64_t first_line = 0;
      uint64_t first_offset = 0;
      for (;;) {
        const bool more = next_line(line, offset);
        if (!more || blank(line)) {
          if (!spans_.empty() || !more) break;  // a sentence ends; blank lines between sentences are skipped
          continue;
        }
        if (line.starts_with("-DOCSTART-")) continue;
        // Comments come before a sentence's first token (CoNLL-U); inside one, '#' is a token (PTB's).
        if (line.starts_with('#') && spans_.empty() && !options_.conll_comments) {
          ++comments_;
          continue;
        }
        if (size_t bad = find_invalid_utf8(line); bad != std::string_view::npos)
          throw InputError(cat(path_, ": line ", line_, ": invalid UTF-8 at byte offset ", offset + bad));
        // Whitespace-separated columns: the token first, the tag in tag_column.
        std::vector<std::string_view>& columns = columns_;
        columns.clear();
        for (size_t i = 0; i < line.size();) {
          while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
          size_t j = i;
          while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
          if (j > i) columns.push_back(line.substr(i, j - i));
          i = j;
        }
        // Without tags, the token stands in for its tag (which is then ignored).
        const int col = !options_.conll_tags      ? 0
                        : options_.tag_column < 0 ? static_cast<int>(columns.size()) - 1
                                                  : options_.tag_column;
        if (options_.conll_tags && (columns.size() < 2 || col < 1 || col >= static_cast<int>(columns.size())))
          throw InputError(cat(path_, ": line ", line_, ": ", columns.size(), " column(s), no tag in column ",
                               options_.tag_column < 0 ? cat("(the last)") : cat(options_.tag_column)));
        if (spans_.empty()) first_line = line_, first_offset = offset;
        for (std::string_view part : {columns[0], columns[col]}) {
          spans_.emplace_back(text_.size(), part.size());
          text_.append(part);
        }
      }
      if (spans_.empty()) return false;
      reset(record, {}, first_line, first_offset);
      for (size_t k = 0; k < spans_.size(); k += 2) {
        record.tokens.push_back(std::string_view(text_).substr(spans_[k].first, spans_[k].second));
        record.tags.push_back(std::string_view(text_).substr(spans_[k + 1].first, spans_[k + 1].second));
      }
      return true;
    }
  }
  return false;
}

}  // namespace rnn_dist
