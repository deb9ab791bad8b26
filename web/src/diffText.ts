/**
 * Line-level facts of a diff between two stages, computed by @codemirror/merge (the same diff the
 * pane's diff views show): changed line ranges, added/removed counts, and unified-diff text for copy
 * and download.
 */
import { Change, Chunk, diff, type DiffConfig } from "@codemirror/merge";
import { Text } from "@codemirror/state";

/** A changed range of lines: `aCount` lines of the old text at `aStart` (0-based) became `bCount`
 * lines of the new text at `bStart`. */
export interface LineChange {
  aStart: number;
  aCount: number;
  bStart: number;
  bCount: number;
}

/**
 * The diff of two texts, line by line first: each distinct line becomes one character and the
 * library's `diff` compares those strings (the line-mode trick of diff-match-patch), then the
 * library diffs the text inside each replaced run of lines, so changed words are still marked.
 * IR is line-oriented: on a 3000-line dump whose values a pass renumbered, the library's plain
 * character diff takes seconds, or with its effort limit (`scanLimit`) marks almost every line as
 * changed; line first, it is exact and takes milliseconds.
 */
/** Effort limits of the two levels (the library's `scanLimit`: past that many changed lines, or
 * characters within replaced lines, the library falls back to a coarser diff of that stretch). */
const LINE_SCAN_LIMIT = 4000;
const CHAR_SCAN_LIMIT = 500;

export function lineFirstDiff(a: string, b: string): readonly Change[] {
  const codes = new Map<string, string>();
  const encode = (lines: string[]) => {
    let out = "";
    for (const line of lines) {
      let code = codes.get(line);
      if (code === undefined) {
        const next = codeUnit(codes.size);
        if (next === null) return null;
        codes.set(line, next);
        code = next;
      }
      out += code;
    }
    return out;
  };
  const linesA = splitKeepingBreaks(a);
  const linesB = splitKeepingBreaks(b);
  const tokensA = encode(linesA);
  const tokensB = encode(linesB);
  if (tokensA === null || tokensB === null) return diff(a, b, { scanLimit: CHAR_SCAN_LIMIT });
  const startsA = offsets(linesA);
  const startsB = offsets(linesB);
  const out: Change[] = [];
  for (const c of diff(tokensA, tokensB, { scanLimit: LINE_SCAN_LIMIT })) {
    const fromA = startsA[c.fromA]!;
    const toA = startsA[c.toA]!;
    const fromB = startsB[c.fromB]!;
    const toB = startsB[c.toB]!;
    if (fromA === toA || fromB === toB) {
      out.push(new Change(fromA, toA, fromB, toB));
      continue;
    }
    for (const inner of diff(a.slice(fromA, toA), b.slice(fromB, toB), { scanLimit: CHAR_SCAN_LIMIT })) {
      out.push(
        new Change(fromA + inner.fromA, fromA + inner.toA, fromB + inner.fromB, fromB + inner.toB),
      );
    }
  }
  return out;
}

/** The `n`th code unit that is not half of a surrogate pair, or null past the last one. */
function codeUnit(n: number): string | null {
  const code = n < 0xd800 ? n : n + 0x800;
  return code > 0xffff ? null : String.fromCharCode(code);
}

/** The lines of a text, each with its line break. */
function splitKeepingBreaks(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** Where each line starts, plus the end of the text. */
function offsets(lines: string[]): number[] {
  const out = [0];
  for (const line of lines) out.push(out[out.length - 1]! + line.length);
  return out;
}

/** The diff settings of the views and of `lineChanges`, so they agree. */
export const DIFF_CONFIG: DiffConfig = { override: lineFirstDiff };

export function toText(text: string): Text {
  return Text.of(text.split("\n"));
}

/** The changed line ranges from `before` to `after`, in order. */
export function lineChanges(before: string, after: string): LineChange[] {
  const a = toText(before);
  const b = toText(after);
  return Chunk.build(a, b, DIFF_CONFIG).map((chunk) => {
    const [aStart, aCount] = lineRange(a, chunk.fromA, chunk.toA, chunk.endA);
    const [bStart, bCount] = lineRange(b, chunk.fromB, chunk.toB, chunk.endB);
    return { aStart, aCount, bStart, bCount };
  });
}

/** [first line (0-based), count] of a chunk's side; an empty side counts no line. */
function lineRange(doc: Text, from: number, to: number, end: number): [number, number] {
  const start = from > doc.length ? doc.lines : doc.lineAt(from).number - 1;
  if (to <= from) return [start, 0];
  return [start, doc.lineAt(end).number - start];
}

/** Counts of added and removed lines (a replaced line counts once each). */
export function diffStats(changes: readonly LineChange[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const c of changes) {
    added += c.bCount;
    removed += c.aCount;
  }
  return { added, removed };
}

/** Unified-diff text of two texts, with `context` unchanged lines around each change. */
export function unifiedDiff(
  before: string,
  after: string,
  beforeName: string,
  afterName: string,
  context = 3,
): string {
  const a = before.split("\n");
  const b = after.split("\n");
  const out = [`--- ${beforeName}`, `+++ ${afterName}`];
  for (const hunk of hunks(lineChanges(before, after), a.length, context)) {
    const aLen = hunk.aEnd - hunk.aStart;
    const bLen = hunk.bEnd - hunk.bStart;
    out.push(`@@ -${rangeStart(hunk.aStart, aLen)},${aLen} +${rangeStart(hunk.bStart, bLen)},${bLen} @@`);
    let line = hunk.aStart;
    for (const c of hunk.changes) {
      for (; line < c.aStart; line++) out.push(" " + a[line]);
      for (let i = 0; i < c.aCount; i++) out.push("-" + a[c.aStart + i]);
      for (let i = 0; i < c.bCount; i++) out.push("+" + b[c.bStart + i]);
      line = c.aStart + c.aCount;
    }
    for (; line < hunk.aEnd; line++) out.push(" " + a[line]);
  }
  return out.join("\n");
}

/** The 1-based start of a hunk side; an empty side names the line before it, as `diff -u` does. */
function rangeStart(start: number, length: number): number {
  return length === 0 ? start : start + 1;
}

interface Hunk {
  aStart: number;
  aEnd: number;
  bStart: number;
  bEnd: number;
  changes: LineChange[];
}

/** Groups changes whose context would touch or overlap into one hunk each. */
function hunks(changes: readonly LineChange[], aLines: number, context: number): Hunk[] {
  const out: Hunk[] = [];
  for (const c of changes) {
    const aStart = Math.max(0, c.aStart - context);
    const aEnd = Math.min(aLines, c.aStart + c.aCount + context);
    // Outside a change both texts hold the same lines, shifted by the sizes of earlier changes.
    const shift = c.bStart + c.bCount - (c.aStart + c.aCount);
    const last = out[out.length - 1];
    if (last && aStart <= last.aEnd) {
      last.aEnd = aEnd;
      last.bEnd = aEnd + shift;
      last.changes.push(c);
    } else {
      out.push({ aStart, aEnd, bStart: aStart + (c.bStart - c.aStart), bEnd: aEnd + shift, changes: [c] });
    }
  }
  return out;
}
