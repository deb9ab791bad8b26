/**
 * Pass pipelines as the integration guide defines them: one request field per tool, the tools always
 * applied in a fixed order, and several invocations of one tool chained with `&&` inside its field.
 *
 * A pipeline is a list of steps; a step may only move among the steps of its own tool, because the
 * server applies the tools in the guide's order whatever the client sends.
 */

/** The request fields of the guide, in the order the server applies them. */
export const TOOL_ORDER = [
  "torch_mlir_opt",
  "mlir_opt",
  "mlir_translate",
  "llvm_opt",
  "llc",
  "triton_opt",
  "triton_llvm_opt",
  "user_tool",
] as const;

export type ToolField = (typeof TOOL_ORDER)[number];

/** One tool invocation: the request field it belongs to and its flags. */
export interface Step {
  tool: ToolField;
  flags: string;
}

/** What the user sees for each field: the alias used in the delimiters, and a starting flag. */
export const TOOL_INFO: Record<ToolField, { alias: string; example: string; hint: string }> = {
  torch_mlir_opt: {
    alias: "torch-mlir-opt",
    example: "--torch-backend-to-linalg-on-tensors-backend-pipeline",
    hint: "torch-mlir's own passes",
  },
  mlir_opt: { alias: "mlir-opt", example: "--canonicalize", hint: "upstream MLIR passes" },
  mlir_translate: {
    alias: "mlir-translate",
    example: "--mlir-to-llvmir",
    hint: "MLIR to LLVM IR",
  },
  llvm_opt: { alias: "opt", example: "-O2", hint: "LLVM optimizer (-S added by the server)" },
  llc: { alias: "llc", example: "-mtriple=nvptx64-nvidia-cuda -mcpu=sm_90", hint: "LLVM codegen" },
  triton_opt: {
    alias: "triton-opt",
    example: "--tritongpu-coalesce",
    hint: "Triton MLIR passes by their MLIR names",
  },
  triton_llvm_opt: { alias: "triton-llvm-opt", example: "-O3", hint: "Triton's LLVM passes" },
  user_tool: {
    alias: "user-tool",
    example: "cat",
    hint: "first word: an executable the server allows",
  },
};

export function isToolField(value: unknown): value is ToolField {
  return typeof value === "string" && (TOOL_ORDER as readonly string[]).includes(value);
}

function rank(tool: ToolField): number {
  return TOOL_ORDER.indexOf(tool);
}

/** Steps in the order the server runs them; steps of one tool keep their relative order. */
export function normalize(steps: readonly Step[]): Step[] {
  return steps
    .map((step, index) => ({ step, index }))
    .sort((a, b) => rank(a.step.tool) - rank(b.step.tool) || a.index - b.index)
    .map(({ step }) => step);
}

/** Adds a step after the last step of its tool (or where its tool belongs). */
export function addStep(steps: readonly Step[], step: Step): Step[] {
  return normalize([...normalize(steps), step]);
}

export function removeStep(steps: readonly Step[], index: number): Step[] {
  const out = normalize(steps);
  out.splice(index, 1);
  return out;
}

export function setFlags(steps: readonly Step[], index: number, flags: string): Step[] {
  return normalize(steps).map((s, i) => (i === index ? { ...s, flags } : s));
}

/** Whether the step at `index` can move by `delta` (it can only swap with a step of its tool). */
export function canMove(steps: readonly Step[], index: number, delta: -1 | 1): boolean {
  const ordered = normalize(steps);
  const other = ordered[index + delta];
  return other !== undefined && other.tool === ordered[index]?.tool;
}

export function moveStep(steps: readonly Step[], index: number, delta: -1 | 1): Step[] {
  const ordered = normalize(steps);
  if (!canMove(ordered, index, delta)) return ordered;
  const target = index + delta;
  [ordered[index], ordered[target]] = [ordered[target]!, ordered[index]!];
  return ordered;
}

/** The request fields for a pipeline: `{mlir_opt: "--a && --b", llc: "..."}`; empty tools omitted. */
export function toRequestFields(steps: readonly Step[]): Partial<Record<ToolField, string>> {
  const fields: Partial<Record<ToolField, string>> = {};
  for (const step of normalize(steps)) {
    const flags = step.flags.trim();
    const previous = fields[step.tool];
    fields[step.tool] = previous === undefined ? flags : `${previous} && ${flags}`;
  }
  return fields;
}

/** The inverse of toRequestFields, for requests written by hand or by other clients. */
export function fromRequestFields(fields: Partial<Record<string, unknown>>): Step[] {
  const steps: Step[] = [];
  for (const tool of TOOL_ORDER) {
    const value = fields[tool];
    if (typeof value !== "string" || value.trim() === "") continue;
    for (const part of value.split("&&")) steps.push({ tool, flags: part.trim() });
  }
  return steps;
}
