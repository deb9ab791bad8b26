/** Renders a line diff between two stages as unified hunks, colored, with both line numbers. */
import {
  changedSpan,
  diffLines,
  diffStats,
  pairReplacements,
  toHunks,
  type DiffLine,
} from "../diff";
import { h } from "./dom";

const SIGN = { same: " ", add: "+", del: "-" } as const;

/** A scrollable element showing the diff from `before` to `after`. */
export function renderDiff(before: string, after: string, beforeName: string, afterName: string) {
  const lines = diffLines(before.split("\n"), after.split("\n"));
  const { added, removed } = diffStats(lines);
  const header = h(
    "div",
    { class: "diff-header" },
    h("span", { class: "diff-names" }, `${beforeName} → ${afterName}`),
    h("span", { class: "diff-added" }, `+${added}`),
    h("span", { class: "diff-removed" }, `−${removed}`),
  );
  const body = h("div", { class: "diff-body", role: "table", "aria-label": "Diff" });
  const hunks = toHunks(lines, 3);
  if (hunks.length === 0) {
    body.appendChild(h("div", { class: "diff-empty" }, "No change between these stages."));
  }
  for (const hunk of hunks) {
    body.appendChild(h("div", { class: "diff-hunk-header" }, `@@ −${hunk.oldStart} +${hunk.newStart} @@`));
    const pairs = pairReplacements(hunk.lines);
    for (const line of hunk.lines) body.appendChild(renderLine(line, pairs.get(line)));
  }
  return h("div", { class: "diff-view" }, header, body);
}

/** A diff row; a replaced line marks the part that differs from its counterpart. */
function renderLine(line: DiffLine, counterpart: DiffLine | undefined): HTMLElement {
  return h(
    "div",
    { class: `diff-line diff-${line.op}`, role: "row" },
    h("span", { class: "ln" }, line.oldNo === undefined ? "" : String(line.oldNo)),
    h("span", { class: "ln" }, line.newNo === undefined ? "" : String(line.newNo)),
    h("span", { class: "sign" }, SIGN[line.op]),
    h("span", { class: "text" }, ...markChange(line, counterpart)),
  );
}

function markChange(line: DiffLine, counterpart: DiffLine | undefined): (Node | string)[] {
  if (!counterpart) return [line.text];
  const [oldLine, newLine] = line.op === "del" ? [line.text, counterpart.text] : [counterpart.text, line.text];
  const [start, endOld, endNew] = changedSpan(oldLine, newLine);
  const end = line.op === "del" ? endOld : endNew;
  // Lines that differ almost everywhere read better without marks.
  if (end - start > 0.7 * line.text.length) return [line.text];
  return [
    line.text.slice(0, start),
    h("mark", { class: "change" }, line.text.slice(start, end)),
    line.text.slice(end),
  ];
}
