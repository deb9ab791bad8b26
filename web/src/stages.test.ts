/** Unit tests of the stage splitter on the guide's delimiters. */
import { describe, expect, it } from "vitest";
import { hasStages, splitStages } from "./stages";

describe("splitStages", () => {
  it("splits on both delimiters", () => {
    const out = [
      "===== Initial IR =====",
      "module {}",
      "",
      "===== IR after mlir-opt --canonicalize =====",
      "module {",
      "}",
      "",
      "===== IR after mlir-opt --cse =====",
      "module {}",
    ].join("\n");
    const stages = splitStages(out);
    expect(stages.map((s) => s.title)).toEqual([
      "Initial IR",
      "mlir-opt --canonicalize",
      "mlir-opt --cse",
    ]);
    expect(stages[1]!.text).toBe("module {\n}");
    expect(hasStages(out)).toBe(true);
  });
  it("keeps an output without delimiters whole", () => {
    expect(splitStages("abc\n")).toEqual([{ title: "Output", text: "abc\n" }]);
    expect(hasStages("abc")).toBe(false);
  });
  it("ignores delimiters that are not a whole line", () => {
    expect(splitStages("x ===== Initial IR =====").length).toBe(1);
  });
});
