/**
 * The IR types and tools a pane can ask for. The server's listing is the source of truth; the
 * guide's catalogue (plus mirai's own types) is the fallback when the listing cannot be read, and
 * supplies the group and the highlighting mode of every known type.
 */
import { TOOL_ORDER, isToolField, type ToolField } from "./pipeline";

export type Language = "pytorch" | "triton" | "raw_ir";
export type Group = "pytorch" | "triton" | "raw";
/** Highlighting of an output: see irModes.ts and the editor's Python/C++ modes. */
export type Syntax = "mlir" | "llvm" | "ptx" | "asm" | "python" | "cpp" | "text";

export interface IrType {
  value: string;
  label: string;
  group: Group;
  syntax: Syntax;
  description?: string;
}

export interface Catalog {
  irTypes: IrType[];
  tools: ToolField[];
  /** Tools the server lists without a command: not installed there. */
  missingTools: ToolField[];
  /** Where the catalog came from, shown in the footer. */
  source: "server" | "built-in";
}

const KNOWN: Record<string, Omit<IrType, "value">> = {
  torch_script_graph_ir: { label: "TorchScript graph", group: "pytorch", syntax: "mlir" },
  torch_mlir: { label: "Torch MLIR", group: "pytorch", syntax: "mlir" },
  tosa_mlir: { label: "TOSA MLIR", group: "pytorch", syntax: "mlir" },
  linalg_on_tensors_mlir: { label: "Linalg-on-tensors MLIR", group: "pytorch", syntax: "mlir" },
  stablehlo_mlir: { label: "StableHLO MLIR", group: "pytorch", syntax: "mlir" },
  llvm_mlir: { label: "LLVM dialect MLIR", group: "pytorch", syntax: "mlir" },
  llvm_ir: { label: "LLVM IR", group: "pytorch", syntax: "llvm" },
  nvptx: { label: "NVPTX", group: "pytorch", syntax: "ptx" },
  amdgpu: { label: "AMDGPU", group: "pytorch", syntax: "asm" },
  spirv: { label: "SPIR-V", group: "pytorch", syntax: "asm" },
  inductor_output_code: { label: "Inductor output code", group: "pytorch", syntax: "python" },
  mirai_tf_op: { label: "mirai TF op (C++)", group: "pytorch", syntax: "cpp" },
  triton_ir: { label: "Triton IR (ttir)", group: "triton", syntax: "mlir" },
  triton_gpu_ir: { label: "TritonGPU IR (ttgir)", group: "triton", syntax: "mlir" },
  triton_llvm_ir: { label: "Triton LLVM IR (llir)", group: "triton", syntax: "llvm" },
  triton_nvptx: { label: "Triton PTX", group: "triton", syntax: "ptx" },
  triton_amdgpu: { label: "Triton AMDGPU", group: "triton", syntax: "asm" },
  raw_ir: { label: "Raw IR", group: "raw", syntax: "text" },
};

export const BUILT_IN: Catalog = {
  irTypes: Object.entries(KNOWN).map(([value, info]) => ({ value, ...info })),
  tools: [...TOOL_ORDER],
  missingTools: [],
  source: "built-in",
};

/** A request field choosing the GPU target of an IR type, with the values the server knows. */
export interface TargetChoice {
  field: "triton_target" | "cuda_target";
  options: [value: string, label: string][];
}

const TRITON_TARGET: TargetChoice = {
  field: "triton_target",
  options: [
    ["cuda:80", "CUDA sm_80"],
    ["cuda:90", "CUDA sm_90"],
    ["cuda:100", "CUDA sm_100"],
    ["hip:gfx90a", "HIP gfx90a"],
    ["hip:gfx942", "HIP gfx942"],
  ],
};

const CUDA_TARGET: TargetChoice = {
  field: "cuda_target",
  options: [
    ["sm_80", "sm_80 (A100)"],
    ["sm_86", "sm_86"],
    ["sm_89", "sm_89"],
    ["sm_90", "sm_90 (H100)"],
  ],
};

/** The target choice of an IR type, if it has one (absent value: the server's default). */
export function targetFor(irType: IrType): TargetChoice | null {
  if (irType.group === "triton") return TRITON_TARGET;
  if (irType.value === "inductor_output_code" || irType.value === "mirai_tf_op") return CUDA_TARGET;
  return null;
}

/** The IR types a pane may pick for an input language; raw_ir fits every language. */
export function irTypesFor(catalog: Catalog, language: Language): IrType[] {
  const group: Group = language === "raw_ir" ? "raw" : language;
  return catalog.irTypes.filter((t) => t.group === group || t.group === "raw");
}

export function findIrType(catalog: Catalog, value: string): IrType {
  return (
    catalog.irTypes.find((t) => t.value === value) ?? {
      value,
      label: value,
      group: "raw",
      syntax: "text",
    }
  );
}

/** A sensible IR type for a language when a pane's type does not fit it. */
export function defaultIrType(language: Language): string {
  return { pytorch: "torch_mlir", triton: "triton_ir", raw_ir: "raw_ir" }[language];
}

/**
 * Reads the server's listing. Accepts a list of names or of objects (`value`/`name`/`id`/`ir_type`,
 * optional `group`, `label`, `description`), under `ir_types` and `tools` keys.
 */
export function parseCatalog(body: unknown): Catalog | null {
  if (typeof body !== "object" || body === null) return null;
  const record = body as Record<string, unknown>;
  const rawTypes = record["ir_types"];
  if (!Array.isArray(rawTypes) || rawTypes.length === 0) return null;
  const irTypes: IrType[] = [];
  for (const item of rawTypes) {
    const t = parseIrType(item);
    if (t) irTypes.push(t);
  }
  const tools = Array.isArray(record["tools"])
    ? (record["tools"] as unknown[]).map(toolName).filter(isToolField)
    : [...TOOL_ORDER];
  const missingTools = Array.isArray(record["tools"])
    ? (record["tools"] as unknown[])
        .filter((t) => typeof t === "object" && t !== null && "command" in t && !t.command)
        .map(toolName)
        .filter(isToolField)
    : [];
  return {
    irTypes,
    tools: tools.length ? tools : [...TOOL_ORDER],
    missingTools,
    source: "server",
  };
}

function parseIrType(item: unknown): IrType | null {
  if (typeof item === "string") return { value: item, ...(KNOWN[item] ?? guess(item, undefined)) };
  if (typeof item !== "object" || item === null) return null;
  const r = item as Record<string, unknown>;
  const value = [r["value"], r["ir_type"], r["name"], r["id"]].find((v) => typeof v === "string");
  if (typeof value !== "string") return null;
  const known = KNOWN[value] ?? guess(value, r["group"] ?? r["family"]);
  return {
    value,
    label: typeof r["label"] === "string" ? r["label"] : known.label,
    group: known.group,
    syntax: known.syntax,
    description: typeof r["description"] === "string" ? r["description"] : undefined,
  };
}

function guess(value: string, group: unknown): Omit<IrType, "value"> {
  const g = String(group ?? "").toLowerCase();
  const grp: Group = g.includes("triton") || value.startsWith("triton")
    ? "triton"
    : g.includes("raw")
      ? "raw"
      : "pytorch";
  const syntax: Syntax = value.includes("mlir") ? "mlir" : value.includes("llvm") ? "llvm" : "text";
  return { label: value, group: grp, syntax };
}

function toolName(item: unknown): string | undefined {
  if (typeof item === "string") return item.replace(/-/g, "_").replace(/^opt$/, "llvm_opt");
  if (typeof item === "object" && item !== null) {
    const r = item as Record<string, unknown>;
    const v = [r["field"], r["name"], r["value"], r["id"]].find((x) => typeof x === "string");
    return typeof v === "string" ? toolName(v) : undefined;
  }
  return undefined;
}
