// The chat page duet serve answers GET / with: one self-contained document
// (HTML, CSS and script inline, no framework, nothing fetched from
// elsewhere) that talks to this server's /v1/models and streamed
// /v1/chat/completions. Built into the binary so the server needs no files
// beside it and works offline.
#pragma once

#include <string_view>

#include "server/http_message.h"

namespace duet::server {

std::string_view chat_page_html();

// The page, with headers that keep it to this origin (a Content-Security-
// Policy allowing inline code and connections to 'self' only). A server
// with an API key says so in the page, which then asks for the key first.
void set_chat_page(HttpResponse& res, bool api_key_required);

}  // namespace duet::server
