#include "cli/hub.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/download.h"
#include "core/json_parse.h"

namespace duet::cli {
namespace fs = std::filesystem;

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with_gguf(const std::string& path) {
  return path.size() > 5 && upper(path.substr(path.size() - 5)) == ".GGUF";
}

// Percent-encodes everything but unreserved characters and '/'.
std::string url_path(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

bool valid_repo(const std::string& repo) {
  const size_t slash = repo.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == repo.size() || repo.find('/', slash + 1) != std::string::npos)
    return false;
  return std::all_of(repo.begin(), repo.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  }) && repo.find("..") == std::string::npos;
}

// Split files ("name-00001-of-00003.gguf") are one model in several parts.
bool is_split_part(const std::string& path) { return path.find("-of-0") != std::string::npos; }

Result<std::vector<HubFile>> list_repo_files(const HubConfig& hub, const std::string& repo) {
  httplib::Client cli(hub.endpoint);
  if (!cli.is_valid()) return err("HF_ENDPOINT '", hub.endpoint, "' is not a valid URL (scheme://host[:port])");
  cli.set_follow_location(true);
  cli.set_connection_timeout(10, 0);
  cli.set_read_timeout(60, 0);
  httplib::Headers headers;
  if (!hub.token.empty()) headers.emplace("Authorization", "Bearer " + hub.token);
  const std::string path = "/api/models/" + url_path(repo) + "/tree/main?recursive=true";
  auto res = cli.Get(path, headers);
  if (!res)
    return err("cannot reach ", hub.endpoint, " (", httplib::to_string(res.error()),
               "); set HF_ENDPOINT to a reachable hub or mirror");
  if (res->status == 401 || res->status == 403)
    return err(repo, ": HTTP ", res->status, " from ", hub.endpoint, " (a gated or private repository needs HF_TOKEN)");
  if (res->status == 404) return err("no repository '", repo, "' at ", hub.endpoint);
  if (res->status != 200) return err("listing ", repo, " at ", hub.endpoint, ": HTTP ", res->status);
  const auto parsed = parse_json(res->body);
  const nlohmann::json j = parsed.ok() ? *parsed : nlohmann::json();
  if (!j.is_array()) return err("listing ", repo, " at ", hub.endpoint, ": not a JSON array of files");
  std::vector<HubFile> files;
  for (const auto& e : j) {
    if (!e.is_object() || e.value("type", "") != "file" || !e.contains("path") || !e["path"].is_string()) continue;
    HubFile f;
    f.path = e["path"].get<std::string>();
    if (e.contains("size") && e["size"].is_number_integer()) f.size = e["size"].get<int64_t>();
    if (e.contains("lfs") && e["lfs"].is_object()) {
      const auto& lfs = e["lfs"];
      if (lfs.contains("oid") && lfs["oid"].is_string()) f.sha256 = lfs["oid"].get<std::string>();
      if (lfs.contains("size") && lfs["size"].is_number_integer()) f.size = lfs["size"].get<int64_t>();
    }
    // A file name must stay inside the cache folder.
    if (f.path.empty() || f.path.front() == '/' || f.path.find("..") != std::string::npos) continue;
    files.push_back(std::move(f));
  }
  return files;
}

fs::path repo_cache_dir(const HubConfig& hub, const std::string& repo) {
  return fs::path(hub.cache_dir) / ("models--" + repo.substr(0, repo.find('/')) + "--" + repo.substr(repo.find('/') + 1));
}

// Without a network: a complete file of the wanted quant pulled before.
std::string cached_copy(const HubConfig& hub, const ModelRef& ref) {
  std::error_code ec;
  const fs::path dir = repo_cache_dir(hub, ref.repo);
  if (!fs::is_directory(dir, ec)) return "";
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string p = it->path().string();
    if (it->is_regular_file(ec) && ends_with_gguf(p) && quant_in_name(it->path().filename().string()) == upper(ref.quant))
      return p;
  }
  return "";
}

}  // namespace

Result<ModelRef> parse_model_ref(const std::string& text) {
  ModelRef ref;
  const size_t colon = text.find(':');
  ref.repo = text.substr(0, colon);
  ref.quant = colon == std::string::npos ? "Q4_K_M" : text.substr(colon + 1);
  if (!valid_repo(ref.repo)) return err("'", text, "' is not a model name: expected OWNER/NAME[:QUANT]");
  if (ref.quant.empty()) return err("'", text, "': empty quant after ':'");
  return ref;
}

std::string quant_in_name(const std::string& file_name) {
  // Longest names first, so Q4_K_M wins over Q4_K.
  static const char* const kQuants[] = {
      "IQ2_XXS", "IQ3_XXS", "IQ1_S", "IQ1_M", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XS", "IQ3_S", "IQ3_M", "IQ4_NL",
      "IQ4_XS", "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q2_K", "Q3_K",
      "Q4_K", "Q5_K", "Q6_K", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4", "BF16", "F16", "F32"};
  const std::string name = upper(file_name);
  const auto boundary = [&](size_t i) { return i >= name.size() || !std::isalnum(static_cast<unsigned char>(name[i])); };
  for (size_t i = 0; i < name.size(); ++i) {
    if (i > 0 && std::isalnum(static_cast<unsigned char>(name[i - 1]))) continue;
    for (const char* q : kQuants) {
      const size_t n = std::char_traits<char>::length(q);
      if (name.compare(i, n, q) == 0 && boundary(i + n) && !(i + n < name.size() && name[i + n] == '_')) return q;
    }
  }
  return "";
}

Result<HubFile> pick_gguf(const std::vector<HubFile>& files, const ModelRef& ref) {
  const std::string want = upper(ref.quant);
  std::vector<const HubFile*> match;
  std::set<std::string> have;
  for (const HubFile& f : files) {
    if (!ends_with_gguf(f.path)) continue;
    const std::string base = fs::path(f.path).filename().string();
    if (upper(base).find("MMPROJ") != std::string::npos) continue;  // vision projectors, not models
    const std::string q = quant_in_name(base);
    if (!q.empty()) have.insert(q);
    if (q == want) match.push_back(&f);
  }
  if (match.empty()) {
    if (have.empty()) return err("no GGUF model files in ", ref.repo);
    std::string list;
    for (const std::string& q : have) list += (list.empty() ? "" : ", ") + q;
    return err("no ", want, " GGUF in ", ref.repo, "; it has: ", list, " (ask for one as ", ref.repo, ":QUANT)");
  }
  if (std::any_of(match.begin(), match.end(), [](const HubFile* f) { return is_split_part(f->path); }))
    return err(ref.repo, ": the ", want, " model is split into several files, which duet cannot load yet");
  // Several copies (in subfolders): the one nearest the top.
  const HubFile* best = *std::min_element(match.begin(), match.end(),
                                          [](const HubFile* a, const HubFile* b) { return a->path.size() < b->path.size(); });
  return *best;
}

HubConfig hub_config_from_env() {
  HubConfig h;
  const char* endpoint = std::getenv("HF_ENDPOINT");
  h.endpoint = endpoint && *endpoint ? endpoint : "https://huggingface.co";
  while (!h.endpoint.empty() && h.endpoint.back() == '/') h.endpoint.pop_back();
  if (const char* t = std::getenv("HF_TOKEN")) h.token = t;
  if (const char* c = std::getenv("DUET_CACHE"); c && *c) {
    h.cache_dir = c;
  } else {
    const char* home = std::getenv("HOME");
    h.cache_dir = (fs::path(home && *home ? home : ".") / ".cache" / "duet").string();
  }
  return h;
}

Result<std::string> pull_model(const HubConfig& hub, const ModelRef& ref) {
  auto files = list_repo_files(hub, ref.repo);
  if (!files) {
    const std::string cached = cached_copy(hub, ref);
    if (cached.empty()) return files.error();
    std::fprintf(stderr, "duet: %s; using the copy pulled before: %s\n", files.error().message.c_str(), cached.c_str());
    return cached;
  }
  DUET_ASSIGN(const HubFile file, pick_gguf(*files, ref));
  const fs::path dest = repo_cache_dir(hub, ref.repo) / file.path;
  std::error_code ec;
  if (fs::is_regular_file(dest, ec) && static_cast<int64_t>(fs::file_size(dest, ec)) == file.size) return dest.string();
  DownloadRequest r;
  r.endpoint = hub.endpoint;
  r.path = "/" + url_path(ref.repo) + "/resolve/main/" + url_path(file.path);
  r.token = hub.token;
  r.dest = dest.string();
  r.size = file.size > 0 ? file.size : -1;
  r.sha256 = file.sha256;
  DUET_TRY(download_file(r));
  return dest.string();
}

}  // namespace duet::cli
