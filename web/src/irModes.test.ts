/** Unit tests of guessing the syntax of IR text. */
import { describe, expect, it } from "vitest";
import { guessSyntax } from "./irModes";

describe("guessSyntax", () => {
  it("recognizes each kind of IR", () => {
    expect(guessSyntax("//\n.version 7.8\n.target sm_90\n")).toBe("ptx");
    expect(guessSyntax('\t.amdgcn_target "amdgcn-amd-amdhsa--gfx942"\n')).toBe("asm");
    expect(guessSyntax("\tOpCapability Kernel\n")).toBe("asm");
    expect(guessSyntax("; ModuleID = 'x'\ndefine i32 @f() {\n")).toBe("llvm");
    expect(guessSyntax("#map = affine_map<(d0) -> (d0)>\nmodule {\n")).toBe("mlir");
    expect(guessSyntax("  %0 = arith.addf %a, %b : f32\n")).toBe("mlir");
    expect(guessSyntax("graph(%self : Foo):\n")).toBeNull();
  });
});
