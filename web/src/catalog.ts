/**
 * The IR types, tools, languages and GPU targets a pane can ask for, as the server's GET /ir_types
 * lists them: the server is the one place that knows each IR type's label, highlighting, languages,
 * default and target. The page keeps no copy of those facts; see `guideCatalog` for the one
 * fallback.
 */
import { TOOL_ORDER, isToolField, type ToolField } from "./pipeline";

export type Language = "pytorch" | "triton" | "raw_ir";
/** Highlighting of an output: see irModes.ts and the editor's Python/C++ modes. */
export type Syntax = "mlir" | "llvm" | "ptx" | "asm" | "python" | "cpp" | "text";

const SYNTAXES: readonly string[] = ["mlir", "llvm", "ptx", "asm", "python", "cpp", "text"];

/** The GPU target an IR type takes: which backends fit it, and what it compiles for without one. */
export interface TargetChoice {
  /** The request field of the guide's era that names it (the page sends `target`). */
  field: string;
  default: string;
  backends: string[];
}

/** A GPU target the server knows; the page sends its name as `target`. */
export interface GpuTarget {
  name: string;
  backend: string;
  device: string;
  /** Other spellings of the same target (the `triton_target` / `cuda_target` values). */
  aliases: string[];
}

export interface IrType {
  value: string;
  label: string;
  /** The guide's group: pytorch, triton or raw. */
  group: string;
  syntax: Syntax;
  description?: string;
  /** The input languages it serves. */
  languages: string[];
  /** The languages for which a new pane shows it. */
  defaultFor: string[];
  target: TargetChoice | null;
}

export interface Catalog {
  irTypes: IrType[];
  tools: ToolField[];
  /** Tools the server lists without a command: not installed there. */
  missingTools: ToolField[];
  languages: string[];
  targets: GpuTarget[];
  /** Where the catalog came from, shown in the footer. */
  source: "server" | "guide";
}

/** The IR types a pane may pick for an input language. */
export function irTypesFor(catalog: Catalog, language: Language): IrType[] {
  return catalog.irTypes.filter((t) => t.languages.includes(language));
}

export function findIrType(catalog: Catalog, value: string): IrType {
  return (
    catalog.irTypes.find((t) => t.value === value) ?? {
      value,
      label: value,
      group: "raw",
      syntax: "text",
      languages: [],
      defaultFor: [],
      target: null,
    }
  );
}

/** The IR type a new pane shows for a language: the server's default, else the first that fits. */
export function defaultIrType(catalog: Catalog, language: Language): string {
  const types = irTypesFor(catalog, language);
  return (types.find((t) => t.defaultFor.includes(language)) ?? types[0])?.value ?? "raw_ir";
}

/** The targets an IR type can be compiled for (none when it takes no target). */
export function targetsFor(catalog: Catalog, irType: IrType): GpuTarget[] {
  const choice = irType.target;
  return choice ? catalog.targets.filter((t) => choice.backends.includes(t.backend)) : [];
}

/**
 * The name of the target `value` spells among an IR type's targets, or undefined. Saved states
 * may hold another spelling of a target (`cuda:80` from the days of `triton_target`).
 */
export function resolveTarget(catalog: Catalog, irType: IrType, value: string | undefined) {
  if (value === undefined) return undefined;
  return targetsFor(catalog, irType).find((t) => t.name === value || t.aliases.includes(value))
    ?.name;
}

/** Reads the server's GET /ir_types listing; null when the body is not one. */
export function parseCatalog(body: unknown): Catalog | null {
  if (!isRecord(body) || !Array.isArray(body["ir_types"])) return null;
  const languages = strings(body["languages"]);
  const irTypes = body["ir_types"]
    .map((item) => parseIrType(item, languages))
    .filter((t): t is IrType => t !== null);
  if (irTypes.length === 0) return null;
  const rawTools = Array.isArray(body["tools"]) ? (body["tools"] as unknown[]) : null;
  const tools = rawTools ? rawTools.map(toolField).filter(isToolField) : [];
  const missingTools = (rawTools ?? [])
    .filter((t) => isRecord(t) && "command" in t && !t["command"])
    .map(toolField)
    .filter(isToolField);
  const targets = (Array.isArray(body["targets"]) ? (body["targets"] as unknown[]) : [])
    .map(parseTarget)
    .filter((t): t is GpuTarget => t !== null);
  return {
    irTypes,
    tools: tools.length ? tools : [...TOOL_ORDER],
    missingTools,
    languages,
    targets,
    source: "server",
  };
}

function parseIrType(item: unknown, languages: string[]): IrType | null {
  if (!isRecord(item) || typeof item["name"] !== "string") return null;
  const value = item["name"];
  const group = typeof item["family"] === "string" ? item["family"] : "raw";
  const syntax = item["syntax"];
  return {
    value,
    label: typeof item["label"] === "string" && item["label"] ? item["label"] : value,
    group,
    syntax: typeof syntax === "string" && SYNTAXES.includes(syntax) ? (syntax as Syntax) : "text",
    description: typeof item["description"] === "string" ? item["description"] : undefined,
    // A server older than the `languages` field: its groups map to languages as the guide's do.
    languages: Array.isArray(item["languages"])
      ? strings(item["languages"])
      : group === "raw"
        ? languages
        : [group],
    defaultFor: strings(item["default_for"]),
    target: parseChoice(item["target"]),
  };
}

function parseChoice(value: unknown): TargetChoice | null {
  if (!isRecord(value) || typeof value["field"] !== "string") return null;
  return {
    field: value["field"],
    default: typeof value["default"] === "string" ? value["default"] : "",
    backends: strings(value["backends"]),
  };
}

function parseTarget(value: unknown): GpuTarget | null {
  if (!isRecord(value) || typeof value["name"] !== "string") return null;
  return {
    name: value["name"],
    backend: typeof value["backend"] === "string" ? value["backend"] : "",
    device: typeof value["device"] === "string" ? value["device"] : "",
    aliases: strings([value["triton_target"], value["cuda_target"]]),
  };
}

function toolField(item: unknown): string | undefined {
  return isRecord(item) && typeof item["field"] === "string" ? item["field"] : undefined;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

/**
 * The integration guide's catalogue (§3), used only when the server does not list its IR types: a
 * backend that follows the guide need not have GET /ir_types (the page may talk to one through
 * `?backend=`), and without a list the page could not offer any IR type at all. These names are the
 * guide's fixed contract, the same for every compatible backend, so they cannot go stale the way a
 * copy of the server's facts would. It holds nothing else: no labels, no highlighting by type (the
 * output's highlighting is guessed from its text) and no GPU targets (the server's defaults apply).
 * The page says so in a banner while it uses this list.
 */
export function guideCatalog(): Catalog {
  const family = (group: string, languages: string[], names: string[]): IrType[] =>
    names.map((value) => ({
      value,
      label: value,
      group,
      syntax: "text",
      languages,
      defaultFor: [],
      target: null,
    }));
  return {
    irTypes: [
      // torch_mlir first: the guide's own examples ask for it, so a new pane shows it.
      ...family("pytorch", ["pytorch"], [
        "torch_mlir",
        "torch_script_graph_ir",
        "tosa_mlir",
        "linalg_on_tensors_mlir",
        "stablehlo_mlir",
        "llvm_mlir",
        "llvm_ir",
        "nvptx",
        "amdgpu",
        "spirv",
      ]),
      ...family("triton", ["triton"], [
        "triton_ir",
        "triton_gpu_ir",
        "triton_llvm_ir",
        "triton_nvptx",
        "triton_amdgpu",
      ]),
      ...family("raw", ["pytorch", "triton", "raw_ir"], ["raw_ir"]),
    ],
    tools: [...TOOL_ORDER],
    missingTools: [],
    languages: ["pytorch", "triton", "raw_ir"],
    targets: [],
    source: "guide",
  };
}
