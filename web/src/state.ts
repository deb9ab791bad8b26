/**
 * The page state: the source, its language, and the output panes with their IR types and pipelines.
 * This is exactly what a permalink stores; `parseState` accepts only what the page can show.
 */
import type { Language } from "./catalog";
import { isToolField, normalize, type Step } from "./pipeline";

export interface PaneState {
  irType: string;
  steps: Step[];
  dumpAfterEach: boolean;
  /** GPU target (a target name of the server's listing, sent as `target`); absent: the default. */
  target?: string;
}

export interface PageState {
  version: 1;
  language: Language;
  code: string;
  panes: PaneState[];
}

export const LANGUAGES: readonly Language[] = ["pytorch", "triton", "raw_ir"];

export function newPane(irType: string): PaneState {
  return { irType, steps: [], dumpAfterEach: false };
}

/** A validated state, or an error message saying what is wrong with the input. */
export function parseState(value: unknown): PageState | string {
  if (typeof value !== "object" || value === null) return "state is not an object";
  const r = value as Record<string, unknown>;
  const language = r["language"];
  if (typeof language !== "string" || !(LANGUAGES as readonly string[]).includes(language)) {
    return `unknown language ${JSON.stringify(language)}`;
  }
  if (typeof r["code"] !== "string") return "code is not a string";
  if (!Array.isArray(r["panes"]) || r["panes"].length === 0) return "no panes";
  const panes: PaneState[] = [];
  for (const p of r["panes"] as unknown[]) {
    const pane = parsePane(p);
    if (typeof pane === "string") return pane;
    panes.push(pane);
  }
  return { version: 1, language: language as Language, code: r["code"], panes };
}

function parsePane(value: unknown): PaneState | string {
  if (typeof value !== "object" || value === null) return "pane is not an object";
  const r = value as Record<string, unknown>;
  if (typeof r["irType"] !== "string") return "pane without irType";
  const steps: Step[] = [];
  for (const s of Array.isArray(r["steps"]) ? (r["steps"] as unknown[]) : []) {
    if (typeof s !== "object" || s === null) return "step is not an object";
    const step = s as Record<string, unknown>;
    if (!isToolField(step["tool"])) return `unknown tool ${JSON.stringify(step["tool"])}`;
    steps.push({ tool: step["tool"], flags: String(step["flags"] ?? "") });
  }
  const pane: PaneState = {
    irType: r["irType"],
    steps: normalize(steps),
    dumpAfterEach: r["dumpAfterEach"] === true,
  };
  if (typeof r["target"] === "string" && r["target"] !== "") pane.target = r["target"];
  return pane;
}
