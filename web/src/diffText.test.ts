/** Unit tests of the line facts read from @codemirror/merge's diff: ranges, counts, unified text. */
import { describe, expect, it } from "vitest";
import { diffStats, lineChanges, lineFirstDiff, unifiedDiff } from "./diffText";

const lines = (n: number, prefix = "l") => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe("lineChanges", () => {
  it("finds nothing between equal texts", () => {
    expect(lineChanges("a\nb", "a\nb")).toEqual([]);
    expect(lineChanges("", "")).toEqual([]);
  });
  it("finds one replaced line", () => {
    const changes = lineChanges("a\nb\nc", "a\nx\nc");
    expect(changes).toEqual([{ aStart: 1, aCount: 1, bStart: 1, bCount: 1 }]);
    expect(diffStats(changes)).toEqual({ added: 1, removed: 1 });
  });
  it("counts inserted and removed lines", () => {
    expect(lineChanges("a", "x\na")).toEqual([{ aStart: 0, aCount: 0, bStart: 0, bCount: 1 }]);
    expect(diffStats(lineChanges("a\nb\nc", "a\nc"))).toEqual({ added: 0, removed: 1 });
  });
  it("stays exact on long texts with few changes", () => {
    const a = lines(20000);
    const b = a.filter((_, i) => i % 1000 !== 0);
    expect(diffStats(lineChanges(a.join("\n"), b.join("\n")))).toEqual({ added: 0, removed: 20 });
  });
  it("answers quickly for long texts that differ everywhere", () => {
    const started = performance.now();
    const stats = diffStats(lineChanges(lines(5000, "a").join("\n"), lines(5000, "b").join("\n")));
    expect(stats).toEqual({ added: 5000, removed: 5000 });
    expect(performance.now() - started).toBeLessThan(3000);
  });
  it("is exact and quick on an IR dump whose values a pass renumbered", () => {
    const before = Array.from({ length: 3000 }, (_, i) => `  %${i} = arith.addf %${i - 1}, %a : f32`);
    const after = before
      .map((l, i) => (i % 7 === 0 ? l.replace("addf", "mulf") : l))
      .filter((_, i) => i % 11 !== 0);
    const started = performance.now();
    const { added, removed } = diffStats(lineChanges(before.join("\n"), after.join("\n")));
    expect(performance.now() - started).toBeLessThan(3000);
    // 273 lines removed, 390 replaced: a line diff cannot do with fewer changed lines
    expect([added, removed]).toEqual([390, 663]);
  });
});

describe("lineFirstDiff", () => {
  it("marks the changed part of a replaced line, not the whole line", () => {
    const a = "a\n%1 = arith.addf %0, %0\nc";
    const b = "a\n%1 = arith.mulf %0, %0\nc";
    const changes = lineFirstDiff(a, b);
    expect(changes.map((c) => [a.slice(c.fromA, c.toA), b.slice(c.fromB, c.toB)])).toEqual([
      ["add", "mul"],
    ]);
  });
  it("keeps whole inserted and removed lines", () => {
    const changes = lineFirstDiff("a\nb\n", "a\nx\nb\n");
    expect(changes.map((c) => [c.fromA, c.toA, c.fromB, c.toB])).toEqual([[2, 2, 2, 4]]);
  });
});

describe("unifiedDiff", () => {
  it("writes a unified diff", () => {
    expect(unifiedDiff("a\nb\nc", "a\nx\nc", "old", "new")).toBe(
      ["--- old", "+++ new", "@@ -1,3 +1,3 @@", " a", "-b", "+x", " c"].join("\n"),
    );
  });
  it("keeps context and splits far changes into hunks", () => {
    const a = lines(30);
    const b = [...a];
    b[2] = "X";
    b[25] = "Y";
    const text = unifiedDiff(a.join("\n"), b.join("\n"), "old", "new");
    const headers = text.split("\n").filter((l) => l.startsWith("@@"));
    expect(headers).toEqual(["@@ -1,6 +1,6 @@", "@@ -23,7 +23,7 @@"]);
    expect(text).toContain(" l1\n-l2\n+X\n l3");
  });
  it("joins changes whose context touches", () => {
    const a = lines(20);
    const b = [...a];
    b[5] = "X";
    b[11] = "Y";
    const headers = unifiedDiff(a.join("\n"), b.join("\n"), "o", "n")
      .split("\n")
      .filter((l) => l.startsWith("@@"));
    expect(headers).toEqual(["@@ -3,13 +3,13 @@"]);
  });
  it("numbers hunks that insert at the top or remove at the end", () => {
    expect(unifiedDiff("a\nb", "x\na\nb", "o", "n").split("\n")[2]).toBe("@@ -1,2 +1,3 @@");
    const removed = unifiedDiff("a\nb\nc\nd\ne\nf\ng\nh", "a\nb\nc\nd\ne\nf\ng", "o", "n");
    expect(removed.split("\n").slice(2)).toEqual(["@@ -4,5 +4,4 @@", " d", " e", " f", "-g", "-h", "+g"]);
  });
  it("rebuilds both texts from a single hunk with enough context", () => {
    const a = "1 2 3 4 5 6 7 8 9".split(" ");
    const b = "0 1 3 4 x 6 7 9 10".split(" ");
    const body = unifiedDiff(a.join("\n"), b.join("\n"), "o", "n", 100).split("\n").slice(3);
    expect(body.filter((l) => !l.startsWith("+")).map((l) => l.slice(1))).toEqual(a);
    expect(body.filter((l) => !l.startsWith("-")).map((l) => l.slice(1))).toEqual(b);
  });
  it("has only the header when nothing changed", () => {
    expect(unifiedDiff("a", "a", "o", "n")).toBe("--- o\n+++ n");
  });
});
