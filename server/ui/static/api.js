// The dashboard's reads of the Tollgate HTTP API (GET only: the dashboard
// writes nothing). The key lives in this tab's session storage and goes out
// as "Authorization: Bearer"; the namespace, when one is picked, as
// X-Tollgate-Namespace.

const keyItem = "tollgate.dashboard.key";

/** An answer of the API other than 2xx. */
export class APIError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error;
  }
}

export const session = {
  key: sessionStorage.getItem(keyItem) || "",
  namespace: "",
  setKey(k) {
    this.key = k;
    if (k) sessionStorage.setItem(keyItem, k);
    else sessionStorage.removeItem(keyItem);
  },
};

/** get reads path (with query params) and returns its JSON. */
export async function get(path, params) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    for (const one of [].concat(v)) {
      if (one !== undefined && one !== null && one !== "") url.searchParams.append(k, one);
    }
  }
  const headers = { Accept: "application/json" };
  if (session.key) headers.Authorization = "Bearer " + session.key;
  if (session.namespace) headers["X-Tollgate-Namespace"] = session.namespace;
  const resp = await fetch(url, { method: "GET", headers, cache: "no-store", credentials: "omit" });
  let body = null;
  try {
    body = await resp.json();
  } catch {
    body = null;
  }
  if (!resp.ok) throw new APIError(resp.status, body);
  return body;
}

/** getAll follows a listing's "next" for up to pages pages. */
export async function getAll(path, params, field, pages = 10) {
  const out = [];
  let after = "";
  for (let i = 0; i < pages; i++) {
    const page = await get(path, { ...params, after });
    out.push(...(page[field] || []));
    if (!page.next) break;
    after = page.next;
  }
  return out;
}

/** seg escapes one path segment. */
export const seg = encodeURIComponent;
