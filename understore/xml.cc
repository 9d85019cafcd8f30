// Copyright 2026 The Larder Authors.
#include "understore/xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "absl/strings/str_cat.h"

namespace larder {
namespace {

void Convert(xmlNode* node, XmlElement* out) {
  out->name = reinterpret_cast<const char*>(node->name);
  for (xmlNode* c = node->children; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) {
      out->children.emplace_back();
      Convert(c, &out->children.back());
    } else if ((c->type == XML_TEXT_NODE ||
                c->type == XML_CDATA_SECTION_NODE) &&
               c->content != nullptr) {
      out->text += reinterpret_cast<const char*>(c->content);
    }
  }
}

}  // namespace

const XmlElement* XmlElement::Child(absl::string_view child) const {
  for (const XmlElement& c : children) {
    if (c.name == child) return &c;
  }
  return nullptr;
}

absl::string_view XmlElement::ChildText(absl::string_view child) const {
  const XmlElement* c = Child(child);
  return c == nullptr ? absl::string_view() : absl::string_view(c->text);
}

absl::StatusOr<XmlElement> ParseXml(absl::string_view document) {
  // Object-store answers have no document type: one is refused before
  // libxml2 sees it (no entity expansion, no external subset). libxml2's
  // default limits (no XML_PARSE_HUGE) bound depth and text sizes.
  if (document.size() > kMaxXmlBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("XML answer of ", document.size(),
                     " bytes is over the limit of ", kMaxXmlBytes));
  }
  if (document.find("<!DOCTYPE") != absl::string_view::npos ||
      document.find("<!ENTITY") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "XML answer with a document type declaration refused");
  }
  xmlDoc* doc = xmlReadMemory(
      document.data(), static_cast<int>(document.size()), nullptr, nullptr,
      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed XML (", document.size(), " bytes): '",
                     document.substr(0, 120), "'"));
  }
  XmlElement root;
  if (xmlNode* node = xmlDocGetRootElement(doc)) Convert(node, &root);
  xmlFreeDoc(doc);
  return root;
}

}  // namespace larder
