// Validates an OpenAPI document with @apidevtools/swagger-parser (the
// OpenAPI 3.1 JSON schema plus its own checks: unique operationIds,
// path parameters declared and used, $refs resolving).
// Usage: node validate.mjs FILE
import SwaggerParser from '@apidevtools/swagger-parser';

const file = process.argv[2];
try {
  const api = await SwaggerParser.validate(file);
  const n = Object.keys(api.paths || {}).length;
  console.log(`valid: ${api.info.title} ${api.info.version}, OpenAPI ${api.openapi}, ${n} paths`);
} catch (err) {
  console.error(`invalid: ${err.message}`);
  process.exit(1);
}
