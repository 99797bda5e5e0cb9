package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 description of this API (openapi.json in
// this package's directory), which the server serves at
// GET /v1/openapi.json. A test in package server holds it to the routes
// the server registers and checks its examples against its schemas, and
// live answers against the response schemas.
//
//go:embed openapi.json
var OpenAPI string

// OpenAPIPath is where the server serves OpenAPI.
const OpenAPIPath = Version + "/openapi.json"
