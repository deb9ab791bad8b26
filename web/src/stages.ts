/**
 * Splits a "dump after each step" output into stages on the guide's byte-exact delimiters:
 * `===== Initial IR =====` and `===== IR after <tool> <flags> =====`, each on a line of its own.
 */

export interface Stage {
  /** "Initial IR", "mlir-opt --canonicalize", or "Output" for an output without delimiters. */
  title: string;
  text: string;
}

const DELIMITER = /^===== (Initial IR|IR after (.*)) =====$/;

/** The stages of an output; an output without any delimiter is one stage named "Output". */
export function splitStages(output: string): Stage[] {
  const lines = output.split("\n");
  const stages: Stage[] = [];
  let current: { title: string; lines: string[] } | null = null;
  const preamble: string[] = [];
  const close = () => {
    if (current) stages.push({ title: current.title, text: trimBlankEdges(current.lines) });
  };
  for (const line of lines) {
    const match = DELIMITER.exec(line);
    if (match) {
      close();
      current = { title: match[2] ?? match[1]!, lines: [] };
    } else if (current) {
      current.lines.push(line);
    } else {
      preamble.push(line);
    }
  }
  close();
  if (stages.length === 0) return [{ title: "Output", text: output }];
  const before = trimBlankEdges(preamble);
  if (before !== "") stages.unshift({ title: "Before the first stage", text: before });
  return stages;
}

/** Whether an output carries stage delimiters. */
export function hasStages(output: string): boolean {
  return output.split("\n").some((line) => DELIMITER.test(line));
}

function trimBlankEdges(lines: string[]): string {
  let start = 0;
  let end = lines.length;
  while (start < end && lines[start]!.trim() === "") start++;
  while (end > start && lines[end - 1]!.trim() === "") end--;
  return lines.slice(start, end).join("\n");
}
