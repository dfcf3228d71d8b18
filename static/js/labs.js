// Lab editor. Where CodeMirror 5 is loaded (the lab page loads it), the code textarea becomes a
// Python editor; without it, or without JavaScript, the plain textarea is what the form submits.
// An uploaded .py file is loaded into the editor. No inline scripts or styles (CSP).
// CodeMirror 5 keeps its text out of the field that has the focus, so a screen reader finds an empty
// box: a toggle button swaps the editor for the form's own textarea (and back), and the choice is
// remembered. (A verdict that polling brings is read out by a11y.js, from the fragment's data-announce.)
(function () {
  "use strict";
  var PLAIN_KEY = "ringlab.lab-editor"; // "plain": this browser's student chose the plain textarea
  // Live state lives here, not in data attributes: a textarea or input missing here (a fresh one
  // swapped in by htmx, or one in a page restored from htmx's history cache) is set up again.
  var editors = new WeakMap();
  var uploads = new WeakSet(); // file inputs already listened to

  function prefersPlain() {
    try { return window.localStorage.getItem(PLAIN_KEY) === "plain"; } catch (e) { return false; }
  }

  function rememberPlain(on) {
    try {
      if (on) window.localStorage.setItem(PLAIN_KEY, "plain");
      else window.localStorage.removeItem(PLAIN_KEY);
    } catch (e) { /* storage refused (private mode): the choice lasts for this page only */ }
  }

  function isPlain(area) { return editors.has(area) && !area.hidden; }

  // Shows the textarea or the editor, whichever `on` says; the other one is hidden but kept in step.
  function setPlain(area, on) {
    var editor = editors.get(area);
    if (!editor) return;
    var form = area.form;
    // The editor's change handler keeps the textarea current; text typed in plain mode goes back here.
    if (!on && editor.getValue() !== area.value) editor.setValue(area.value);
    area.hidden = !on;
    editor.getWrapperElement().hidden = on;
    var toggle = form && form.querySelector("[data-lab-plain-toggle]");
    if (toggle) toggle.setAttribute("aria-pressed", on ? "true" : "false");
    var hint = form && form.querySelector("[data-lab-editor-hint]");
    if (hint) hint.hidden = on;
    var plainHint = form && form.querySelector("[data-lab-plain-hint]");
    if (plainHint) plainHint.hidden = !on;
    if (!on) editor.refresh(); // it measured nothing while hidden
  }

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
    if (hint) input.setAttribute("aria-describedby", hint.id);
    var toggle = area.form && area.form.querySelector("[data-lab-plain-toggle]");
    if (toggle) toggle.hidden = false;
    setPlain(area, prefersPlain());
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

  document.addEventListener("click", function (event) {
    var target = event.target;
    var toggle = target.closest && target.closest("[data-lab-plain-toggle]");
    if (toggle) {
      var area = toggle.form && toggle.form.querySelector("[data-lab-editor]");
      if (!area || !editors.has(area)) return;
      var on = !isPlain(area);
      setPlain(area, on);
      rememberPlain(on);
      return;
    }
    // The label points at the hidden textarea: a click on it focuses the editor instead.
    var label = target.closest && target.closest("label");
    var control = label && label.control;
    var editor = control && editors.get(control);
    if (!editor || isPlain(control)) return;
    event.preventDefault();
    editor.focus();
  });
  document.addEventListener("DOMContentLoaded", function () { setup(document); });
  document.addEventListener("htmx:load", function (event) { setup(event.target); });
})();
