// Text that came from a file (a tensor name, a metadata key or string), made safe to put into an error
// message: `check(ok, "tensor '", printable(name), "' ...")`. Bytes that are not printable, NUL
// included (it would cut the message short where it is printed as a C string), become \xNN; valid
// UTF-8 text is kept as it is. Longer text is cut after max_len bytes and ends with "…(N bytes)".
#pragma once
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace polykv {

// A view, escaped only when streamed (so check()'s arguments cost nothing while the check holds).
// The viewed text must outlive the Printable.
struct Printable {
  std::string_view text;
  size_t max_len;
  std::string str() const;
};

inline Printable printable(std::string_view text, size_t max_len = 200) { return {text, max_len}; }

std::ostream& operator<<(std::ostream& os, const Printable& p);

}  // namespace polykv
