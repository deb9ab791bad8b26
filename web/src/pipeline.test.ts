/** Unit tests of the pipeline model: fixed tool order, `&&` chains, moves within a tool. */
import { describe, expect, it } from "vitest";
import { addStep, canMove, fromRequestFields, moveStep, toRequestFields } from "./pipeline";

describe("pipeline", () => {
  it("orders steps by the guide's tool order and chains with &&", () => {
    let steps = addStep([], { tool: "llc", flags: "-O2" });
    steps = addStep(steps, { tool: "mlir_opt", flags: "--canonicalize" });
    steps = addStep(steps, { tool: "mlir_opt", flags: "--cse" });
    expect(steps.map((s) => s.tool)).toEqual(["mlir_opt", "mlir_opt", "llc"]);
    expect(toRequestFields(steps)).toEqual({ mlir_opt: "--canonicalize && --cse", llc: "-O2" });
  });
  it("moves a step only among its own tool's steps", () => {
    const steps = [
      { tool: "mlir_opt" as const, flags: "a" },
      { tool: "mlir_opt" as const, flags: "b" },
      { tool: "llc" as const, flags: "c" },
    ];
    expect(canMove(steps, 1, 1)).toBe(false);
    expect(canMove(steps, 1, -1)).toBe(true);
    expect(moveStep(steps, 1, -1).map((s) => s.flags)).toEqual(["b", "a", "c"]);
  });
  it("reads request fields back", () => {
    expect(fromRequestFields({ mlir_opt: "--a && --b", llc: "" })).toEqual([
      { tool: "mlir_opt", flags: "--a" },
      { tool: "mlir_opt", flags: "--b" },
    ]);
  });
});
