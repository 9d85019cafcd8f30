// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: xml.h
// -----------------------------------------------------------------------------
//
// A small owned element tree parsed by libxml2, for the XML bodies of the S3
// and Azure REST APIs (listings and error documents). libxml2 does the parsing,
// entity decoding and encoding detection; network access and DTD loading are
// disabled. Element names are local names (namespaces dropped).
#ifndef LARDER_UNDERSTORE_XML_H_
#define LARDER_UNDERSTORE_XML_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

struct XmlElement {
  std::string name;
  std::string text;  // Concatenated text content of direct text children.
  std::vector<XmlElement> children;

  // First direct child named `name`, or nullptr.
  const XmlElement* Child(absl::string_view name) const;
  // Text of the first direct child named `name`, or "".
  absl::string_view ChildText(absl::string_view name) const;
};

// Parses a document; returns its root element.
// Errors: InvalidArgument (not well-formed XML).
// Larger answers are refused (a list page of 1,000 keys is ~300 KiB).
inline constexpr size_t kMaxXmlBytes = 64 << 20;
absl::StatusOr<XmlElement> ParseXml(absl::string_view document);

}  // namespace larder

#endif  // LARDER_UNDERSTORE_XML_H_
