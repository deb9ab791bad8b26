/** Unit tests of reading the server's GET /ir_types listing, and of the guide's fallback list. */
import { describe, expect, it } from "vitest";
import {
  defaultIrType,
  findIrType,
  guideCatalog,
  irTypesFor,
  parseCatalog,
  resolveTarget,
  targetsFor,
} from "./catalog";

const TRITON_ANY = { field: "triton_target", default: "sm_90", backends: ["cuda", "hip"] };

const LISTING = {
  status: "ok",
  ir_types: [
    {
      name: "torch_mlir",
      family: "pytorch",
      description: "Torch dialect",
      label: "Torch MLIR",
      syntax: "mlir",
      languages: ["pytorch"],
      default_for: ["pytorch"],
      target: null,
    },
    {
      name: "triton_ir",
      family: "triton",
      description: "ttir",
      label: "Triton IR (ttir)",
      syntax: "mlir",
      languages: ["triton"],
      default_for: ["triton"],
      target: TRITON_ANY,
    },
    {
      name: "triton_nvptx",
      family: "triton",
      description: "ptx",
      label: "Triton PTX",
      syntax: "ptx",
      languages: ["triton"],
      default_for: [],
      target: { field: "triton_target", default: "sm_90", backends: ["cuda"] },
    },
    {
      name: "raw_ir",
      family: "raw",
      description: "echo",
      label: "Raw IR",
      syntax: "text",
      languages: ["raw_ir", "pytorch", "triton"],
      default_for: ["raw_ir"],
      target: null,
    },
    { name: "new_thing", family: "triton", description: "later", syntax: "klingon" },
  ],
  tools: [
    { alias: "mlir-opt", field: "mlir_opt", command: ["/usr/bin/mlir-opt-22"], note: "" },
    { alias: "opt", field: "llvm_opt", command: ["/usr/bin/opt-22"], note: "" },
    { alias: "user-tool", field: "user_tool", command: null, note: "" },
  ],
  languages: ["pytorch", "triton", "raw_ir"],
  targets: [
    { name: "sm_80", backend: "cuda", triton_target: "cuda:80", cuda_target: "sm_80", device: "A100" },
    { name: "sm_90", backend: "cuda", triton_target: "cuda:90", cuda_target: "sm_90", device: "H100" },
    { name: "gfx942", backend: "hip", triton_target: "hip:gfx942", cuda_target: null, device: "MI300X" },
  ],
};

describe("parseCatalog", () => {
  it("reads the server's facts about each IR type", () => {
    const catalog = parseCatalog(LISTING)!;
    expect(catalog.source).toBe("server");
    expect(catalog.tools).toEqual(["mlir_opt", "llvm_opt", "user_tool"]);
    expect(catalog.missingTools).toEqual(["user_tool"]);
    const ptx = findIrType(catalog, "triton_nvptx");
    expect([ptx.label, ptx.syntax, ptx.group]).toEqual(["Triton PTX", "ptx", "triton"]);
    expect(ptx.target).toEqual({ field: "triton_target", default: "sm_90", backends: ["cuda"] });
    // What the listing leaves out is plain: the name as label, no highlighting, no target.
    const later = findIrType(catalog, "new_thing");
    expect([later.label, later.syntax, later.target, later.languages]).toEqual([
      "new_thing",
      "text",
      null,
      ["triton"],
    ]);
  });
  it("offers the types that serve the source's language", () => {
    const catalog = parseCatalog(LISTING)!;
    expect(irTypesFor(catalog, "pytorch").map((t) => t.value)).toEqual(["torch_mlir", "raw_ir"]);
    expect(irTypesFor(catalog, "triton").map((t) => t.value)).toEqual([
      "triton_ir",
      "triton_nvptx",
      "raw_ir",
      "new_thing",
    ]);
    expect(irTypesFor(catalog, "raw_ir").map((t) => t.value)).toEqual(["raw_ir"]);
  });
  it("takes each language's default from the server", () => {
    const catalog = parseCatalog(LISTING)!;
    expect(defaultIrType(catalog, "pytorch")).toBe("torch_mlir");
    expect(defaultIrType(catalog, "triton")).toBe("triton_ir");
    expect(defaultIrType(catalog, "raw_ir")).toBe("raw_ir");
  });
  it("offers the targets of the backends an IR type takes", () => {
    const catalog = parseCatalog(LISTING)!;
    const names = (ir: string) => targetsFor(catalog, findIrType(catalog, ir)).map((t) => t.name);
    expect(names("triton_ir")).toEqual(["sm_80", "sm_90", "gfx942"]);
    expect(names("triton_nvptx")).toEqual(["sm_80", "sm_90"]);
    expect(names("torch_mlir")).toEqual([]);
  });
  it("reads a saved target in any spelling the server lists", () => {
    const catalog = parseCatalog(LISTING)!;
    const ttir = findIrType(catalog, "triton_ir");
    expect(resolveTarget(catalog, ttir, "cuda:80")).toBe("sm_80");
    expect(resolveTarget(catalog, ttir, "hip:gfx942")).toBe("gfx942");
    expect(resolveTarget(catalog, ttir, "sm_90")).toBe("sm_90");
    expect(resolveTarget(catalog, findIrType(catalog, "triton_nvptx"), "gfx942")).toBeUndefined();
    expect(resolveTarget(catalog, ttir, "cuda:100")).toBeUndefined();
    expect(resolveTarget(catalog, ttir, undefined)).toBeUndefined();
  });
  it("rejects what is not a listing", () => {
    expect(parseCatalog("x")).toBeNull();
    expect(parseCatalog({ ir_types: [] })).toBeNull();
    expect(parseCatalog({ detail: "Not Found" })).toBeNull();
  });
});

describe("guideCatalog", () => {
  it("holds the guide's names and nothing the server knows better", () => {
    const catalog = guideCatalog();
    expect(catalog.source).toBe("guide");
    expect(catalog.irTypes.length).toBe(16);
    expect(catalog.targets).toEqual([]);
    expect(catalog.irTypes.every((t) => t.label === t.value && t.syntax === "text" && !t.target)).toBe(
      true,
    );
    expect(defaultIrType(catalog, "pytorch")).toBe("torch_mlir");
    expect(defaultIrType(catalog, "triton")).toBe("triton_ir");
    expect(irTypesFor(catalog, "raw_ir").map((t) => t.value)).toEqual(["raw_ir"]);
  });
});
