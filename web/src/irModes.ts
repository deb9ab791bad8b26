/**
 * Small tokenizers (CodeMirror StreamLanguage) for the IR texts the explorer shows: MLIR (any
 * dialect, TorchScript graphs too), LLVM IR, PTX and GPU assembly. They color what a reader scans
 * for: SSA values, ops, types, attributes, labels, comments and literals.
 */
import { StreamLanguage, type StreamParser } from "@codemirror/language";

interface Rules {
  lineComment: RegExp;
  /** Tokens tried in order after whitespace, strings and comments. */
  rules: [RegExp, string][];
}

function makeParser(name: string, spec: Rules): StreamParser<unknown> {
  return {
    name,
    token(stream) {
      if (stream.eatSpace()) return null;
      if (stream.match(spec.lineComment)) {
        stream.skipToEnd();
        return "comment";
      }
      if (stream.match(/^"(?:[^"\\]|\\.)*"?/)) return "string";
      for (const [re, style] of spec.rules) if (stream.match(re)) return style;
      stream.next();
      return null;
    },
    languageData: { commentTokens: { line: spec.lineComment.source.replace(/^\^/, "") } },
  };
}

const NUMBER: [RegExp, string] = [/^-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\b/, "number"];

export const mlir = StreamLanguage.define(
  makeParser("mlir", {
    lineComment: /^\/\//,
    rules: [
      [/^%[\w.$#-]+(?::\d+)?/, "variableName"],
      [/^@[\w.$-]+/, "function(variableName)"],
      [/^\^[\w.$-]+/, "labelName"],
      [/^#[\w.$-]+/, "meta"],
      [/^![\w.$-]+/, "typeName"],
      [/^(?:[a-z_][\w]*\.)+[a-z_][\w]*/, "keyword"],
      [/^(?:[isu]\d+|f16|bf16|f32|f64|f8\w*|index|tensor|memref|vector|none|complex)\b/, "typeName"],
      [/^(?:module|func|return|loc|affine_map|dense|true|false|unit|attributes)\b/, "keyword"],
      NUMBER,
      [/^[-=:,()[\]{}<>*x?]+/, "punctuation"],
      [/^[A-Za-z_][\w$.]*/, "name"],
    ],
  }),
);

export const llvm = StreamLanguage.define(
  makeParser("llvm", {
    lineComment: /^;/,
    rules: [
      [/^%[\w.$-]+/, "variableName"],
      [/^@[\w.$-]+/, "function(variableName)"],
      [/^![\w.$-]+/, "meta"],
      [/^#\d+/, "meta"],
      [/^[\w.$-]+:/, "labelName"],
      [/^(?:i\d+|half|bfloat|float|double|void|ptr|label|metadata|x86_fp80)\b/, "typeName"],
      [
        /^(?:define|declare|target|datalayout|triple|attributes|global|constant|private|internal|external|dso_local|local_unnamed_addr|unnamed_addr|align|nuw|nsw|nnan|ninf|fast|to|inbounds|addrspace|noundef|nocapture|readonly|writeonly|tail|call|ret|br|switch|phi|select|icmp|fcmp|load|store|getelementptr|alloca|add|sub|mul|fadd|fsub|fmul|fdiv|sdiv|udiv|and|or|xor|shl|lshr|ashr|zext|sext|trunc|bitcast|sitofp|fptosi|uitofp|ptrtoint|inttoptr|extractelement|insertelement|shufflevector|unreachable|eq|ne|slt|sle|sgt|sge|ult|ule|ugt|uge|olt|ole|ogt|oge|oeq|une)\b/,
        "keyword",
      ],
      NUMBER,
      [/^[A-Za-z_][\w.$]*/, "name"],
    ],
  }),
);

export const ptx = StreamLanguage.define(
  makeParser("ptx", {
    lineComment: /^\/\//,
    rules: [
      [/^\.(?:version|target|address_size|visible|entry|func|param|reg|shared|global|local|const|align|maxntid|reqntid|pragma|file|loc|section|weak|extern)\b/, "keyword"],
      [/^\.[\w]+/, "typeName"],
      [/^%[\w.]+/, "variableName"],
      [/^\$[\w.$]+:?/, "labelName"],
      [/^[A-Za-z_][\w$]*:/, "labelName"],
      [/^@!?%?[\w]+/, "meta"],
      NUMBER,
      [/^[a-z][\w]*/, "keyword"],
      [/^[A-Za-z_][\w$]*/, "name"],
    ],
  }),
);

/** GCN / SPIR-V disassembly and anything else assembly-like. */
export const asm = StreamLanguage.define(
  makeParser("asm", {
    lineComment: /^(?:;|\/\/|#)/,
    rules: [
      [/^%[\w.]+/, "variableName"],
      [/^\.[\w.]+/, "keyword"],
      [/^[A-Za-z_.$][\w.$]*:/, "labelName"],
      [/^[svav]\[?\d+(?::\d+)?\]?/, "variableName"],
      [/^Op[A-Z]\w*/, "keyword"],
      NUMBER,
      [/^[a-z_][\w]*/, "keyword"],
      [/^[A-Za-z_][\w$]*/, "name"],
    ],
  }),
);

/** Guesses the syntax of IR text: what a user pasted, or what a pipeline step printed. */
export function guessSyntax(text: string): "mlir" | "llvm" | "ptx" | "asm" | null {
  const head = text.slice(0, 20000);
  if (/^\s*\.(version|target)\s/m.test(head)) return "ptx";
  if (/^\s*\.amdgcn_target\b|^\s*Op(Capability|EntryPoint)\b/m.test(head)) return "asm";
  if (/^\s*(define|declare|target datalayout|target triple)\b|^; ModuleID/m.test(head)) return "llvm";
  if (/^\s*(module\b|func\.func\b|#\w+ = |%[\w.]+ = [\w.]+\.[\w.]+)/m.test(head)) return "mlir";
  return null;
}

/** The syntax of raw IR in the source editor. */
export function guessRawSyntax(text: string): "mlir" | "llvm" | "ptx" | "asm" {
  return guessSyntax(text) ?? "mlir";
}
