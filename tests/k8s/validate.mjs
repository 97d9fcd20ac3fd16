// Validates Kubernetes manifests against the Kubernetes API's schemas
// (kubernetes-models, pinned by package-lock.json): every document of each
// YAML file given must be a known apiVersion/kind and pass its model's
// validate().  Prints one line per document; exits 1 on any failure.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

let failed = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const [i, doc] of docs.entries()) {
    const where = `${file}#${i}`;
    if (doc.errors.length) {
      console.log(`not ok ${where}: YAML: ${doc.errors[0].message}`);
      failed++;
      continue;
    }
    const obj = doc.toJS();
    if (!obj) continue;
    const { apiVersion, kind } = obj;
    const path = `kubernetes-models/${apiVersion}/${kind}`;
    let Model;
    try {
      Model = (await import(path))[kind];
    } catch {
      Model = undefined;
    }
    if (!Model) {
      console.log(`not ok ${where}: unknown apiVersion/kind ${apiVersion} ${kind}`);
      failed++;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`ok ${where}: ${kind} ${obj.metadata?.name}`);
    } catch (e) {
      console.log(`not ok ${where}: ${kind} ${obj.metadata?.name}: ${e.message.split("\n")[0]}`);
      failed++;
    }
  }
}
process.exit(failed ? 1 : 0);
