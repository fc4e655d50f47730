// Reading the fields of a JSON object that came from a file or another program, without
// exceptions: the one accessor every reader of records, plans, manifests and model answers uses.
//   json_get<T>(j, key)           the field as a T, or an error naming the key and what was wrong;
//   json_get_optional<T>(j, key)  the same, with a missing or null field as nothing;
//   json_find<T>(j, key)          the field as a T, or nothing when it is missing or of another
//                                 type (for readers that take any shape: agents' event streams);
//   json_value_or(j, key, v)      the same with a fallback (reports of old records);
//   json_member(j, key)           the field itself, or null: safe to chain, unlike operator[]
//                                 on a const json, which is undefined when the key is missing.
// Integers are range-checked (a hostile 1e300 or -5 is refused, not misread) and a number is
// never read as a bool or a string. The caller adds what it was reading as context:
// EB_TRY_CTX(json_get<int>(j, "seq"), "launch plan") says "launch plan: missing field 'seq'".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace evalbox {
inline namespace base {

// The value at `key` of object `j`; a null value when `j` is not an object or lacks the key.
const json& json_member(const json& j, std::string_view key) noexcept;

namespace json_detail {

template <class T>
struct is_string_vector : std::false_type {};
template <>
struct is_string_vector<std::vector<std::string>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <>
struct is_string_map<std::map<std::string, std::string>> : std::true_type {};

// What a T is called in a message ("an integer", "a list of strings").
template <class T>
constexpr std::string_view wanted() {
  if constexpr (std::is_same_v<T, bool>)
    return "a boolean";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else if constexpr (is_string_vector<T>::value)
    return "a list of strings";
  else if constexpr (is_string_map<T>::value)
    return "an object of strings";
  else if constexpr (std::is_same_v<T, json>)
    return "a value";
  else
    static_assert(sizeof(T) == 0, "json_get: no reading of this type");
}

enum class refusal { none, type, range };

// `v` as a T, or why not. Never throws: the type is checked before any get<>.
template <class T>
refusal convert(const json& v, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return refusal::type;
    out = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return refusal::type;
    if (v.is_number_unsigned()) {
      auto u = v.get<uint64_t>();
      if (!std::in_range<T>(u)) return refusal::range;
      out = static_cast<T>(u);
    } else {
      auto s = v.get<int64_t>();
      if (!std::in_range<T>(s)) return refusal::range;
      out = static_cast<T>(s);
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return refusal::type;
    out = v.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return refusal::type;
    out = v.get_ref<const std::string&>();
  } else if constexpr (is_string_vector<T>::value) {
    if (!v.is_array()) return refusal::type;
    out.clear();
    out.reserve(v.size());
    for (const auto& item : v) {
      if (!item.is_string()) return refusal::type;
      out.push_back(item.get_ref<const std::string&>());
    }
  } else if constexpr (is_string_map<T>::value) {
    if (!v.is_object()) return refusal::type;
    out.clear();
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it->is_string()) return refusal::type;
      out.emplace(it.key(), it->get_ref<const std::string&>());
    }
  } else {
    static_assert(std::is_same_v<T, json>, "json_get: no reading of this type");
    out = v;
  }
  return refusal::none;
}

std::unexpected<error> missing(std::string_view key);
std::unexpected<error> refused(std::string_view key, const json& v, std::string_view wanted,
                               refusal why);

}  // namespace json_detail

// Field `key` of object `j` as a T: an invalid_argument error when it is missing (or `j` is not
// an object), of another type, or out of T's range.
template <class T>
result<T> json_get(const json& j, std::string_view key) {
  const json& v = json_member(j, key);
  if (v.is_null() && !(j.is_object() && j.contains(key))) return json_detail::missing(key);
  T out{};
  if (auto why = json_detail::convert(v, out); why != json_detail::refusal::none)
    return json_detail::refused(key, v, json_detail::wanted<T>(), why);
  return out;
}

// As json_get, but a missing or null field is nothing rather than an error.
template <class T>
result<std::optional<T>> json_get_optional(const json& j, std::string_view key) {
  const json& v = json_member(j, key);
  if (v.is_null()) return std::optional<T>();
  T out{};
  if (auto why = json_detail::convert(v, out); why != json_detail::refusal::none)
    return json_detail::refused(key, v, json_detail::wanted<T>(), why);
  return std::optional<T>(std::move(out));
}

// Field `key` of `j` as a T, or nothing when it is missing, null, mistyped or out of range.
template <class T>
std::optional<T> json_find(const json& j, std::string_view key) {
  T out{};
  if (json_detail::convert(json_member(j, key), out) != json_detail::refusal::none)
    return std::nullopt;
  return out;
}

// Field `key` of `j` as a T, or `fallback` when it is missing, null, mistyped or out of range.
template <class T>
T json_value_or(const json& j, std::string_view key, T fallback) {
  T out{};
  if (json_detail::convert(json_member(j, key), out) != json_detail::refusal::none) return fallback;
  return out;
}

// A string field with a string literal as the fallback.
inline std::string json_value_or(const json& j, std::string_view key, const char* fallback) {
  return json_value_or<std::string>(j, key, std::string(fallback));
}

}  // namespace base
}  // namespace evalbox
