// The runtime's Web Crypto, for idempotency keys (random bytes) and the
// lease ids they name (SHA-256): no dependency, and nothing but what Node
// 18+, Deno, Bun and browsers have.

/** What the client needs of Web Crypto. */
export interface WebCrypto {
  getRandomValues(array: Uint8Array): Uint8Array;
  /** Absent in a browser page that is not a secure context (plain http://). */
  readonly subtle?: { digest(algorithm: "SHA-256", data: Uint8Array): Promise<ArrayBuffer> } | undefined;
}

let nodeCrypto: Promise<WebCrypto> | undefined;

/** The runtime's Web Crypto: global in browsers, Deno, Bun and Node 19+; Node 18's from node:crypto. */
export function webCrypto(): Promise<WebCrypto> {
  const c = (globalThis as { crypto?: WebCrypto }).crypto;
  if (typeof c?.getRandomValues === "function") {
    return Promise.resolve(c);
  }
  const mod = "node:crypto"; // not a literal: bundlers for browsers, which have the global, leave it alone
  nodeCrypto ??= (import(mod) as Promise<{ webcrypto: WebCrypto }>).then((m) => m.webcrypto);
  return nodeCrypto;
}

/** Bytes as lowercase hexadecimal. */
export function hex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}
