/**
 * CodeMirror 6 editors for the source and the outputs. Colors come from CSS custom properties, so
 * switching the page theme recolors every editor without reconfiguring it.
 */
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import {
  HighlightStyle,
  StreamLanguage,
  bracketMatching,
  foldGutter,
  indentOnInput,
  syntaxHighlighting,
  type LanguageSupport,
} from "@codemirror/language";
import { cpp } from "@codemirror/legacy-modes/mode/clike";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { Compartment, EditorState, type Extension } from "@codemirror/state";
import {
  EditorView,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { tags as t } from "@lezer/highlight";
import type { Syntax } from "./catalog";
import { asm, llvm, mlir, ptx } from "./irModes";

const highlight = HighlightStyle.define([
  { tag: [t.keyword, t.operatorKeyword, t.controlKeyword, t.definitionKeyword], color: "var(--hl-keyword)" },
  { tag: [t.typeName, t.className], color: "var(--hl-type)" },
  { tag: [t.number, t.bool, t.atom], color: "var(--hl-number)" },
  { tag: [t.string, t.special(t.string)], color: "var(--hl-string)" },
  { tag: [t.comment, t.lineComment, t.blockComment], color: "var(--hl-comment)", fontStyle: "italic" },
  { tag: [t.variableName], color: "var(--hl-variable)" },
  { tag: [t.function(t.variableName), t.function(t.propertyName)], color: "var(--hl-function)" },
  { tag: [t.labelName], color: "var(--hl-label)", fontWeight: "bold" },
  { tag: [t.meta, t.attributeName, t.annotation], color: "var(--hl-meta)" },
  { tag: [t.punctuation, t.bracket], color: "var(--hl-punct)" },
]);

const baseTheme = EditorView.theme({
  "&": { height: "100%", fontSize: "13px", backgroundColor: "var(--editor-bg)", color: "var(--fg)" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.45" },
  ".cm-gutters": {
    backgroundColor: "var(--gutter-bg)",
    color: "var(--muted)",
    borderRight: "1px solid var(--border)",
  },
  ".cm-activeLine": { backgroundColor: "var(--active-line)" },
  ".cm-activeLineGutter": { backgroundColor: "var(--active-line)" },
  "&.cm-focused .cm-cursor": { borderLeftColor: "var(--fg)" },
  "&.cm-focused .cm-selectionBackground, .cm-selectionBackground, ::selection": {
    backgroundColor: "var(--selection) !important",
  },
  ".cm-selectionMatch": { backgroundColor: "var(--selection-match)" },
  ".cm-panels": { backgroundColor: "var(--panel-bg)", color: "var(--fg)" },
});

const cppLanguage = StreamLanguage.define(cpp);

/** The language extension for a syntax name. */
export function languageFor(syntax: Syntax): Extension {
  const table: Record<Syntax, Extension | LanguageSupport> = {
    mlir,
    llvm,
    ptx,
    asm,
    python: python(),
    cpp: cppLanguage,
    text: [],
  };
  return table[syntax];
}

export interface CodeEditor {
  view: EditorView;
  setSyntax(syntax: Syntax): void;
  setWrap(wrap: boolean): void;
  setText(text: string): void;
  getText(): string;
}

/** What every editor has: line numbers, folding, highlighting in the page's colors, search. */
function commonExtensions(language: Extension, label: string): Extension[] {
  return [
    lineNumbers(),
    foldGutter(),
    drawSelection(),
    highlightActiveLineGutter(),
    highlightSelectionMatches(),
    bracketMatching(),
    syntaxHighlighting(highlight),
    baseTheme,
    language,
    keymap.of([...defaultKeymap, ...searchKeymap, ...historyKeymap]),
    EditorView.contentAttributes.of({ "aria-label": label }),
  ];
}

/** A read-only view of a text highlighted as `syntax` (the diff views' editors). */
export function readOnlyExtensions(syntax: Syntax, label: string, wrap = false): Extension[] {
  return [
    ...commonExtensions(languageFor(syntax), label),
    EditorState.readOnly.of(true),
    wrap ? EditorView.lineWrapping : [],
  ];
}

/** Creates an editor in `parent`; `onChange` fires on user edits of an editable one. */
export function createEditor(
  parent: HTMLElement,
  options: { text: string; syntax: Syntax; readOnly: boolean; label: string; onChange?: () => void },
): CodeEditor {
  const language = new Compartment();
  const wrapping = new Compartment();
  const extensions: Extension[] = [
    ...commonExtensions(language.of(languageFor(options.syntax)), options.label),
    wrapping.of([]),
  ];
  if (options.readOnly) {
    extensions.push(EditorState.readOnly.of(true));
  } else {
    extensions.push(
      history(),
      indentOnInput(),
      highlightActiveLine(),
      keymap.of([indentWithTab]),
      EditorView.updateListener.of((u) => {
        if (u.docChanged) options.onChange?.();
      }),
    );
  }
  const view = new EditorView({
    parent,
    state: EditorState.create({ doc: options.text, extensions }),
  });
  return {
    view,
    setSyntax(syntax) {
      view.dispatch({ effects: language.reconfigure(languageFor(syntax)) });
    },
    setWrap(wrap) {
      view.dispatch({ effects: wrapping.reconfigure(wrap ? EditorView.lineWrapping : []) });
    },
    setText(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    getText() {
      return view.state.doc.toString();
    },
  };
}
