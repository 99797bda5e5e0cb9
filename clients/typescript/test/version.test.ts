// The version is written once per language and agrees: package.json's (npm
// packs it), src/version.ts's (the User-Agent), and the Python client's
// tollgate/_version.py (both clients are released together).

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";

import { defaultUserAgent, version } from "../src/index.js";

// Compiled to dist/test-build/test/: the package's root is three up.
const root = new URL("../../../", import.meta.url);

test("package.json's version is the client's", async () => {
  const pkg = JSON.parse(await readFile(new URL("package.json", root), "utf8")) as { version: string };
  assert.equal(version, pkg.version);
  assert.match(version, /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/, "semantic versioning");
});

test("the User-Agent names the version", () => {
  assert.equal(defaultUserAgent, `tollgate-ts-client/${version}`);
});

test("the Python client has the same version", async () => {
  const py = await readFile(new URL("../python/tollgate/_version.py", root), "utf8");
  const m = /^__version__ = "([^"]+)"$/m.exec(py);
  assert.ok(m, "clients/python/tollgate/_version.py assigns no __version__");
  assert.equal(m[1], version);
});
