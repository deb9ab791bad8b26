/** Unit tests of the page state validation used for permalinks. */
import { describe, expect, it } from "vitest";
import { parseState } from "./state";

describe("parseState", () => {
  it("accepts a full state and orders pipeline steps", () => {
    const state = parseState({
      version: 1,
      language: "pytorch",
      code: "x",
      panes: [
        {
          irType: "torch_mlir",
          steps: [
            { tool: "llc", flags: "-O2" },
            { tool: "mlir_opt", flags: "--cse" },
          ],
          dumpAfterEach: true,
          target: "cuda:80",
        },
      ],
    });
    expect(typeof state).toBe("object");
    if (typeof state === "string") return;
    expect(state.panes[0]!.steps.map((s) => s.tool)).toEqual(["mlir_opt", "llc"]);
    expect(state.panes[0]!.target).toBe("cuda:80");
  });
  it("names what is wrong", () => {
    expect(parseState(null)).toBe("state is not an object");
    expect(parseState({ language: "cobol", code: "", panes: [] })).toContain("unknown language");
    expect(
      parseState({ language: "raw_ir", code: "", panes: [{ irType: "raw_ir", steps: [{ tool: "rm" }] }] }),
    ).toContain("unknown tool");
  });
});
