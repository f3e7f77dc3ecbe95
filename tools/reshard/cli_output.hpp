// Where the commands write: standard output or files, every one opened (and checked) before any work and every
// write checked, so that a missing folder, a full disk or a closed pipe is an error naming the file (exit 1) instead
// of a run that exits 0 having written nothing. Also the one convention for JSON output: `--json [FILE]`, where no
// value or `-` means standard output.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace reshard::cli {

// A write that failed: main() reports it (naming the file and the system's reason) and exits 1.
class WriteFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Output {
 public:
  // "-": standard output. A file is created now (WriteFailure when it cannot be) and emptied at the first write or
  // flush, so that a command may still read it first (`plan --load p.json --json p.json`) and one that fails before
  // writing leaves it as it was.
  static Output open(const std::string& path, std::string_view flag);
  static Output standard();

  // Appends text; WriteFailure naming the file on failure.
  void write(std::string_view text);
  // Flushes to the system (each row of a sweep is flushed, so an interrupted run keeps them); WriteFailure on failure.
  void flush();
  const std::string& name() const { return name_; }
  bool is_stdout() const { return file_ == stdout; }

 private:
  Output(std::FILE* file, std::string name, bool owned);
  struct Closer {
    void operator()(std::FILE* f) const;
  };
  // Empties a regular file the first time anything is written or flushed.
  void start();
  std::FILE* file_;
  std::string name_;
  bool started_ = false;
  std::unique_ptr<std::FILE, Closer> owned_;
  [[noreturn]] void failed(int error) const;
};

// Checks that `path` can be written without truncating an existing file (it is created and removed again when it
// did not exist); WriteFailure naming the flag and the reason otherwise. For outputs written only at the end.
void check_writable(const std::string& path, std::string_view flag);

// Flushes standard output; WriteFailure when anything written to it was lost (a full disk, a closed pipe).
void finish_stdout();

// `--json [FILE]`: the JSON goes to standard output (no value, or `-`) or to FILE.
struct JsonFlag {
  CLI::Option* option = nullptr;
  std::string value;
  bool given() const { return option && option->count() > 0; }
  std::string path() const { return value.empty() ? "-" : value; }
};
void add_json_flag(CLI::App& cmd, JsonFlag& flag, const std::string& what);

}  // namespace reshard::cli
