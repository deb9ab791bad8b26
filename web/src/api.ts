/**
 * The explorer's HTTP API as the page uses it: the guide's /generate_ir, the job API for long
 * compilations (progress and cancel), the listing of IR types and tools, and permalinks.
 * Every failure comes back as a `Failure` in the guide's shape, never as an exception.
 */
import { parseCatalog, type Catalog } from "./catalog";

export interface Success {
  status: "ok";
  output: string;
}

export interface Failure {
  status: "error";
  message: string;
  detail: string;
}

export type Result = Success | Failure;

/** The request body of /generate_ir (extra fields are ignored by the server). */
export type GenerateRequest = Record<string, unknown> & { code: string; ir_type: string };

/** What a running compilation reports while it waits. */
export interface Progress {
  state: string;
  elapsedMs: number;
  jobId?: string;
  detail?: string;
}

/** The server's address: the page's own origin unless `?backend=` names another. */
export function backendUrl(): string {
  if (typeof window === "undefined") return "";
  const param = new URLSearchParams(window.location.search).get("backend");
  return (param ?? "").replace(/\/$/, "");
}

function failure(message: string, detail = ""): Failure {
  return { status: "error", message, detail };
}

async function requestJson(
  path: string,
  init: RequestInit = {},
): Promise<{ ok: boolean; httpStatus: number; body: unknown }> {
  const response = await fetch(backendUrl() + path, {
    ...init,
    headers: { "Content-Type": "application/json", ...(init.headers ?? {}) },
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Keep the text: a proxy's HTML error page is still worth showing as detail.
  }
  return { ok: response.ok, httpStatus: response.status, body };
}

/** Reads a guide-shaped result out of any body; anything else is an error with the body as detail. */
export function asResult(body: unknown, httpStatus = 200): Result {
  if (typeof body === "object" && body !== null) {
    const r = body as Record<string, unknown>;
    if (r["status"] === "ok" && typeof r["output"] === "string") {
      return { status: "ok", output: r["output"] };
    }
    if (r["status"] === "error") {
      return failure(String(r["message"] ?? "Error"), stringify(r["detail"]));
    }
    if (r["detail"] !== undefined) {
      return failure(`HTTP ${httpStatus}`, stringify(r["detail"]));
    }
  }
  return failure(`Unexpected answer from the server (HTTP ${httpStatus})`, stringify(body));
}

function stringify(value: unknown): string {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

/** POST /generate_ir, synchronously. */
export async function generateIr(req: GenerateRequest, signal?: AbortSignal): Promise<Result> {
  try {
    const r = await requestJson("/generate_ir", {
      method: "POST",
      body: JSON.stringify(req),
      signal,
    });
    return asResult(r.body, r.httpStatus);
  } catch (err) {
    return networkFailure(err, signal);
  }
}

/** A failed fetch: cancelled when its signal was aborted (fetch rejects with the abort reason). */
function networkFailure(err: unknown, signal?: AbortSignal): Failure {
  if (signal?.aborted || (err instanceof DOMException && err.name === "AbortError")) {
    return failure("Cancelled");
  }
  return failure("Cannot reach the explorer server", String(err));
}

/** Fields of a job answer, whatever the exact names the server uses. */
function jobId(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const r = body as Record<string, unknown>;
  const id = r["job_id"] ?? r["jobid"] ?? r["id"];
  return typeof id === "string" || typeof id === "number" ? String(id) : undefined;
}

function jobState(body: unknown): string {
  if (typeof body !== "object" || body === null) return "unknown";
  const r = body as Record<string, unknown>;
  return String(r["state"] ?? r["job_status"] ?? r["status"] ?? "unknown");
}

const FINISHED = new Set(["done", "finished", "complete", "completed", "succeeded", "success"]);
const FAILED = new Set(["failed", "cancelled", "canceled", "expired", "timeout", "timed_out"]);

function jobResult(body: unknown): Result | null {
  if (typeof body !== "object" || body === null) return null;
  const r = body as Record<string, unknown>;
  const state = jobState(body).toLowerCase();
  const inner = r["result"];
  if (inner !== undefined && inner !== null) return asResult(inner);
  if (FINISHED.has(state) || FAILED.has(state) || state === "ok" || state === "error") {
    if (typeof r["output"] === "string") return { status: "ok", output: r["output"] };
    if (r["message"] !== undefined) {
      return failure(String(r["message"]), stringify(r["detail"]));
    }
    if (FAILED.has(state)) return failure(state === "canceled" ? "Cancelled" : capital(state));
  }
  return null;
}

function capital(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/**
 * Compiles through the job API (POST /jobs, polling GET /status/<id>), reporting progress; falls
 * back to the synchronous /generate_ir when the server has no job API. Aborting `signal` with the
 * reason CANCEL also cancels the job on the server; any other reason (a newer compile replacing
 * this one) only stops waiting, so the server's worker finishes and stays warm.
 */
export async function generateWithProgress(
  req: GenerateRequest,
  onProgress: (p: Progress) => void,
  signal: AbortSignal,
): Promise<Result> {
  const started = performance.now();
  const elapsed = () => performance.now() - started;
  let id: string | undefined;
  try {
    onProgress({ state: "submitting", elapsedMs: 0 });
    const submitted = await requestJson("/jobs", {
      method: "POST",
      body: JSON.stringify(req),
      signal,
    });
    id = jobId(submitted.body);
    if (!submitted.ok || id === undefined) {
      if ([404, 405, 501].includes(submitted.httpStatus)) return await syncFallback();
      const early = jobResult(submitted.body);
      return early ?? asResult(submitted.body, submitted.httpStatus);
    }
    // A cached result may come back with the submission itself.
    const immediate = jobResult(submitted.body);
    if (immediate) return immediate;
    let delay = 50;
    for (;;) {
      await sleep(delay, signal);
      delay = Math.min(delay * 1.5, 1000);
      const polled = await requestJson(`/status/${encodeURIComponent(id)}`, { signal });
      const result = jobResult(polled.body);
      if (result) return result;
      if (!polled.ok) return asResult(polled.body, polled.httpStatus);
      const body = polled.body as Record<string, unknown>;
      onProgress({
        state: jobState(polled.body),
        elapsedMs: elapsed(),
        jobId: id,
        detail: typeof body["progress"] === "string" ? body["progress"] : undefined,
      });
    }
  } catch (err) {
    if (signal.aborted && signal.reason === CANCEL && id !== undefined) await cancelJob(id);
    return networkFailure(err, signal);
  }

  async function syncFallback(): Promise<Result> {
    const timer = setInterval(
      () => onProgress({ state: "running", elapsedMs: elapsed() }),
      250,
    );
    try {
      return await generateIr(req, signal);
    } finally {
      clearInterval(timer);
    }
  }
}

/** The abort reason that cancels a job on the server (see generateWithProgress). */
export const CANCEL = "cancel";

/** Asks the server to cancel a job; the answer does not matter. */
export async function cancelJob(id: string): Promise<void> {
  const path = `/jobs/${encodeURIComponent(id)}`;
  try {
    const r = await fetch(backendUrl() + path + "/cancel", { method: "POST" });
    if (r.status === 404 || r.status === 405) {
      await fetch(backendUrl() + path, { method: "DELETE" });
    }
  } catch {
    // The server may be gone; the page has already stopped waiting.
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new DOMException("Aborted", "AbortError"));
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(new DOMException("Aborted", "AbortError"));
      },
      { once: true },
    );
  });
}

/** The server's listing of IR types, tools, languages and targets (GET /ir_types), or why not. */
export async function fetchCatalog(): Promise<Catalog | Failure> {
  try {
    const r = await requestJson("/ir_types");
    const catalog = r.ok ? parseCatalog(r.body) : null;
    if (catalog) return catalog;
    const failed = asResult(r.body, r.httpStatus);
    return failed.status === "error"
      ? failed
      : failure(`no IR type listing (HTTP ${r.httpStatus})`, stringify(r.body));
  } catch (err) {
    return networkFailure(err);
  }
}

export async function fetchVersion(): Promise<string> {
  try {
    const r = await requestJson("/version");
    return typeof r.body === "string" ? r.body : stringify(r.body);
  } catch {
    return "server unreachable";
  }
}

/** POST /free_ir_cache for code that is no longer shown. */
export async function freeIrCache(code: string): Promise<void> {
  try {
    await requestJson("/free_ir_cache", { method: "POST", body: JSON.stringify({ code }) });
  } catch {
    // Optional courtesy call.
  }
}

/** Saves a page state; returns its short id. */
export async function savePermalink(state: unknown): Promise<{ id: string } | Failure> {
  try {
    const r = await requestJson("/permalinks", {
      method: "POST",
      body: JSON.stringify({ state }),
    });
    const body = r.body as Record<string, unknown> | null;
    if (r.ok && body && typeof body["id"] === "string") return { id: body["id"] };
    return asResult(r.body, r.httpStatus) as Failure;
  } catch (err) {
    return networkFailure(err);
  }
}

/** Loads a saved page state. */
export async function loadPermalink(id: string): Promise<{ state: unknown } | Failure> {
  try {
    const r = await requestJson(`/permalinks/${encodeURIComponent(id)}`);
    const body = r.body as Record<string, unknown> | null;
    if (r.ok && body && body["state"] !== undefined) return { state: body["state"] };
    return asResult(r.body, r.httpStatus) as Failure;
  } catch (err) {
    return networkFailure(err);
  }
}
