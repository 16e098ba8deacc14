// The status page served at GET / (see status_page.cpp).
#pragma once

namespace polykv::server {

const char* status_page_html();  // a complete HTML document, UTF-8

}  // namespace polykv::server
