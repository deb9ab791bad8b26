/** Unit tests of the line diff. */
import { describe, expect, it } from "vitest";
import { changedSpan, diffLines, diffStats, pairReplacements, toHunks, unifiedDiff } from "./diff";

describe("diffLines", () => {
  it("finds nothing between equal texts", () => {
    const d = diffLines(["a", "b"], ["a", "b"]);
    expect(d.every((l) => l.op === "same")).toBe(true);
  });
  it("finds one replaced line", () => {
    const d = diffLines(["a", "b", "c"], ["a", "x", "c"]);
    expect(d.map((l) => l.op + l.text)).toEqual(["samea", "delb", "addx", "samec"]);
    expect(diffStats(d)).toEqual({ added: 1, removed: 1 });
  });
  it("handles empty sides", () => {
    expect(diffLines([], ["a"]).map((l) => l.op)).toEqual(["add"]);
    expect(diffLines(["a"], []).map((l) => l.op)).toEqual(["del"]);
    expect(diffLines([], [])).toEqual([]);
  });
  it("rebuilds both texts", () => {
    const a = "1 2 3 4 5 6 7 8 9".split(" ");
    const b = "0 1 3 4 x 6 7 9 10".split(" ");
    const d = diffLines(a, b);
    expect(d.filter((l) => l.op !== "add").map((l) => l.text)).toEqual(a);
    expect(d.filter((l) => l.op !== "del").map((l) => l.text)).toEqual(b);
  });
});

describe("toHunks", () => {
  it("keeps context and splits far changes", () => {
    const a = Array.from({ length: 30 }, (_, i) => `l${i}`);
    const b = [...a];
    b[2] = "X";
    b[25] = "Y";
    const hunks = toHunks(diffLines(a, b), 3);
    expect(hunks.length).toBe(2);
    expect(hunks[0]!.oldStart).toBe(1);
    expect(hunks[1]!.oldStart).toBe(23);
  });
  it("writes a unified diff", () => {
    const text = unifiedDiff("a\nb\n", "a\nc\n", "old", "new");
    expect(text).toContain("-b\n+c");
    expect(text.startsWith("--- old\n+++ new\n@@ -1,")).toBe(true);
  });
});

describe("large diffs", () => {
  it("stays exact on long texts with few changes", () => {
    const a = Array.from({ length: 20000 }, (_, i) => `line ${i}`);
    const b = a.filter((_, i) => i % 1000 !== 0);
    const d = diffLines(a, b);
    expect(diffStats(d)).toEqual({ added: 0, removed: 20 });
  });
  it("falls back to remove-then-add past MAX_EDITS", () => {
    const a = Array.from({ length: 5000 }, (_, i) => `a${i}`);
    const b = Array.from({ length: 5000 }, (_, i) => `b${i}`);
    const d = diffLines(a, b);
    expect(diffStats(d)).toEqual({ added: 5000, removed: 5000 });
    expect(d.filter((l) => l.op !== "add").map((l) => l.text)).toEqual(a);
  });
});

describe("hunk starts", () => {
  it("count from the first line of each side in the hunk", () => {
    const hunks = toHunks(diffLines(["a", "b"], ["x", "a", "b"]));
    expect(hunks[0]!.oldStart).toBe(1);
    expect(hunks[0]!.newStart).toBe(1);
    const replaced = toHunks(diffLines(["a"], ["b"]));
    expect([replaced[0]!.oldStart, replaced[0]!.newStart]).toEqual([1, 1]);
  });
});

describe("changes inside a line", () => {
  it("finds the differing middle", () => {
    expect(changedSpan("%2 = arith.addf %0, %arg2", "%1 = arith.addf %0, %arg2")).toEqual([1, 2, 2]);
    expect(changedSpan("abc", "abc")).toEqual([3, 3, 3]);
    expect(changedSpan("ab", "aXYb")).toEqual([1, 1, 3]);
  });
  it("pairs removed runs with the added runs after them", () => {
    const d = diffLines(["a", "%x = foo", "c"], ["a", "%y = foo", "c"]);
    const pairs = pairReplacements(d);
    expect(pairs.get(d[1]!)!.text).toBe("%y = foo");
    expect(pairs.get(d[2]!)!.text).toBe("%x = foo");
    expect(pairReplacements(diffLines(["b"], ["B"])).size).toBe(0);
    expect(pairs.has(d[0]!)).toBe(false);
  });
  it("pairs by similarity, not by position", () => {
    const d = diffLines(
      ["%1 = arith.addf %cst, %cst : f32", "%2 = arith.addf %0, %arg2 : f32", "return %2 : f32"],
      ["%1 = arith.addf %0, %arg2 : f32", "return %1 : f32"],
    );
    const pairs = pairReplacements(d);
    const byText = (t: string) => d.find((l) => l.op === "add" && l.text === t)!;
    expect(pairs.get(byText("%1 = arith.addf %0, %arg2 : f32"))!.text).toBe(
      "%2 = arith.addf %0, %arg2 : f32",
    );
    expect(pairs.get(byText("return %1 : f32"))!.text).toBe("return %2 : f32");
  });
});
