// One call to the server: bounded in time (the call's timeout, and the
// caller's AbortSignal) and in size (1 MiB of answer), with every failure
// turned into a TollgateError.

import { BadResponseError, ServerUnreachableError, ValidationError, errorFromResponse } from "./errors.js";

/** The most of an answer's body the client reads. */
export const maxResponseBytes = 1 << 20;

/** How many times, at most, a call that may be repeated is sent when no answer comes back (as the Go client's). */
export const maxAttempts = 3;

/** The pauses before the second and the third send, in ms. */
const retryBackoffMs = [50, 200] as const;

/** Names the author of changes in audit events when the server has no API keys. */
export const principalHeader = "X-Tollgate-Principal";

/** The longest principal the server records, in bytes (UTF-8). */
export const maxPrincipalBytes = 256;

/**
 * A principal as a header value: its UTF-8 bytes, one character each (fetch
 * sends a header's characters as Latin-1 bytes, and refuses others), so
 * that the server reads the UTF-8 the Go client sends.
 */
export function principalValue(principal: string): string {
  return String.fromCharCode(...new TextEncoder().encode(principal));
}

/**
 * Checks a call's own principal (at most `maxPrincipalBytes` bytes of
 * UTF-8, no control characters) and returns it as a header value.
 */
function checkPrincipal(principal: string): string {
  if (typeof principal !== "string") {
    throw new ValidationError("invalid principal: want a string, or leave it out for the client's", "principal", String(principal).slice(0, 80));
  }
  const bytes = new TextEncoder().encode(principal).length;
  if (bytes > maxPrincipalBytes) {
    throw new ValidationError(`invalid principal: longer than ${maxPrincipalBytes} bytes`, "principal", principal.slice(0, 80));
  }
  if (/[\x00-\x1f\x7f]/.test(principal)) {
    throw new ValidationError("invalid principal: no control characters", "principal", JSON.stringify(principal).slice(0, 80));
  }
  return principalValue(principal);
}

/** What a Client sends every request with. */
export interface Transport {
  /** Absolute http(s) URL without a trailing slash. */
  baseUrl: string;
  headers: Record<string, string>;
  timeoutMs: number;
  fetch: typeof fetch;
}

export interface ApiRequest {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Below the base URL, segments already escaped (see `seg`). */
  path: string;
  query?: URLSearchParams | undefined;
  /** Sent as JSON unless undefined. */
  body?: unknown;
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
  /** Sent besides the client's own headers. */
  headers?: Record<string, string> | undefined;
  /** Unless empty, replaces the client's `X-Tollgate-Principal` for this call (checked first: a ValidationError). */
  principal?: string | undefined;
  /**
   * Whether the call may be sent again when no answer came back (see
   * `send`); default: for a GET. An acquire with an idempotency key, a
   * lease's commit, rollback, extend and penalize set it; an adjust, which
   * adds up, does not.
   */
  retry?: boolean | undefined;
}

export interface ApiAnswer {
  status: number;
  /** The decoded JSON body; undefined for 204 or an empty body. */
  data: unknown;
  headers: Headers;
}

/** Escapes one path segment (resources and reservation ids may contain `/`). */
export function seg(s: string): string {
  return encodeURIComponent(s);
}

/**
 * Links the caller's signal and the call's timeout into one signal. The
 * timer is cleared by `done`, so that no call leaves one behind.
 */
function deadline(user: AbortSignal | undefined, timeoutMs: number): { signal: AbortSignal; timedOut: () => boolean; done: () => void } {
  const ctrl = new AbortController();
  let timedOut = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const onAbort = (): void => ctrl.abort(user?.reason);
  if (user !== undefined) {
    if (user.aborted) {
      ctrl.abort(user.reason);
    } else {
      user.addEventListener("abort", onAbort, { once: true });
    }
  }
  if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
    timer = setTimeout(() => {
      timedOut = true;
      ctrl.abort(new DOMException(`timed out after ${timeoutMs} ms`, "TimeoutError"));
    }, timeoutMs);
  }
  return {
    signal: ctrl.signal,
    timedOut: () => timedOut,
    done: () => {
      if (timer !== undefined) {
        clearTimeout(timer);
      }
      user?.removeEventListener("abort", onAbort);
    },
  };
}

/** Describes a fetch failure: `fetch failed (connect ECONNREFUSED 127.0.0.1:1)`. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) {
    return String(err);
  }
  const cause = (err as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    return `${err.message} (${cause.message})`;
  }
  return err.message;
}

/** Reads at most maxResponseBytes of the body as text. */
async function readText(resp: Response, op: string): Promise<string> {
  if (resp.body === null) {
    return "";
  }
  const reader = resp.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      break;
    }
    size += value.byteLength;
    if (size > maxResponseBytes) {
      await reader.cancel().catch(() => undefined);
      throw new BadResponseError(`${op}: answer larger than ${maxResponseBytes} bytes`, { status: resp.status, op });
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

/** Sleeps ms, or rejects when signal aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Sends req and returns the answer of a 2xx status, or throws: the
 * TollgateError the answer describes, ServerUnreachableError when no
 * answer came in time, BadResponseError when it could not be read, or the
 * caller's signal's reason when it aborted.
 *
 * A call that may be repeated (`req.retry`, by default a GET) is sent
 * again when no answer came back whole (the connection was refused or
 * reset, or the answer broke off), up to `maxAttempts` sends in all,
 * pausing 50 ms and then 200 ms, all within the call's timeout and signal:
 * the server may have acted on it, and the caller makes the repeat harmless
 * (an idempotency key, an ending the server remembers).
 */
export async function send(t: Transport, req: ApiRequest): Promise<ApiAnswer> {
  const op = `${req.method} ${req.path}`;
  let url = t.baseUrl + req.path;
  const q = req.query?.toString();
  if (q) {
    url += `?${q}`;
  }
  const headers: Record<string, string> = { ...t.headers, ...req.headers };
  if (req.principal !== undefined && req.principal !== "") {
    headers[principalHeader] = checkPrincipal(req.principal);
  }
  let body: string | undefined;
  if (req.body !== undefined) {
    body = JSON.stringify(req.body);
    headers["Content-Type"] = "application/json";
  }
  const timeoutMs = req.timeoutMs ?? t.timeoutMs;
  const end = Date.now() + timeoutMs;
  const retry = req.retry ?? req.method === "GET";
  const dl = deadline(req.signal, timeoutMs);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        return await sendOnce(t, req, url, headers, body, dl, op, timeoutMs);
      } catch (err) {
        // Only a lost answer (not a timeout, not the caller's abort) is sent again.
        if (!retry || attempt >= maxAttempts || !(err instanceof ServerUnreachableError) || err.timedOut) {
          throw err;
        }
        const ms = retryBackoffMs[attempt - 1] ?? 0;
        if (Date.now() + ms >= end) {
          throw err;
        }
        try {
          await pause(ms, dl.signal);
        } catch {
          if (req.signal?.aborted) {
            throw req.signal.reason;
          }
          throw err;
        }
      }
    }
  } finally {
    dl.done();
  }
}

/** One send of req (see `send`). */
async function sendOnce(
  t: Transport,
  req: ApiRequest,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
  dl: { signal: AbortSignal; timedOut: () => boolean },
  op: string,
  timeoutMs: number,
): Promise<ApiAnswer> {
  let status: number;
  let text: string;
  let resp: Response;
  try {
    const init: RequestInit = { method: req.method, headers, signal: dl.signal };
    if (body !== undefined) {
      init.body = body;
    }
    resp = await t.fetch(url, init);
    status = resp.status;
    text = await readText(resp, op);
  } catch (err) {
    if (err instanceof BadResponseError) {
      throw err;
    }
    if (req.signal?.aborted) {
      throw req.signal.reason;
    }
    if (dl.timedOut()) {
      throw new ServerUnreachableError(`server unreachable: ${op}: no answer within ${timeoutMs} ms`, true, { op, cause: err });
    }
    throw new ServerUnreachableError(`server unreachable: ${op} ${t.baseUrl}: ${describe(err)}`, false, { op, cause: err });
  }
  if (status < 200 || status > 299) {
    throw errorFromResponse(status, resp.headers, text, op);
  }
  if (status === 204 || text.trim() === "") {
    return { status, data: undefined, headers: resp.headers };
  }
  try {
    return { status, data: JSON.parse(text) as unknown, headers: resp.headers };
  } catch (err) {
    throw new BadResponseError(`${op}: answer is not JSON: ${text.slice(0, 100)}`, { status, op, cause: err });
  }
}
