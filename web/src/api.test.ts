/** Unit tests of the API client: the job flow, its fallback to /generate_ir, cancel, error shapes. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { CANCEL, asResult, generateWithProgress, type Progress } from "./api";

type Handler = (url: string, init: RequestInit) => { status?: number; body: unknown };

function serve(handler: Handler) {
  const calls: { url: string; method: string }[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      calls.push({ url, method: init.method ?? "GET" });
      const { status = 200, body } = handler(url, init);
      return new Response(typeof body === "string" ? body : JSON.stringify(body), { status });
    }),
  );
  return calls;
}

afterEach(() => vi.unstubAllGlobals());

const REQUEST = { code: "x", ir_type: "torch_mlir" };

describe("generateWithProgress", () => {
  it("submits a job and polls until it is done", async () => {
    let polls = 0;
    serve((url) => {
      if (url === "/jobs") return { body: { status: "ok", job_id: "j1" } };
      polls++;
      return polls < 3
        ? { body: { status: "ok", job_id: "j1", state: "running", result: null } }
        : { body: { status: "ok", job_id: "j1", state: "done", result: { status: "ok", output: "IR" } } };
    });
    const seen: Progress[] = [];
    const result = await generateWithProgress(REQUEST, (p) => seen.push(p), new AbortController().signal);
    expect(result).toEqual({ status: "ok", output: "IR" });
    expect(seen.some((p) => p.state === "running" && p.jobId === "j1")).toBe(true);
  });

  it("gives a failed job's error", async () => {
    serve((url) =>
      url === "/jobs"
        ? { body: { status: "ok", job_id: "j2" } }
        : {
            body: {
              status: "ok",
              state: "failed",
              result: { status: "error", message: "bad", detail: "trace" },
            },
          },
    );
    const result = await generateWithProgress(REQUEST, () => {}, new AbortController().signal);
    expect(result).toEqual({ status: "error", message: "bad", detail: "trace" });
  });

  it("falls back to /generate_ir without a job API", async () => {
    const calls = serve((url) =>
      url === "/jobs" ? { status: 404, body: { detail: "Not Found" } } : { body: { status: "ok", output: "sync" } },
    );
    const result = await generateWithProgress(REQUEST, () => {}, new AbortController().signal);
    expect(result).toEqual({ status: "ok", output: "sync" });
    expect(calls.map((c) => c.url)).toEqual(["/jobs", "/generate_ir"]);
  });

  it("cancels the job on the server when aborted", async () => {
    const controller = new AbortController();
    const calls = serve((url) => {
      if (url === "/jobs") return { body: { status: "ok", job_id: "j3" } };
      if (url.startsWith("/status/")) {
        controller.abort(CANCEL);
        return { body: { status: "ok", state: "running", result: null } };
      }
      return { body: { status: "ok", state: "cancelled" } };
    });
    const result = await generateWithProgress(REQUEST, () => {}, controller.signal);
    expect(result.status).toBe("error");
    expect(result.status === "error" && result.message).toBe("Cancelled");
    expect(calls).toContainEqual({ url: "/jobs/j3/cancel", method: "POST" });
  });

  it("is cancelled when aborted during a request", async () => {
    const controller = new AbortController();
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string) => {
        if (url === "/jobs") return new Response(JSON.stringify({ status: "ok", job_id: "j5" }));
        if (url.startsWith("/status/")) {
          controller.abort(CANCEL);
          throw CANCEL; // what fetch rejects with when its signal is aborted with a reason
        }
        return new Response("{}");
      }),
    );
    const result = await generateWithProgress(REQUEST, () => {}, controller.signal);
    expect(result.status === "error" && result.message).toBe("Cancelled");
  });

  it("only stops waiting when replaced by a newer compile", async () => {
    const controller = new AbortController();
    const calls = serve((url) => {
      if (url === "/jobs") return { body: { status: "ok", job_id: "j4" } };
      controller.abort("superseded");
      return { body: { status: "ok", state: "running", result: null } };
    });
    await generateWithProgress(REQUEST, () => {}, controller.signal);
    expect(calls.some((c) => c.url.startsWith("/jobs/j4"))).toBe(false);
  });

  it("reports an unreachable server", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => Promise.reject(new TypeError("Failed to fetch"))));
    const result = await generateWithProgress(REQUEST, () => {}, new AbortController().signal);
    expect(result).toEqual({
      status: "error",
      message: "Cannot reach the explorer server",
      detail: "TypeError: Failed to fetch",
    });
  });
});

describe("asResult", () => {
  it("reads the guide's shapes and anything else as an error", () => {
    expect(asResult({ status: "ok", output: "a" })).toEqual({ status: "ok", output: "a" });
    expect(asResult({ status: "error", message: "m" })).toEqual({
      status: "error",
      message: "m",
      detail: "",
    });
    expect(asResult("<html>", 502).status).toBe("error");
  });
});
