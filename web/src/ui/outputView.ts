/**
 * What a pane shows of a result: the output highlighted in a read-only editor, or for a dump, its
 * stages one at a time with a diff against the stage before. Knows the text on screen (for copy and
 * download).
 */
import type { Syntax } from "../catalog";
import { unifiedDiff } from "../diffText";
import { createEditor, type CodeEditor } from "../editor";
import { guessSyntax } from "../irModes";
import { splitStages, type Stage } from "../stages";
import { DiffView } from "./diffView";
import { h } from "./dom";
import { StageNav, type StageMode } from "./stageNav";

export class OutputView {
  /** The stage navigation (shown only for dumps). */
  readonly nav: HTMLElement;
  /** The output or the diff. */
  readonly area: HTMLElement;
  private readonly stageNav: StageNav;
  private readonly editorHost: HTMLElement;
  private readonly diffHost: HTMLElement;
  private readonly diffView = new DiffView();
  private readonly editor: CodeEditor;
  private output = "";
  /** The IR type's syntax; a stage after a tool may be another (llc prints assembly). */
  private baseSyntax: Syntax;
  private shownSyntax: Syntax;

  constructor(syntax: Syntax) {
    this.baseSyntax = syntax;
    this.shownSyntax = syntax;
    this.stageNav = new StageNav((stages, i, mode) => this.show(stages, i, mode));
    this.nav = this.stageNav.element;
    this.editorHost = h("div", { class: "output-host" });
    this.diffHost = h("div", { class: "diff-host", hidden: true }, this.diffView.element);
    this.area = h("div", { class: "output-area" }, this.editorHost, this.diffHost);
    this.editor = createEditor(this.editorHost, {
      text: "",
      syntax,
      readOnly: true,
      label: "IR output",
    });
  }

  setSyntax(syntax: Syntax): void {
    this.baseSyntax = syntax;
    this.useSyntax(syntax);
  }

  private useSyntax(syntax: Syntax): void {
    if (syntax === this.shownSyntax) return;
    this.shownSyntax = syntax;
    this.editor.setSyntax(syntax);
  }

  setWrap(wrap: boolean): void {
    this.editor.setWrap(wrap);
    this.diffView.setWrap(wrap);
  }

  /** Steps to the previous (-1) or next (+1) stage of a dump. */
  step(delta: -1 | 1): void {
    this.stageNav.step(delta);
  }

  /** Shows a new output; a dump is split into stages. */
  setOutput(output: string): void {
    this.output = output;
    this.stageNav.setStages(splitStages(output));
  }

  /** The text on screen: the stage, the diff (unified), or the whole output. */
  shownText(): string {
    const { stage, previous, mode } = this.stageNav.current();
    if (!stage) return this.output;
    if (mode !== "ir" && previous) {
      return unifiedDiff(previous.text, stage.text, previous.title, stage.title);
    }
    return this.editor.getText();
  }

  /** Whether a diff is on screen. */
  showsDiff(): boolean {
    const { mode, previous } = this.stageNav.current();
    return mode !== "ir" && previous !== undefined;
  }

  destroy(): void {
    this.diffView.close();
    this.editor.view.destroy();
  }

  private show(stages: Stage[], index: number, mode: StageMode): void {
    const stage = stages[index];
    if (!stage) return;
    const diff = mode !== "ir" && index > 0;
    this.editorHost.hidden = diff;
    this.diffHost.hidden = !diff;
    if (diff) {
      const syntax = guessSyntax(stage.text) ?? this.baseSyntax;
      this.diffView.show(stages[index - 1]!, stage, mode === "split" ? "split" : "unified", syntax);
    } else {
      this.diffView.close();
      const text = stages.length > 1 ? stage.text : this.output;
      const guess = index > 0 || this.baseSyntax === "text" ? guessSyntax(text) : null;
      this.useSyntax(guess ?? this.baseSyntax);
      this.editor.setText(text);
    }
  }
}
