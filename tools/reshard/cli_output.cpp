#include "cli_output.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "reshard/text.hpp"

namespace reshard::cli {

void Output::Closer::operator()(std::FILE* f) const { std::fclose(f); }

Output::Output(std::FILE* file, std::string name, bool owned)
    : file_(file), name_(std::move(name)), owned_(owned ? file : nullptr) {}

Output Output::standard() { return Output(stdout, "standard output", false); }

Output Output::open(const std::string& path, std::string_view flag) {
  if (path == "-") return standard();
  if (path.empty()) throw WriteFailure(fmt::format("{}: empty file name", flag));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  std::FILE* f = fd < 0 ? nullptr : ::fdopen(fd, "w");
  if (!f) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw WriteFailure(fmt::format("{}: cannot write '{}': {}", flag, printable(path), std::strerror(error)));
  }
  return Output(f, "'" + printable(path) + "'", true);
}

void Output::start() {
  if (started_ || !owned_) return;
  started_ = true;
  struct stat st {};
  if (::fstat(::fileno(file_), &st) == 0 && S_ISREG(st.st_mode) && ::ftruncate(::fileno(file_), 0) != 0) failed(errno);
}

void Output::failed(int error) const {
  throw WriteFailure(fmt::format("cannot write {}: {}", name_, std::strerror(error ? error : EIO)));
}

void Output::write(std::string_view text) {
  start();
  errno = 0;
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), file_) != text.size()) failed(errno);
}

void Output::flush() {
  start();
  errno = 0;
  if (std::fflush(file_) != 0 || std::ferror(file_)) failed(errno);
}

void check_writable(const std::string& path, std::string_view flag) {
  if (path.empty()) throw WriteFailure(fmt::format("{}: empty file name", flag));
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode))
    throw WriteFailure(fmt::format("{}: cannot write '{}': it is a directory", flag, printable(path)));
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) throw WriteFailure(fmt::format("{}: cannot write '{}': {}", flag, printable(path), std::strerror(errno)));
  std::fclose(f);
  if (!existed) ::unlink(path.c_str());
}

void finish_stdout() { Output::standard().flush(); }

void add_json_flag(CLI::App& cmd, JsonFlag& flag, const std::string& what) {
  flag.option = cmd.add_option("--json", flag.value, what + " as JSON, to standard output (no value or -) or to FILE")
                    ->expected(0, 1)
                    ->type_name("[FILE]");
}

}  // namespace reshard::cli
