/**
 * A line diff (Myers' O((N+M)D) algorithm) and its grouping into hunks with context, for the diff
 * between two consecutive stages of a pipeline dump.
 */

export type DiffOp = "same" | "add" | "del";

export interface DiffLine {
  op: DiffOp;
  text: string;
  /** 1-based line numbers in the old and new text (absent on the side that lacks the line). */
  oldNo?: number;
  newNo?: number;
}

export interface Hunk {
  oldStart: number;
  newStart: number;
  lines: DiffLine[];
}

/** The edit script turning `a` into `b`, line by line. */
export function diffLines(a: readonly string[], b: readonly string[]): DiffLine[] {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = false;
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!);
      let x = down ? v[offset + k + 1]! : v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = true;
        break;
      }
    }
  }
  // Walk the trace backwards to recover the script.
  const out: DiffLine[] = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const vd = trace[d]!;
    const k = x - y;
    const down = k === -d || (k !== d && vd[offset + k - 1]! < vd[offset + k + 1]!);
    const prevK = down ? k + 1 : k - 1;
    const prevX = vd[offset + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      out.push({ op: "same", text: a[x - 1]!, oldNo: x, newNo: y });
      x--;
      y--;
    }
    if (d > 0) {
      if (down) out.push({ op: "add", text: b[y - 1]!, newNo: y });
      else out.push({ op: "del", text: a[x - 1]!, oldNo: x });
    }
    x = prevX;
    y = prevY;
  }
  return out.reverse();
}

/** Groups a diff into hunks, keeping `context` unchanged lines around each change. */
export function toHunks(lines: readonly DiffLine[], context = 3): Hunk[] {
  const hunks: Hunk[] = [];
  const changed = lines.map((l) => l.op !== "same");
  let i = 0;
  while (i < lines.length) {
    if (!changed[i]) {
      i++;
      continue;
    }
    const start = Math.max(0, i - context);
    let end = i;
    // Extend while the next change is within 2*context unchanged lines.
    while (end < lines.length) {
      let next = end + 1;
      while (next < lines.length && !changed[next]) next++;
      if (next < lines.length && next - end <= 2 * context) end = next;
      else break;
    }
    const stop = Math.min(lines.length, end + context + 1);
    const slice = lines.slice(start, stop);
    const first = slice[0]!;
    hunks.push({
      oldStart: first.oldNo ?? nearestOld(lines, start),
      newStart: first.newNo ?? nearestNew(lines, start),
      lines: slice,
    });
    i = stop;
  }
  return hunks;
}

function nearestOld(lines: readonly DiffLine[], index: number): number {
  for (let j = index; j >= 0; j--) if (lines[j]!.oldNo !== undefined) return lines[j]!.oldNo!;
  return 0;
}

function nearestNew(lines: readonly DiffLine[], index: number): number {
  for (let j = index; j >= 0; j--) if (lines[j]!.newNo !== undefined) return lines[j]!.newNo!;
  return 0;
}

/** Counts of added and removed lines. */
export function diffStats(lines: readonly DiffLine[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const l of lines) {
    if (l.op === "add") added++;
    else if (l.op === "del") removed++;
  }
  return { added, removed };
}

/** Unified-diff text of two texts (for copy/download of a diff). */
export function unifiedDiff(oldText: string, newText: string, oldName: string, newName: string) {
  const hunks = toHunks(diffLines(oldText.split("\n"), newText.split("\n")));
  const out = [`--- ${oldName}`, `+++ ${newName}`];
  const sign: Record<DiffOp, string> = { same: " ", add: "+", del: "-" };
  for (const h of hunks) {
    const oldLen = h.lines.filter((l) => l.op !== "add").length;
    const newLen = h.lines.filter((l) => l.op !== "del").length;
    out.push(`@@ -${h.oldStart},${oldLen} +${h.newStart},${newLen} @@`);
    for (const l of h.lines) out.push(sign[l.op] + l.text);
  }
  return out.join("\n");
}
