// Fuzzes the image reference parsers (sandbox/image/reference.cpp): a fixture, a Harbor task's
// docker_image or the command line names the image, and the text is anyone's. What parses has
// one canonical spelling: str() parses again to the same str() (the store, run ids and the
// credential lookup key on it), through either entry point.
#include "sandbox/image/reference.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  using namespace evalbox::sandbox::image;
  const std::string_view text = fuzz::as_text(data, size);
  static const std::vector<std::pair<std::string, std::string>> aliases{
      {"py", "docker.io/library/python"}, {"tools/jq", "quay.io/team/jq"}};

  for (const auto* a : {&aliases, static_cast<decltype(&aliases)>(nullptr)}) {
    auto r = a ? parse_registry_reference(text, *a) : parse_registry_reference(text);
    if (!r) {
      fuzz::check(!r.error().message.empty(), "a refused registry name says why");
      continue;
    }
    fuzz::check(r->kind == transport::docker, "a registry name is a docker:// reference");
    fuzz::check(!r->domain.empty() && !r->repository.empty(), "it has a domain and a path");
    fuzz::check(!r->tag.empty() || !r->digest.empty(), "it has a tag or a digest");
    fuzz::check(r->name() == r->domain + "/" + r->repository, "name() is DOMAIN/PATH");
    const std::string canonical = r->str();
    fuzz::check(canonical.starts_with("docker://"), "str() is docker://...");
    auto again = parse_registry_reference(canonical);
    fuzz::check(static_cast<bool>(again), "str() of a registry name parses again");
    fuzz::check(again->str() == canonical, "str() of a registry name is a fixed point");
    fuzz::check(again->domain == r->domain && again->repository == r->repository &&
                    again->tag == r->tag && again->digest == r->digest,
                "str() keeps every part");
    auto via_transport = parse_reference(canonical, "/fuzz/base");
    fuzz::check(static_cast<bool>(via_transport) && via_transport->str() == canonical,
                "parse_reference reads a registry name's str() the same");
    if (!r->digest.empty())
      fuzz::check(static_cast<bool>(parse_registry_reference(r->pinned(r->digest))),
                  "the pinned name parses");
  }

  if (auto r = parse_reference(text, "/fuzz/base")) {
    const std::string canonical = r->str();
    auto again = parse_reference(canonical, "/fuzz/base");
    fuzz::check(static_cast<bool>(again), "str() of a reference parses again");
    fuzz::check(again->str() == canonical, "str() of a reference is a fixed point");
    fuzz::check(again->kind == r->kind, "str() keeps the transport");
    if (r->kind != transport::docker)
      fuzz::check(r->path.is_absolute(), "a path reference is absolute");
  }
  return 0;
}
