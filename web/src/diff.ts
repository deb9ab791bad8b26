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

/** Past this many edits the middle of a diff is shown as removed-then-added (bounded memory). */
export const MAX_EDITS = 4000;

/** The edit script turning `a` into `b`, line by line. */
export function diffLines(a: readonly string[], b: readonly string[]): DiffLine[] {
  // Common prefix and suffix are cheap and usually most of a pass's output.
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out: DiffLine[] = [];
  for (let i = 0; i < start; i++) out.push({ op: "same", text: a[i]!, oldNo: i + 1, newNo: i + 1 });
  const middle = myers(a.slice(start, endA), b.slice(start, endB)) ?? naive(endA - start, endB - start);
  for (const [op, i, j] of middle) {
    if (op === "same") out.push({ op, text: a[start + i]!, oldNo: start + i + 1, newNo: start + j + 1 });
    else if (op === "del") out.push({ op, text: a[start + i]!, oldNo: start + i + 1 });
    else out.push({ op, text: b[start + j]!, newNo: start + j + 1 });
  }
  for (let k = 0; k < a.length - endA; k++) {
    out.push({ op: "same", text: a[endA + k]!, oldNo: endA + k + 1, newNo: endB + k + 1 });
  }
  return out;
}

/** [op, index in a, index in b] */
type Edit = [DiffOp, number, number];

function naive(n: number, m: number): Edit[] {
  const out: Edit[] = [];
  for (let i = 0; i < n; i++) out.push(["del", i, 0]);
  for (let j = 0; j < m; j++) out.push(["add", 0, j]);
  return out;
}

/** Myers' greedy algorithm; null when the texts differ in more than MAX_EDITS lines. */
function myers(a: readonly string[], b: readonly string[]): Edit[] | null {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, MAX_EDITS);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  // trace[d] holds v[-d..d] before step d (the only part step d reads).
  const trace: Int32Array[] = [];
  let found = n + m === 0;
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice(offset - d, offset + d + 1));
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
  if (!found) return null;
  const out: Edit[] = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const vd = trace[d]!;
    const at = (k: number) => vd[k + d]!; // vd covers k in [-d, d]
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const prevK = down ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      out.push(["same", x - 1, y - 1]);
      x--;
      y--;
    }
    if (d > 0) {
      if (down) out.push(["add", x, y - 1]);
      else out.push(["del", x - 1, y]);
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
    hunks.push({
      oldStart: slice.find((l) => l.oldNo !== undefined)?.oldNo ?? nearestOld(lines, start) + 1,
      newStart: slice.find((l) => l.newNo !== undefined)?.newNo ?? nearestNew(lines, start) + 1,
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

/**
 * The changed middle of a replaced line: [start, endInOld, endInNew] such that the two lines share
 * everything before `start` and after their ends. Used to mark what changed inside a line.
 */
export function changedSpan(oldLine: string, newLine: string): [number, number, number] {
  let start = 0;
  const shortest = Math.min(oldLine.length, newLine.length);
  while (start < shortest && oldLine[start] === newLine[start]) start++;
  let endOld = oldLine.length;
  let endNew = newLine.length;
  while (endOld > start && endNew > start && oldLine[endOld - 1] === newLine[endNew - 1]) {
    endOld--;
    endNew--;
  }
  return [start, endOld, endNew];
}

/** How much two lines share at their ends, from 0 (nothing) to 1 (equal). */
function similarity(a: string, b: string): number {
  const [start, endA, endB] = changedSpan(a, b);
  const shared = start + (a.length - endA);
  return shared / Math.max(1, Math.max(a.length, b.length)) + (endA === start && endB === start ? 1 : 0);
}

/**
 * Pairs removed lines with the added lines that replace them, within each run of removals followed
 * by additions: in order, each added line takes the most similar removed line still free after the
 * last one taken, when they share at least half their text.
 */
export function pairReplacements(lines: readonly DiffLine[]): Map<DiffLine, DiffLine> {
  const pairs = new Map<DiffLine, DiffLine>();
  let i = 0;
  while (i < lines.length) {
    let dels = i;
    while (dels < lines.length && lines[dels]!.op === "del") dels++;
    let adds = dels;
    while (adds < lines.length && lines[adds]!.op === "add") adds++;
    const removed = lines.slice(i, dels);
    const added = lines.slice(dels, adds);
    if (removed.length * added.length <= 2500) {
      let next = 0;
      for (const add of added) {
        let best = -1;
        let bestScore = 0.5;
        for (let r = next; r < removed.length; r++) {
          const score = similarity(removed[r]!.text, add.text);
          if (score >= bestScore) {
            best = r;
            bestScore = score;
            if (score >= 1) break;
          }
        }
        if (best < 0) continue;
        pairs.set(removed[best]!, add);
        pairs.set(add, removed[best]!);
        next = best + 1;
      }
    }
    i = Math.max(adds, i + 1);
  }
  return pairs;
}
