// Lab editor. Where CodeMirror 5 is loaded (the lab page loads it), the code textarea becomes a
// Python editor; without it, or without JavaScript, the plain textarea is what the form submits.
// An uploaded .py file is loaded into the editor. No inline scripts or styles (CSP).
(function () {
  "use strict";
  // Live state lives here, not in data attributes: a textarea or input missing here (a fresh one
  // swapped in by htmx, or one in a page restored from htmx's history cache) is set up again.
  var editors = new WeakMap();
  var uploads = new WeakSet(); // file inputs already listened to

  function enhance(area) {
    if (editors.has(area) || typeof window.CodeMirror !== "function") return;
    // A page restored from htmx's history cache still holds the markup of a dead editor.
    var stale = area.nextElementSibling;
    if (stale && stale.classList.contains("CodeMirror")) stale.remove();
    // Not CodeMirror.fromTextArea: it hides the textarea with a style attribute (seen left behind
    // as style="" even once removed), and while an htmx swap settles, htmx copies an element's old
    // style attribute onto its replacement, which the CSP refuses. The hidden attribute is enough.
    var editor = window.CodeMirror(function (wrapper) { area.after(wrapper); }, {
      value: area.value,
      mode: "python",
      theme: "ringlab", // token colours in labs.css, which follow the site's light/dark theme
      // The desktop default, kept on every device: in the "contenteditable" model the browser's own
      // editing writes style attributes, which the CSP refuses.
      inputStyle: "textarea",
      lineNumbers: true,
      indentUnit: 4,
      tabSize: 4,
      indentWithTabs: false,
      matchBrackets: true,
      extraKeys: {
        Tab: function (cm) { cm.execCommand(cm.somethingSelected() ? "indentMore" : "insertSoftTab"); },
        "Shift-Tab": "indentLess",
      },
    });
    editors.set(area, editor);
    area.hidden = true;
    // The textarea always holds the editor's text: it is the form's field, read by htmx when its
    // request starts (and by the browser on a plain submit).
    editor.on("change", function () { area.value = editor.getValue(); });

    // Tab indents, so Esc then Tab leaves the editor: the keyboard is never trapped.
    var escaped = false;
    editor.on("keydown", function (cm, event) {
      if (event.key === "Escape") escaped = true;
      else if (event.key === "Tab" && escaped) event.codemirrorIgnore = true; // the browser moves focus on
      if (event.key !== "Escape" && event.key !== "Shift") escaped = false;
    });
    editor.on("blur", function () { escaped = false; });

    var input = editor.getInputField(); // CodeMirror's own (hidden) textarea, which has the focus
    var label = area.labels && area.labels[0];
    if (label) {
      if (!label.id) label.id = area.id + "-label";
      input.setAttribute("aria-labelledby", label.id);
    }
    var hint = area.form && area.form.querySelector("[data-lab-editor-hint]");
    if (hint) {
      hint.hidden = false;
      input.setAttribute("aria-describedby", hint.id);
    }
  }

  function setup(root) {
    root.querySelectorAll("[data-lab-editor]").forEach(enhance);
    root.querySelectorAll("[data-lab-upload]").forEach(function (input) {
      if (uploads.has(input)) return;
      uploads.add(input);
      input.addEventListener("change", function () {
        var file = input.files && input.files[0];
        var area = input.form && input.form.querySelector("[data-lab-editor]");
        if (!file || !area) return;
        file.text().then(function (text) {
          var editor = editors.get(area);
          if (editor) editor.setValue(text); // its change handler copies it into the textarea
          else area.value = text;
          input.value = ""; // the editor now holds the code: send it once, as text
        });
      });
    });
  }

  // The label points at the hidden textarea: a click on it focuses the editor instead.
  document.addEventListener("click", function (event) {
    var label = event.target.closest && event.target.closest("label");
    var editor = label && label.control && editors.get(label.control);
    if (!editor) return;
    event.preventDefault();
    editor.focus();
  });
  document.addEventListener("DOMContentLoaded", function () { setup(document); });
  document.addEventListener("htmx:load", function (event) { setup(event.target); });
})();
