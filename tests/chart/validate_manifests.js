// Copyright 2026 The Larder Authors.
//
// Validates Kubernetes manifests (a JSON array on stdin) against the API schemas offline,
// with kubernetes-models (the Kubernetes 1.31-era OpenAPI schemas compiled to validators)
// and @kubernetes-models/prometheus-operator for PodMonitor. Prints one line per manifest;
// exits 1 if any is invalid or of a kind it has no schema for.
"use strict";
const path = require("path");
const modules = path.join(__dirname, "..", "servers", "node_modules");

function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const pkg = group === "monitoring.coreos.com"
    ? "@kubernetes-models/prometheus-operator" : "kubernetes-models";
  const dir = group === "" ? version : `${group}/${version}`;
  const mod = require(path.join(modules, pkg, dir, `${kind}.js`));
  return mod[kind];
}

const docs = JSON.parse(require("fs").readFileSync(0, "utf8"));
let failed = 0;
for (const doc of docs) {
  const name = `${doc.kind}/${doc.metadata && doc.metadata.name}`;
  try {
    const Model = modelFor(doc.apiVersion, doc.kind);
    new Model(doc).validate();
    console.log(`valid   ${doc.apiVersion} ${name}`);
  } catch (e) {
    failed++;
    console.log(`INVALID ${doc.apiVersion} ${name}: ${e.message}`);
  }
}
process.exit(failed ? 1 : 0);
