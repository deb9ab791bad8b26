/** Unit tests of reading the server's GET /ir_types listing. */
import { describe, expect, it } from "vitest";
import { irTypesFor, parseCatalog } from "./catalog";

const LISTING = {
  status: "ok",
  ir_types: [
    { name: "torch_mlir", family: "pytorch", description: "Torch dialect" },
    { name: "triton_ir", family: "triton", description: "ttir" },
    { name: "raw_ir", family: "raw", description: "echo" },
    { name: "new_triton_thing", family: "triton", description: "later" },
  ],
  tools: [
    { alias: "mlir-opt", field: "mlir_opt", command: ["/usr/bin/mlir-opt-22"], note: "" },
    { alias: "opt", field: "llvm_opt", command: ["/usr/bin/opt-22"], note: "" },
    { alias: "user-tool", field: "user_tool", command: null, note: "" },
  ],
};

describe("parseCatalog", () => {
  it("reads the server's listing", () => {
    const catalog = parseCatalog(LISTING)!;
    expect(catalog.source).toBe("server");
    expect(catalog.tools).toEqual(["mlir_opt", "llvm_opt", "user_tool"]);
    expect(catalog.missingTools).toEqual(["user_tool"]);
    expect(catalog.irTypes.find((t) => t.value === "torch_mlir")!.syntax).toBe("mlir");
    expect(catalog.irTypes.find((t) => t.value === "new_triton_thing")!.group).toBe("triton");
  });
  it("offers the types of the source's language, raw_ir for all", () => {
    const catalog = parseCatalog(LISTING)!;
    expect(irTypesFor(catalog, "pytorch").map((t) => t.value)).toEqual(["torch_mlir", "raw_ir"]);
    expect(irTypesFor(catalog, "triton").map((t) => t.value)).toEqual([
      "triton_ir",
      "raw_ir",
      "new_triton_thing",
    ]);
    expect(irTypesFor(catalog, "raw_ir").map((t) => t.value)).toEqual(["raw_ir"]);
  });
  it("rejects what is not a listing", () => {
    expect(parseCatalog("x")).toBeNull();
    expect(parseCatalog({ ir_types: [] })).toBeNull();
  });
});
