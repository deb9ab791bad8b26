/**
 * The diff between two stages of a dump, drawn by @codemirror/merge: unified (the later stage with
 * the removed lines shown above the lines that replace them) or side by side, both highlighted as
 * IR, with changed words marked and long unchanged stretches collapsed.
 */
import { MergeView, unifiedMergeView } from "@codemirror/merge";
import { EditorState } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import type { Syntax } from "../catalog";
import { DIFF_CONFIG, diffStats, lineChanges } from "../diffText";
import { readOnlyExtensions } from "../editor";
import type { Stage } from "../stages";
import { clear, h } from "./dom";

export type DiffLayout = "unified" | "split";

/** Unchanged runs of more than 4 lines fold to a bar, keeping 3 lines of context by a change. */
const COLLAPSE = { margin: 3, minSize: 4 };

/** The library's colors, in the page's light/dark colors (CSS custom properties). */
const diffTheme = EditorView.theme({
  "&.cm-merge-a .cm-changedLine, .cm-deletedChunk": { backgroundColor: "var(--del-bg)" },
  "&.cm-merge-b .cm-changedLine, .cm-inlineChangedLine": { backgroundColor: "var(--add-bg)" },
  "&.cm-merge-a .cm-changedText, & .cm-deletedChunk .cm-deletedText": {
    background: "var(--del-mark)",
    borderRadius: "2px",
  },
  "&.cm-merge-b .cm-changedText": { background: "var(--add-mark)", borderRadius: "2px" },
  "&.cm-merge-a .cm-changedLineGutter, & .cm-deletedLineGutter": { background: "var(--del-fg)" },
  "&.cm-merge-b .cm-changedLineGutter": { background: "var(--add-fg)" },
  "& .cm-collapsedLines": { color: "var(--muted)", background: "var(--hunk-bg)" },
});

export class DiffView {
  readonly element: HTMLElement;
  private readonly names: HTMLElement;
  private readonly added: HTMLElement;
  private readonly removed: HTMLElement;
  private readonly body: HTMLElement;
  private destroyView: () => void = () => {};
  private wrap = false;
  private shown: Parameters<DiffView["show"]> | null = null;

  constructor() {
    this.names = h("span", { class: "diff-names" });
    this.added = h("span", { class: "diff-added" });
    this.removed = h("span", { class: "diff-removed" });
    this.body = h("div", { class: "diff-body" });
    this.element = h(
      "div",
      { class: "diff-view" },
      h("div", { class: "diff-header" }, this.names, this.added, this.removed),
      this.body,
    );
  }

  /** Shows the diff from `before` to `after`, highlighted as `syntax`. */
  show(before: Stage, after: Stage, layout: DiffLayout, syntax: Syntax): void {
    this.close();
    this.shown = [before, after, layout, syntax];
    clear(this.body);
    this.element.dataset["layout"] = layout;
    const { added, removed } = diffStats(lineChanges(before.text, after.text));
    this.names.textContent = `${before.title} → ${after.title}`;
    this.added.textContent = `+${added}`;
    this.removed.textContent = `−${removed}`;
    if (added + removed === 0) {
      this.body.appendChild(h("div", { class: "diff-empty" }, "No change between these stages."));
      return;
    }
    const viewer = (title: string) => [
      ...readOnlyExtensions(syntax, `Diff: ${title}`, this.wrap),
      diffTheme,
    ];
    if (layout === "unified") {
      const view = new EditorView({
        parent: this.body,
        state: EditorState.create({
          doc: after.text,
          extensions: [
            viewer(after.title),
            unifiedMergeView({
              original: before.text,
              mergeControls: false,
              collapseUnchanged: COLLAPSE,
              diffConfig: DIFF_CONFIG,
            }),
          ],
        }),
      });
      this.destroyView = () => view.destroy();
    } else {
      const merge = new MergeView({
        a: { doc: before.text, extensions: viewer(before.title) },
        b: { doc: after.text, extensions: viewer(after.title) },
        parent: this.body,
        gutter: true,
        collapseUnchanged: COLLAPSE,
        diffConfig: DIFF_CONFIG,
      });
      this.destroyView = () => merge.destroy();
    }
  }

  /** Wraps long lines (the pane's Wrap button). */
  setWrap(wrap: boolean): void {
    this.wrap = wrap;
    if (this.shown) this.show(...this.shown);
  }

  /** Drops the editors (while the pane shows IR, and when it goes). */
  close(): void {
    this.destroyView();
    this.destroyView = () => {};
    this.shown = null;
  }
}
