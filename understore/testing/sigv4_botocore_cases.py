#!/usr/bin/env python3
"""Generates S3 SigV4 test cases signed by botocore, an independent implementation.

Prints one JSON object per line: the request's raw inputs (method, host, raw key,
query parameters, headers, credentials, time) and what botocore's S3SigV4Auth
computes for them (canonical request, string to sign, signature). The C++ test
signs the same inputs with larder::SignV4 and compares.

botocore's S3SigV4Auth takes the URL path already encoded, as botocore's own S3
serializer produces it: quote(key, safe='/~'). That is the reference encoding
the C++ side must match from the raw key.

Usage: sigv4_botocore_cases.py COUNT SEED
"""
import datetime
import json
import random
import sys
from urllib.parse import quote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

KEY_PIECES = [
    "train", "val", "img_0001.jpg", "a b", "plus+sign", "eq=amp&", "pct%20lit", "tilde~",
    "star*", "paren(1)", "quote'", "comma,semi;", "colon:", "at@", "dollar$", "hash#",
    "question?", "bracket[0]", "日本語", "файл", "emoji😀", "ü", "tab\tchar", "back\\slash",
    "dot.", "..dots", "UPPER", "-_.", "", "caret^", "pipe|", "lt<gt>", "brace{}",
]
QUERY_VALUES = ["", "1000", "/", "a/b c", "tok+/=", "日本", "x&y=z", "~-_.", "%41", "url"]
HOSTS = [
    ("https", "examplebucket.s3.amazonaws.com"),
    ("https", "s3.eu-central-1.amazonaws.com"),
    ("http", "127.0.0.1:9000"),
    ("http", "localhost:4568"),
    ("https", "my.bucket.s3.us-west-2.amazonaws.com"),
]
HEADER_CHOICES = [
    ("Range", lambda r: "bytes=%d-%d" % (r.randrange(0, 1 << 40), r.randrange(1 << 40, 1 << 41))),
    ("If-Match", lambda r: '"%032x"' % r.getrandbits(128)),
    ("x-amz-meta-note", lambda r: "  spaced   out\tvalue  "),
    ("Content-Type", lambda r: "application/octet-stream"),
    ("X-Amz-Request-Payer", lambda r: "requester"),
]


def make_case(r, i):
    scheme, host = r.choice(HOSTS)
    key = "/".join(r.choice(KEY_PIECES) for _ in range(r.randint(1, 4)))
    if r.random() < 0.5:
        raw_path = "/bucket/" + key  # path-style
    else:
        raw_path = "/" + key
    query = {}
    if r.random() < 0.6:
        names = ["list-type", "prefix", "continuation-token", "max-keys", "delimiter",
                 "encoding-type", "versionId", "uploads", "x-id", "weird name"]
        for name in r.sample(names, r.randint(1, 5)):
            query[name] = r.choice(QUERY_VALUES)
    headers = {}
    for name, gen in r.sample(HEADER_CHOICES, r.randint(0, len(HEADER_CHOICES))):
        headers[name] = gen(r)
    method = r.choice(["GET", "HEAD", "PUT", "DELETE"])
    payload = "UNSIGNED-PAYLOAD" if r.random() < 0.5 else "%064x" % r.getrandbits(256)
    access = "AKID%016X" % r.getrandbits(64)
    secret = "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/")
                     for _ in range(40))
    token = ""
    if r.random() < 0.3:
        token = "".join(r.choice("ABCDEFabcdef0123456789+/=") for _ in range(r.randint(20, 300)))
    region = r.choice(["us-east-1", "eu-central-1", "ap-southeast-2"])
    when = datetime.datetime(2013, 5, 24) + datetime.timedelta(seconds=r.randrange(0, 10 ** 9))
    timestamp = when.strftime("%Y%m%dT%H%M%SZ")

    url = "%s://%s%s" % (scheme, host, quote(raw_path, safe="/~"))
    req = AWSRequest(method=method, url=url, headers=dict(headers), params=dict(query))
    req.context["timestamp"] = timestamp
    req.headers["X-Amz-Date"] = timestamp
    req.headers["X-Amz-Content-SHA256"] = payload
    if token:
        req.headers["X-Amz-Security-Token"] = token
    auth = S3SigV4Auth(Credentials(access, secret, token or None), "s3", region)
    canonical_request = auth.canonical_request(req)
    string_to_sign = auth.string_to_sign(req, canonical_request)
    signature = auth.signature(string_to_sign, req)
    return {
        "method": method, "host": host, "raw_path": raw_path,
        "query": sorted(query.items()), "headers": sorted(headers.items()),
        "access_key": access, "secret_key": secret, "token": token, "region": region,
        "timestamp": timestamp, "payload": payload,
        "canonical_request": canonical_request, "string_to_sign": string_to_sign,
        "signature": signature,
    }


def main():
    count, seed = int(sys.argv[1]), int(sys.argv[2])
    r = random.Random(seed)
    for i in range(count):
        print(json.dumps(make_case(r, i), ensure_ascii=True))


if __name__ == "__main__":
    main()
