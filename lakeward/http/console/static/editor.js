// The query editor's text box, for query.js (runs, tabs) and schema.js (names, completion).
// CodeMirror where it is installed: Trino's SQL highlighted, brackets matched, Tab indents,
// and a completion list as names are typed. Without it, the plain text area still runs
// queries, with neither highlighting nor completion.
"use strict";
window.lakeward.editor = (function () {
  const area = document.getElementById("sql");
  let names = function () { return []; };  // completion candidates, from schema.js
  let onRun = function () {};

  function wordBefore(line, ch) {
    const match = /[A-Za-z_][A-Za-z0-9_]*$/.exec(line.slice(0, ch));
    return match ? match[0] : "";
  }

  if (!window.CodeMirror) {
    area.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        onRun();
      }
    });
    return {
      value: function () { return area.value; },
      setValue: function (text) { area.value = text; },
      insert: function (text) {
        area.setRangeText(text, area.selectionStart, area.selectionEnd, "end");
        area.focus();
      },
      focus: function () { area.focus(); },
      onChange: function (listener) { area.addEventListener("input", listener); },
      onRun: function (listener) { onRun = listener; },
      completeFrom: function (source) { names = source; },
    };
  }

  // The names that start with the word before the cursor (not the word itself): tables, then
  // columns, then keywords, as schema.js orders them.
  function hint(cm) {
    const cursor = cm.getCursor();
    const prefix = wordBefore(cm.getLine(cursor.line), cursor.ch);
    if (!prefix) { return null; }
    const lower = prefix.toLowerCase();
    const list = names().filter(function (n) {
      const name = n.toLowerCase();
      return name.startsWith(lower) && name !== lower;
    }).slice(0, 8);
    return {
      list: list,
      from: CodeMirror.Pos(cursor.line, cursor.ch - prefix.length),
      to: cursor,
    };
  }

  function run() { onRun(); }

  const cm = CodeMirror.fromTextArea(area, {
    mode: "text/x-trino",
    lineNumbers: true,
    lineWrapping: true,
    matchBrackets: true,
    indentUnit: 2,
    tabSize: 2,
    viewportMargin: Infinity,
    extraKeys: {
      "Ctrl-Enter": run,
      "Cmd-Enter": run,
      // Tab indents (a selection's lines, or two spaces), Shift-Tab takes it back; the
      // completion list, when open, takes Tab first.
      "Tab": function (editor) {
        if (editor.somethingSelected()) { editor.execCommand("indentMore"); }
        else { editor.replaceSelection("  ", "end"); }
      },
      "Shift-Tab": "indentLess",
      "Ctrl-Space": function (editor) { editor.showHint({ hint: hint, completeSingle: false }); },
    },
  });
  cm.getWrapperElement().setAttribute("aria-label", "SQL");
  cm.getInputField().setAttribute("aria-label", "SQL");
  // The text area keeps the editor's text: a form post or a test reads it there.
  cm.on("change", function () { cm.save(); });
  cm.on("inputRead", function (editor, change) {
    if (/[A-Za-z0-9_]$/.test(change.text[change.text.length - 1] || "")) {
      editor.showHint({ hint: hint, completeSingle: false });
    }
  });

  return {
    value: function () { return cm.getValue(); },
    setValue: function (text) { cm.setValue(text); cm.clearHistory(); },
    insert: function (text) { cm.replaceSelection(text, "end"); cm.focus(); },
    focus: function () { cm.focus(); },
    onChange: function (listener) { cm.on("change", listener); },
    onRun: function (listener) { onRun = listener; },
    completeFrom: function (source) { names = source; },
  };
})();
