// Copyright 2026 The Larder Authors.
#include "understore/xml.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(XmlTest, ParsesListingWithNamespaceAndEntities) {
  absl::StatusOr<XmlElement> doc = ParseXml(
      R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <IsTruncated>true</IsTruncated>
  <Contents><Key>a&amp;b &lt;c&gt;</Key><Size>12</Size></Contents>
  <Contents><Key><![CDATA[x&y]]></Key></Contents>
  <NextContinuationToken>tok/+=</NextContinuationToken>
</ListBucketResult>)");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->name, "ListBucketResult");
  EXPECT_EQ(doc->ChildText("IsTruncated"), "true");
  ASSERT_EQ(doc->children.size(), 4u);
  EXPECT_EQ(doc->children[1].ChildText("Key"), "a&b <c>");
  EXPECT_EQ(doc->children[1].ChildText("Size"), "12");
  EXPECT_EQ(doc->children[2].ChildText("Key"), "x&y");
  EXPECT_EQ(doc->ChildText("NextContinuationToken"), "tok/+=");
  EXPECT_EQ(doc->ChildText("Missing"), "");
}

TEST(XmlTest, RejectsMalformed) {
  EXPECT_EQ(ParseXml("<a><b></a>").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseXml("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(XmlTest, DoesNotExpandExternalEntities) {
  absl::StatusOr<XmlElement> doc = ParseXml(
      R"(<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>)");
  if (doc.ok()) EXPECT_EQ(doc->text.find("root:"), std::string::npos);
}

}  // namespace
}  // namespace larder
