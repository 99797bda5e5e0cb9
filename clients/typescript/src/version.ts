// The client's version, as package.json's "version" (test/version.test.ts
// checks that they agree, and that the Python client's is the same:
// semantic versioning, both clients released together).

/** This client's version (semantic versioning), sent in its User-Agent. */
export const version = "0.1.0";
