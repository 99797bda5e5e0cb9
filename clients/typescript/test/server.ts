// Starts a real `tollgate serve --store memory:` for the tests, on a free
// port, and stops it after. The binary comes from $TOLLGATE_BIN
// (scripts/test-typescript.sh builds it).

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { writeFile, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const startTimeoutMs = 15_000;

export function tollgateBin(): string {
  const bin = process.env["TOLLGATE_BIN"];
  if (!bin) {
    throw new Error("TOLLGATE_BIN is not set: run the tests with scripts/test-typescript.sh, which builds tollgate and sets it");
  }
  return bin;
}

/** A port nothing listens on now: listen on 0, read the port, close. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface RunningServer {
  url: string;
  stop(): Promise<void>;
}

// Servers left running when the test process ends (a failed before(), an
// interrupt) are killed with it.
const running = new Set<ChildProcess>();
function killAll(): void {
  for (const child of running) child.kill("SIGKILL");
}
process.on("exit", killAll);
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    killAll();
    process.kill(process.pid, sig);
  });
}

/**
 * Starts tollgate serve with extra flags and resolves once it logged that
 * it listens (so the port is ours, not another process's) and answers
 * GET /healthz. A port taken meanwhile is retried with another.
 */
export async function startServer(extraArgs: string[] = []): Promise<RunningServer> {
  let lastErr: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    try {
      return await startOn(port, extraArgs);
    } catch (err) {
      lastErr = err;
      if (!String(err).includes("address already in use")) {
        throw err;
      }
    }
  }
  throw lastErr;
}

async function startOn(port: number, extraArgs: string[]): Promise<RunningServer> {
  const addr = `127.0.0.1:${port}`;
  const child = spawn(tollgateBin(), ["serve", "--store", "memory:", "--addr", addr, "--log-level", "info", ...extraArgs], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  running.add(child);
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const listening = new Promise<void>((resolve, reject) => {
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      stderr += chunk;
      if (stderr.includes("msg=listening")) resolve();
    });
    void exited.then((code) => reject(new Error(`tollgate serve exited (${code}) before listening: ${stderr.trim()}`)));
    setTimeout(() => reject(new Error(`tollgate serve did not listen within ${startTimeoutMs} ms: ${stderr.trim()}`)), startTimeoutMs).unref();
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(t);
    }
    running.delete(child);
  };
  try {
    await listening;
    const url = `http://${addr}`;
    // Bounded polling: the log line comes just before the server answers.
    const until = Date.now() + startTimeoutMs;
    for (;;) {
      try {
        const r = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) });
        if (r.ok) break;
      } catch {
        // not yet
      }
      if (Date.now() > until) throw new Error(`tollgate serve on ${addr} did not answer /healthz within ${startTimeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return { url, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * A new API key and its keys-file line, from `tollgate keys new`. `entity`
 * confines the key to that entity and its descendants (the line's
 * `entity=ID`); `allowLimits` lets it send its own limits (the line's
 * `allow_limits`).
 */
export async function newKey(
  name: string,
  role: "acquire" | "read" | "admin",
  namespace: string,
  opts: { entity?: string; allowLimits?: boolean } = {},
): Promise<{ key: string; line: string }> {
  const args = ["keys", "new", "--name", name, "--role", role, "--namespace", namespace];
  if (opts.entity !== undefined) args.push("--entity", opts.entity);
  if (opts.allowLimits) args.push("--allow-limits");
  const { stdout, stderr } = await promisify(execFile)(tollgateBin(), args, {
    timeout: 10_000,
  });
  const key = /tg_[A-Za-z0-9_-]+/.exec(stderr)?.[0];
  if (!key) throw new Error(`no key in the output of tollgate keys new: ${stderr}`);
  return { key, line: stdout.trim() };
}

/** Writes lines to a keys file in a new temporary directory; `cleanup` removes it. */
export async function keysFile(lines: string[]): Promise<{ path: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "tollgate-ts-"));
  const path = join(dir, "keys.txt");
  await writeFile(path, lines.join("\n") + "\n");
  return { path, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** A name unique within the test run, for entities and ids. */
let counter = 0;
export function unique(prefix: string): string {
  counter++;
  return `${prefix}-${process.pid}-${counter}`;
}
